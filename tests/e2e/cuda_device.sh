#!/usr/bin/env bash
# [job] device = cuda end to end. With a GPU: 20 training steps of LeNet-5 on
# the GPU, with and without CUDA graphs, end within float tolerance of the
# same steps on the CPU, a burst plan on 2 ranks on the GPU(s) within
# tolerance of the same plan on the CPU, sma learners (2 replicas on the
# GPU, each on its own streams) within tolerance of the CPU's, 2 ranks on
# the GPU(s) within tolerance of 1 rank (checkpoints compared), the ranks
# talking through NCCL when each has a GPU of its own, else through the host
# (as the banner says), and a foreground on 2 ranks with a background job on
# the same GPU(s) both train.
# Without one: the job stops at once with one line naming the job file and the
# reason, on 1 and 2 ranks, and a background job that asks for cuda is refused
# naming its file.
# Usage: cuda_device.sh BURSTPOOL_BINARY SOURCE_DIR
set -u
source "$(dirname "$0")/lib/harness.sh" "$@"

cat >"$work/job.ini" <<JOB
[job]
model = $src/jobs/models/lenet5.ini
seed = 2
[data]
source = synthetic
synthetic_train_samples = 256
synthetic_test_samples = 64
[train]
batch_size = 32
steps = 20
log_every = 10
[optimizer]
lr = 0.02
nesterov = true
JOB
background_job "$work/bg.ini" cuda
sed 's/^steps = 20$/steps = 200/' "$work/job.ini" >"$work/fg.ini"
printf '[background]\njob = %s\ncalibrate_steps = 5\n' "$work/bg.ini" >>"$work/fg.ini"
two() { timeout 120 mpirun -np 2 "$bin" train "$@"; }
weights_close() {  # weights_close A B WHAT: every weight of A.h5 and B.h5 within 1e-4
  h5diff -d 1e-4 "$work/$1.h5" "$work/$2.h5" /weights /weights >"$work/diff_$2.txt" ||
    fail "$3: weights differ by more than 1e-4: $(head -5 "$work/diff_$2.txt")"
}
# A burst plan: the classifier on rank 1 only, so slices move between ranks.
"$bin" plan --data-parallel "$src/jobs/models/lenet5.ini" --ranks 2 --global-batch 32 --out "$work/plan.json" >/dev/null
python3 - "$work/plan.json" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
for layer in p["layers"]:
    if layer["name"].startswith("fc") or layer["name"].startswith("relu3") or layer["name"].startswith("relu4") \
            or layer["name"] == "loss":
        layer["ranks"] = [1]
json.dump(p, open(sys.argv[1], "w"))
PY

if "$bin" train "$work/job.ini" --set job.device=cuda --checkpoint "$work/gpu.h5" >"$work/gpu.out" 2>"$work/gpu.err"; then
  echo "a GPU is here: comparing with the CPU and with 2 ranks"
  grep -q "GPU 0" "$work/gpu.out" || fail "banner does not name the GPU: $(head -1 "$work/gpu.out")"
  "$bin" train "$work/job.ini" --checkpoint "$work/cpu.h5" >/dev/null || fail "cpu run failed"
  weights_close cpu gpu "GPU against CPU"
  "$bin" train "$work/job.ini" --set job.device=cuda --set job.cuda_graphs=true --checkpoint "$work/graphs.h5" \
    >"$work/graphs.out" 2>&1 || fail "GPU with CUDA graphs failed: $(tail -3 "$work/graphs.out")"
  weights_close cpu graphs "GPU with CUDA graphs against CPU"
  sma=(--set sync.strategy=sma --set sync.learners=2 --set optimizer.nesterov=false --set train.batch_size=16)
  "$bin" train "$work/job.ini" "${sma[@]}" --checkpoint "$work/sma_cpu.h5" >/dev/null 2>&1 || fail "sma on the CPU failed"
  "$bin" train "$work/job.ini" "${sma[@]}" --set job.device=cuda --checkpoint "$work/sma_gpu.h5" \
    >"$work/sma_gpu.out" 2>&1 || fail "sma learners on the GPU failed: $(tail -3 "$work/sma_gpu.out")"
  weights_close sma_cpu sma_gpu "sma learners, GPU against CPU"
  two "$work/job.ini" --set job.device=cuda --checkpoint "$work/gpu2.h5" >"$work/gpu2.out" 2>&1 ||
    fail "2 ranks on the GPU failed: $(tail -3 "$work/gpu2.out")"
  weights_close gpu gpu2 "2 GPU ranks against 1"
  two "$work/job.ini" --plan "$work/plan.json" --checkpoint "$work/cpu_burst.h5" >/dev/null 2>&1 ||
    fail "burst plan on the CPU failed"
  two "$work/job.ini" --set job.device=cuda --plan "$work/plan.json" --checkpoint "$work/gpu_burst.h5" \
    >"$work/gpu_burst.out" 2>&1 || fail "burst plan on the GPU failed: $(tail -3 "$work/gpu_burst.out")"
  weights_close cpu_burst gpu_burst "burst plan, GPU against CPU"
  # Two GPUs or more: each rank has its own, so NCCL carries slices and sums; one: the host does.
  between="between ranks through host memory"
  (( $(nvidia-smi -L 2>/dev/null | grep -c '^GPU') >= 2 )) && between="NCCL between ranks"
  for run in gpu2 gpu_burst; do
    grep -q "$between" "$work/$run.out" || fail "$run: the banner does not say '$between': $(grep -m1 GPU "$work/$run.out")"
  done
  (unset OMPI_MCA_mpi_yield_when_idle
   two "$work/fg.ini" --set job.device=cuda --metrics "$work/mux.json" >"$work/mux.out" 2>&1) ||
    fail "foreground with a GPU background failed: $(tail -3 "$work/mux.out")"
  python3 - "$work/mux.json" <<'PY' || fail "GPU multiplexing metrics: $(cat "$work/mux.json")"
import json, sys
m = json.load(open(sys.argv[1]))
assert m["background_samples_per_second"] > 0, m
assert m["background"]["last_loss"] < m["background"]["first_loss"], m["background"]
print("GPU multiplexing: foreground slowdown", m["foreground_slowdown"], "background samples/s",
      m["background_samples_per_second"])
PY
else
  grep -Eq "job\.ini: \[job\] device = cuda: (no GPU is visible|this build has no CUDA backend)" "$work/gpu.err" ||
    fail "no GPU, but not the expected message: $(cat "$work/gpu.err")"
  [[ $(wc -l <"$work/gpu.err") == 1 ]] || fail "more than one line of error: $(cat "$work/gpu.err")"
  "$bin" train "$work/job.ini" --set job.device=cuda --set sync.strategy=sma --set optimizer.nesterov=false \
    >/dev/null 2>"$work/sma.err" && fail "sma learners without a GPU accepted"
  grep -Eq "job\.ini: \[job\] device = cuda: (no GPU is visible|this build has no CUDA backend)" "$work/sma.err" &&
    [[ $(wc -l <"$work/sma.err") == 1 ]] || fail "sma learners without a GPU: $(cat "$work/sma.err")"
  two "$work/job.ini" --set job.device=cuda >/dev/null 2>"$work/two.err" && fail "two ranks without a GPU accepted"
  grep -Eq "device = cuda: (no GPU is visible|this build has no CUDA backend)" "$work/two.err" ||
    fail "two ranks without a GPU: $(head -3 "$work/two.err")"
  two "$work/fg.ini" --steps 20 >/dev/null 2>"$work/bg.err" && fail "a cuda background job without a GPU accepted"
  grep -Eq "bg\.ini: \[job\] device = cuda: (no GPU is visible|this build has no CUDA backend)" "$work/bg.err" ||
    fail "cuda background without a GPU: $(head -3 "$work/bg.err")"
fi
finish cuda_device

#!/usr/bin/env bash
# The device code paths end to end ([job] device = cuda, and device = twin,
# the stand-in that runs them on the CPU with a second copy of the model in
# host memory). For the twin always, and for cuda when a GPU is here: 20
# training steps of LeNet-5 end within float tolerance of the same steps on
# the CPU (also with CUDA graphs, on the GPU), a burst plan on 2 ranks within
# tolerance of the same plan on the CPU, and so is data parallel on 2 ranks
# run layer by layer (device_calls = per_layer), sma and local-sgd learners (2
# replicas, each its own device model) within tolerance of the CPU's, 2 ranks within tolerance
# of 1 rank (checkpoints compared), the ranks talking through NCCL when each
# has a GPU of its own, else through the host (as the banner says), and a
# foreground on 2 ranks with a background job on the same device both train,
# the foreground's weights bit for bit those of the foreground alone. On the
# GPU (cuDNN algorithms that sum directly, cudnn_algorithms = gemm), a rerun
# gives the same bits; in tf32 and bf16, and with cuDNN's heuristic and
# measured choices, the 20 steps stay within a looser bound of the CPU's.
# Without a GPU: device = cuda stops at once with one line naming the job file
# and the reason, on 1 and 2 ranks, and a background job that asks for cuda
# is refused naming its file.
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
# A foreground of 200 steps with a background job on DEVICE: fg_DEVICE.ini.
foreground_with_background() {
  background_job "$work/bg_$1.ini" "$1"
  sed 's/^steps = 20$/steps = 200/' "$work/job.ini" >"$work/fg_$1.ini"
  # The gate's policy is multiplex.sh's to test; here the device's plumbing. With
  # one core per rank on a busy machine the foreground slows past the default
  # max_slowdown (1.1) and the gate rightly holds the background back, so it is
  # opened wide: the background must get steps and learn.
  printf '[background]\njob = %s\ncalibrate_steps = 5\nmax_slowdown = 10\n' "$work/bg_$1.ini" >>"$work/fg_$1.ini"
}
two() { timeout 120 mpirun -np 2 "$bin" train "$@"; }
# The GPU with cuDNN algorithms that sum directly, whose results are within
# float rounding of the CPU's ([job] cudnn_algorithms = gemm).
gpu=(--set job.device=cuda --set job.cudnn_algorithms=gemm)
# weights_close A B WHAT [TOLERANCE]: every weight of A.h5 and B.h5 within
# TOLERANCE (default 1e-4; "exact": bit for bit). Says the largest difference.
weights_close() {
  local tol=${4:-1e-4} within=()
  [[ $tol == exact ]] || within=(-d "$tol")
  h5diff "${within[@]}" "$work/$1.h5" "$work/$2.h5" /weights /weights >"$work/diff_$2.txt" ||
    fail "$3: weights differ (tolerance $tol): $(head -3 "$work/diff_$2.txt")"
  # h5diff's report mode lists every element that differs at all, with the difference last.
  h5diff -r "$work/$1.h5" "$work/$2.h5" /weights /weights >"$work/report_$2.txt"
  echo "$3: largest weight difference $(awk '/^\[/ {d = $NF < 0 ? -$NF : $NF; if (d > m) m = d} END {print m + 0}' \
    "$work/report_$2.txt")"
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

# Every comparison of a device DEVICE with the CPU; its runs are named after
# it. The twin runs the CPU's layers on the same numbers: the same weights bit
# for bit, except 2 ranks against 1 (other sums). The GPU runs as "${gpu[@]}".
check_device() {
  local dev=$1 d=(--set job.device=$1) same=1e-4
  [[ $dev == twin ]] && same=exact
  [[ $dev == cuda ]] && d=("${gpu[@]}")
  echo "device $dev: comparing with the CPU and with 2 ranks"
  "$bin" train "$work/job.ini" "${d[@]}" --checkpoint "$work/$dev.h5" >"$work/$dev.out" 2>&1 ||
    fail "$dev: training failed: $(tail -3 "$work/$dev.out")"
  weights_close cpu "$dev" "$dev against CPU" $same
  local strategy
  for strategy in sma local; do  # small-batch learners: the arrays below
    local -n learner_args=$strategy
    "$bin" train "$work/job.ini" "${learner_args[@]}" "${d[@]}" --checkpoint "$work/${strategy}_$dev.h5" \
      >"$work/${strategy}_$dev.out" 2>&1 || fail "$strategy learners on $dev failed: $(tail -3 "$work/${strategy}_$dev.out")"
    weights_close "${strategy}_cpu" "${strategy}_$dev" "$strategy learners, $dev against CPU" $same
  done
  two "$work/job.ini" "${d[@]}" --checkpoint "$work/${dev}2.h5" >"$work/${dev}2.out" 2>&1 ||
    fail "2 ranks on $dev failed: $(tail -3 "$work/${dev}2.out")"
  weights_close "$dev" "${dev}2" "2 $dev ranks against 1"
  two "$work/job.ini" "${d[@]}" --plan "$work/plan.json" --checkpoint "$work/${dev}_burst.h5" \
    >"$work/${dev}_burst.out" 2>&1 || fail "burst plan on $dev failed: $(tail -3 "$work/${dev}_burst.out")"
  weights_close cpu_burst "${dev}_burst" "burst plan, $dev against CPU" $same
  # Data parallel layer by layer ([job] device_calls = per_layer), as burst plans run.
  two "$work/job.ini" "${d[@]}" --set job.device_calls=per_layer --checkpoint "$work/${dev}_layers.h5" \
    >"$work/${dev}_layers.out" 2>&1 || fail "per_layer on $dev failed: $(tail -3 "$work/${dev}_layers.out")"
  weights_close cpu2 "${dev}_layers" "data parallel layer by layer, 2 $dev ranks against 2 CPU ranks" $same
  grep -q ", per-layer calls," "$work/${dev}_layers.out" || fail "per_layer: the banner does not say so"
  # Two GPUs or more: each rank has its own, so NCCL carries slices and sums; one GPU, or the twin: the host does.
  local between="between ranks through host memory"
  [[ $dev == cuda ]] && (( $(nvidia-smi -L 2>/dev/null | grep -c '^GPU') >= 2 )) && between="NCCL between ranks"
  for run in "${dev}2" "${dev}_burst" "${dev}_layers"; do
    grep -q "$between" "$work/$run.out" || fail "$run: the banner does not say '$between': $(head -1 "$work/$run.out")"
  done
  foreground_with_background "$dev"
  (unset OMPI_MCA_mpi_yield_when_idle
   two "$work/fg_$dev.ini" "${d[@]}" --metrics "$work/mux_$dev.json" --checkpoint "$work/fg_shared_$dev.h5" \
     >"$work/mux_$dev.out" 2>&1) || fail "foreground with a $dev background failed: $(tail -3 "$work/mux_$dev.out")"
  two "$work/fg_$dev.ini" "${d[@]}" --set background.job=none --checkpoint "$work/fg_alone_$dev.h5" >/dev/null 2>&1 ||
    fail "foreground alone on $dev failed"
  # The background must not touch the foreground's numbers (both are deterministic on every device).
  weights_close "fg_alone_$dev" "fg_shared_$dev" "foreground on $dev with and without the background" exact
  python3 - "$work/mux_$dev.json" "$dev" <<'PY' || fail "$dev multiplexing metrics: $(cat "$work/mux_$dev.json")"
import json, sys
m = json.load(open(sys.argv[1]))
assert m["background_samples_per_second"] > 0, m
assert m["background"]["last_loss"] < m["background"]["first_loss"], m["background"]
print(sys.argv[2], "multiplexing: foreground slowdown", m["foreground_slowdown"], "background samples/s",
      m["background_samples_per_second"])
PY
}

sma=(--set sync.strategy=sma --set sync.learners=2 --set optimizer.nesterov=false --set train.batch_size=16
     --set schedule.type=step --set schedule.step_size=10 --set schedule.gamma=0.1)  # restarts from z at step 10
"$bin" train "$work/job.ini" --checkpoint "$work/cpu.h5" >/dev/null || fail "cpu run failed"
local=(--set sync.strategy=local-sgd --set sync.learners=2 --set sync.local_steps=3 --set train.batch_size=16)
for strategy in sma local; do
  declare -n learner_args=$strategy
  "$bin" train "$work/job.ini" "${learner_args[@]}" --checkpoint "$work/${strategy}_cpu.h5" >/dev/null 2>&1 ||
    fail "$strategy learners on the CPU failed"
done
two "$work/job.ini" --plan "$work/plan.json" --checkpoint "$work/cpu_burst.h5" >/dev/null 2>&1 ||
  fail "burst plan on the CPU failed"
two "$work/job.ini" --checkpoint "$work/cpu2.h5" >/dev/null 2>&1 || fail "2 ranks on the CPU failed"
check_device twin

if "$bin" train "$work/job.ini" "${gpu[@]}" --checkpoint "$work/gpu_probe.h5" >"$work/gpu.out" 2>"$work/gpu.err"; then
  echo "a GPU is here"
  grep -q "GPU 0" "$work/gpu.out" || fail "banner does not name the GPU: $(head -1 "$work/gpu.out")"
  check_device cuda
  # Deterministic kernels (cuDNN algorithms, batch-norm sums): a rerun gives the same bits.
  weights_close gpu_probe cuda "two identical GPU runs" exact
  "$bin" train "$work/job.ini" "${gpu[@]}" --set job.cuda_graphs=true --checkpoint "$work/graphs.h5" \
    >"$work/graphs.out" 2>&1 || fail "GPU with CUDA graphs failed: $(tail -3 "$work/graphs.out")"
  weights_close cpu graphs "GPU with CUDA graphs against CPU"
  # The other precisions, 20 steps each: bf16 against the CPU in bf16 (both
  # round every product's operands and every activation to bf16, and sum in
  # fp32), TF32 (GPU only) against the CPU's fp32. Sums in another order move
  # a bf16 result by whole bf16 steps (2^-8 relative), so the bound is for
  # gross errors, as for cuDNN's own choices below.
  "$bin" train "$work/job.ini" --set job.precision=bf16 --checkpoint "$work/cpu_bf16.h5" >/dev/null 2>&1 ||
    fail "bf16 on the CPU failed"
  for precision in tf32 bf16; do
    "$bin" train "$work/job.ini" "${gpu[@]}" --set job.precision=$precision --checkpoint "$work/gpu_$precision.h5" \
      >"$work/gpu_$precision.out" 2>&1 || fail "GPU in $precision failed: $(tail -3 "$work/gpu_$precision.out")"
  done
  weights_close cpu gpu_tf32 "GPU in tf32 against the CPU in fp32" 0.05
  weights_close cpu_bf16 gpu_bf16 "GPU in bf16 against the CPU in bf16" 0.05
  # cuDNN's default choice may take FFT or Winograd algorithms, which round
  # more: on an H200 a Winograd weight gradient of conv1 put these 20 steps
  # 0.015 from the CPU. A bound for gross errors only.
  for how in heuristic measured; do
    "$bin" train "$work/job.ini" --set job.device=cuda --set job.cudnn_algorithms=$how --checkpoint "$work/$how.h5" \
      >"$work/$how.out" 2>&1 || fail "GPU with $how algorithms failed: $(tail -3 "$work/$how.out")"
    weights_close cpu "$how" "GPU with $how cuDNN algorithms against CPU" 0.05
  done
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
  foreground_with_background cuda
  two "$work/fg_cuda.ini" --steps 20 >/dev/null 2>"$work/bg.err" && fail "a cuda background job without a GPU accepted"
  grep -Eq "bg_cuda\.ini: \[job\] device = cuda: (no GPU is visible|this build has no CUDA backend)" "$work/bg.err" ||
    fail "cuda background without a GPU: $(head -3 "$work/bg.err")"
fi
finish cuda_device

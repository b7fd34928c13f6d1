#!/usr/bin/env bash
# [job] device = cuda end to end. With a GPU: 20 training steps of a small
# convolutional model on the GPU end within float tolerance of the same steps
# on the CPU (checkpoints compared). Without one: the job stops at once with
# one line naming the job file and the reason. On more than one rank: refused.
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

if "$bin" train "$work/job.ini" --set job.device=cuda --checkpoint "$work/gpu.h5" >"$work/gpu.out" 2>"$work/gpu.err"; then
  echo "a GPU is here: comparing with the CPU"
  grep -q "GPU 0" "$work/gpu.out" || fail "banner does not name the GPU: $(head -1 "$work/gpu.out")"
  "$bin" train "$work/job.ini" --checkpoint "$work/cpu.h5" >/dev/null || fail "cpu run failed"
  h5diff -d 1e-4 "$work/cpu.h5" "$work/gpu.h5" /weights /weights >"$work/diff.txt" ||
    fail "GPU weights differ from the CPU's by more than 1e-4: $(head -5 "$work/diff.txt")"
else
  grep -Eq "job\.ini: \[job\] device = cuda: (no GPU is visible|this build has no CUDA backend)" "$work/gpu.err" ||
    fail "no GPU, but not the expected message: $(cat "$work/gpu.err")"
  [[ $(wc -l <"$work/gpu.err") == 1 ]] || fail "more than one line of error: $(cat "$work/gpu.err")"
fi
timeout 60 mpirun -np 2 "$bin" train "$work/job.ini" --set job.device=cuda >/dev/null 2>"$work/two.err" &&
  fail "two ranks with device = cuda accepted"
grep -q "device = cuda runs one rank" "$work/two.err" || fail "two ranks: $(head -2 "$work/two.err")"

finish cuda_device

#!/usr/bin/env bash
# A run killed at any moment and resumed (--resume) ends with exactly the
# parameters, batch-norm statistics and momentum of an uninterrupted run with
# the same seed: killed mid-training (several points), killed while a
# checkpoint is being written, and resumed past a corrupt checkpoint (which is
# refused with a message; the previous one is used). Also on 2 ranks, and on
# the device path (the twin device).
# Usage: checkpoint_resume.sh BURSTPOOL_BINARY SOURCE_DIR
set -u
source "$(dirname "$0")/lib/harness.sh" "$@"

cat >"$work/job.ini" <<JOB
[job]
model = $src/jobs/models/vgg_small.ini
seed = 11
[data]
source = synthetic
synthetic_train_samples = 256
synthetic_test_samples = 0
[train]
batch_size = 16
steps = 120
log_every = 20
[optimizer]
lr = 0.01
nesterov = true
weight_decay = 0.0005
[output]
checkpoint_every = 15
JOB

"$bin" train "$work/job.ini" --checkpoint "$work/reference.h5" >/dev/null || fail "reference run"

same_as_reference() {  # same_as_reference FILE: bitwise equal weights and momentum
  h5diff -d 0 "$work/reference.h5" "$1" /weights /weights >/dev/null &&
    h5diff -d 0 "$work/reference.h5" "$1" /optimizer /optimizer >/dev/null
}

# run_until_done CKPT [launcher...]: resume until a run exits 0 (at most 5 tries).
run_until_done() {
  local ckpt=$1
  shift
  for _ in 1 2 3 4 5; do
    "$@" "$bin" train "$work/job.ini" --checkpoint "$ckpt" --resume >"$work/resume.log" 2>&1 && return 0
  done
  cat "$work/resume.log"
  return 1
}

# 1. Killed at several points during training.
for delay in 0.6 1.5 2.7; do
  ckpt="$work/killed_$delay.h5"
  "$bin" train "$work/job.ini" --checkpoint "$ckpt" >/dev/null 2>&1 &
  pid=$!
  sleep "$delay"
  kill -9 "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
  run_until_done "$ckpt" || fail "resume after kill at ${delay}s"
  if same_as_reference "$ckpt"; then
    echo "ok   killed after ${delay}s, resumed ($(grep -m1 -o 'resuming from the checkpoint of step [0-9]*\|no checkpoint at' "$work/resume.log")): identical to the uninterrupted run"
  else
    fail "killed after ${delay}s: resumed run differs from the uninterrupted one"
  fi
done

# 2. Killed while a checkpoint is being written (the test hook holds the
#    complete temporary file for 3 s before it is moved into place).
ckpt="$work/mid_write.h5"
BURSTPOOL_TEST_CHECKPOINT_PAUSE_MS=3000 "$bin" train "$work/job.ini" --checkpoint "$ckpt" >/dev/null 2>&1 &
pid=$!
for _ in $(seq 1 100); do
  compgen -G "$ckpt.tmp.*" >/dev/null && break
  sleep 0.1
done
sleep 0.5
if compgen -G "$ckpt.tmp.*" >/dev/null; then
  kill -9 "$pid"
  wait "$pid" 2>/dev/null
  run_until_done "$ckpt" && same_as_reference "$ckpt" &&
    echo "ok   killed during a checkpoint write: resumed, identical to the uninterrupted run" ||
    fail "killed during a checkpoint write"
else
  kill -9 "$pid" 2>/dev/null
  fail "no checkpoint write was caught in progress"
fi

# 3. A corrupt newest checkpoint is refused with a message and the previous one used.
ckpt="$work/corrupt.h5"
"$bin" train "$work/job.ini" --checkpoint "$ckpt" --steps 45 >/dev/null || fail "corrupt: first run"
corrupt "$ckpt"
"$bin" train "$work/job.ini" --checkpoint "$ckpt" --resume >"$work/out" 2>"$work/err" || fail "corrupt: resume run"
if grep -q "warning: refused .*corrupt.h5: checksum mismatch (corrupt checkpoint)" "$work/err" &&
  grep -q "resuming from the checkpoint of step 30" "$work/out" && same_as_reference "$ckpt"; then
  echo "ok   corrupt checkpoint refused ($(head -n 1 "$work/err")); resumed from the previous one, identical result"
else
  fail "corrupt checkpoint"; cat "$work/err" "$work/out" | head
fi

# 4. Checkpoints by wall time: with checkpoint_seconds and no step cadence, a
#    run killed part way still resumes from a checkpoint (not from step 0).
ckpt="$work/timed.h5"
"$bin" train "$work/job.ini" --checkpoint "$ckpt" --set output.checkpoint_every=0 \
  --set output.checkpoint_seconds=0.5 >/dev/null 2>&1 &
pid=$!
for _ in $(seq 1 100); do [[ -f $ckpt ]] && break; sleep 0.1; done
sleep 0.3
kill -9 "$pid" 2>/dev/null
wait "$pid" 2>/dev/null
"$bin" train "$work/job.ini" --checkpoint "$ckpt" --resume >"$work/timed.log" 2>&1 || fail "timed: resume run"
if grep -q "resuming from the checkpoint of step [1-9]" "$work/timed.log" && same_as_reference "$ckpt"; then
  echo "ok   checkpoints every 0.5 s: $(grep -m1 -o 'resuming from the checkpoint of step [0-9]*' "$work/timed.log"), identical result"
else
  fail "checkpoint_seconds"; head -5 "$work/timed.log"
fi

# 5. Two ranks: one rank is killed (mpirun then ends the job), the job is
#    resumed under mpirun, and ends identical to an uninterrupted 2-rank run.
mpirun -np 2 "$bin" train "$work/job.ini" --checkpoint "$work/reference2.h5" >/dev/null 2>&1 || fail "2-rank reference"
mpirun -np 2 "$bin" train "$work/job.ini" --checkpoint "$work/two.h5" >"$work/two.log" 2>&1 &
launcher=$!
victim=""
for _ in $(seq 1 600); do  # up to a minute: CI machines are loaded
  sleep 0.1
  grep -q "^step 40/" "$work/two.log" 2>/dev/null || continue
  victim=$(pgrep -P "$launcher" -x burstpool | tail -n 1)
  [[ -n $victim ]] && break
done
if [[ -z $victim ]]; then
  kill "$launcher" 2>/dev/null
  fail "2 ranks: no rank process found to kill"
else
  kill -9 "$victim"
  timeout 60 tail --pid="$launcher" -f /dev/null
  run_until_done "$work/two.h5" timeout 120 mpirun -np 2 || fail "2-rank resume"
  if h5diff -d 0 "$work/reference2.h5" "$work/two.h5" /weights /weights >/dev/null; then
    echo "ok   2 ranks, rank pid $victim killed, resumed: identical to the uninterrupted 2-rank run"
  else
    fail "2 ranks: resumed run differs"
  fi
fi

# 6. On the device path (device = twin, a second model in host memory that
#    matches the CPU bit for bit: docs/cuda.md): checkpoints take the
#    device's parameters, statistics and momentum, and a resume puts them back.
ckpt="$work/twin.h5"
"$bin" train "$work/job.ini" --set job.device=twin --checkpoint "$ckpt" --steps 45 >/dev/null || fail "twin: first run"
"$bin" train "$work/job.ini" --set job.device=twin --checkpoint "$ckpt" --resume >"$work/twin.log" 2>&1 ||
  fail "twin: resume run"
if grep -q "resuming from the checkpoint of step 45" "$work/twin.log" && same_as_reference "$ckpt"; then
  echo "ok   device path (twin): stopped at step 45, resumed, identical to the uninterrupted CPU run"
else
  fail "twin: resumed run differs from the uninterrupted one"; head -5 "$work/twin.log"
fi

finish checkpoint_resume

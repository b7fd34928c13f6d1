#!/usr/bin/env bash
# Stopping early on a signal (include/burstpool/stop.hpp): SIGTERM or SIGUSR1
# to one rank stops every rank after the same step, the checkpoint and the
# metrics (stopped_by) are written, the exit status is 75, and --resume ends
# bit for bit as the uninterrupted run, its metrics holding every evaluation
# of the whole run; for ssgd and for sma learners. A second signal ends the
# process at once.
# Usage: stop_signal.sh BURSTPOOL_BINARY SOURCE_DIR
set -u
source "$(dirname "$0")/lib/harness.sh" "$@"
command -v mpirun >/dev/null || { echo "mpirun missing"; exit 1; }

cat >"$work/job.ini" <<JOB
[job]
model = $src/jobs/models/vgg_small.ini
seed = 11
[data]
source = synthetic
synthetic_train_samples = 256
synthetic_test_samples = 64
[train]
batch_size = 16
steps = 150
log_every = 10
[optimizer]
lr = 0.01
[sync]
learners = 2
JOB

# await_log FILE ERE TRIES: until FILE has a line matching ERE, polling every
# 0.05 s at most TRIES times.
await_log() {
  for _ in $(seq 1 "$3"); do grep -Eq "$2" "$1" && return; sleep 0.05; done
}

# stopped NAME SIGNAL RANK [args]: a 2-rank run signalled on RANK once it
# logged step 20, then resumed; compared with the uninterrupted run NAME-ref.
stopped() {
  local name=$1 signal=$2 rank=$3
  shift 3
  mpirun -np 2 "$bin" train "$work/job.ini" --checkpoint "$work/$name-ref.h5" --metrics "$work/$name-ref.json" "$@" \
    >/dev/null 2>&1 ||
    { fail "$name: reference run"; return; }
  mpirun -np 2 "$bin" train "$work/job.ini" --checkpoint "$work/$name.h5" --metrics "$work/$name.json" "$@" \
    >"$work/$name.out" 2>&1 &
  local launcher=$! victim=""
  await_log "$work/$name.out" "^(step|iteration) 20" 200
  # Rank processes in rank order: mpirun starts them in that order, so by ascending pid.
  victim=$(pgrep -P "$launcher" -x burstpool | sort -n | sed -n "$((rank + 1))p")
  [[ -n $victim ]] && kill -"$signal" "$victim"
  wait "$launcher"
  local status=$?
  local at
  at=$(python3 -c "import json; m=json.load(open('$work/$name.json')); print(m['stopped_by'], m['steps'])" 2>/dev/null)
  timeout 120 mpirun -np 2 "$bin" train "$work/job.ini" --checkpoint "$work/$name.h5" --resume "$@" \
    --metrics "$work/$name-resumed.json" >"$work/$name.resumed" 2>&1 || fail "$name: resume"
  if [[ -z $victim ]]; then
    fail "$name: no rank to signal"
  elif [[ $status -ne 75 || $at != "SIG$signal "* ]]; then
    fail "$name: exit $status, metrics stopped_by/steps '$at': $(tail -3 "$work/$name.out")"
  elif ! grep -q "stopped early by SIG$signal after ${at#* } " "$work/$name.out"; then
    fail "$name: no 'stopped early' line: $(tail -3 "$work/$name.out")"
  elif ! h5same "$work/$name-ref.h5" "$work/$name.h5"; then
    fail "$name: resumed run differs from the uninterrupted one"
  elif ! python3 - "$work/$name-ref.json" "$work/$name.json" "$work/$name-resumed.json" <<'PY'; then
import json, sys
ref, stopped, resumed = (json.load(open(p)) for p in sys.argv[1:])
key = lambda m: [(e["step"], e["test_accuracy"], e["test_loss"]) for e in m["evaluations"]]
# The metrics after the resume cover the whole run: every evaluation of the
# uninterrupted run, and the training seconds of both parts.
sys.exit(0 if key(resumed) == key(ref) and len(key(ref)) > 1 and
         resumed["train_seconds"] > stopped["train_seconds"] and resumed["stopped_by"] is None else 1)
PY
    fail "$name: the metrics after the resume do not cover the whole run"
  else
    echo "ok   $name: SIG$signal to rank $rank, all ranks stopped after ${at#* } (exit 75), resumed: identical to the uninterrupted run, evaluations and seconds of both parts in the metrics"
  fi
}
stopped ssgd TERM 1
stopped sma USR1 0 --set sync.strategy=sma --set output.checkpoint_every=1000

# A signal to mpirun itself (Open MPI 4.1), as docs/jobs.md says: SIGUSR1 is
# forwarded at once, the ranks stop cleanly and mpirun returns 75; SIGTERM is
# forwarded only after odls_base_sigkill_timeout seconds and the ranks are
# killed as long after it, so the run sets it (the default of 1 s is shorter
# than a step plus the checkpoint on a loaded machine), and mpirun exits 1.
# The runs are long enough (1000 steps) not to end before the signal arrives.
# launcher_signalled NAME SIGNAL STATUS SIGKILL_TIMEOUT
launcher_signalled() {
  local name=$1 signal=$2 expected=$3 timeout=$4
  mpirun --mca odls_base_sigkill_timeout "$timeout" -np 2 "$bin" train "$work/job.ini" --steps 1000 \
    --checkpoint "$work/$name.h5" --metrics "$work/$name.json" >"$work/$name.out" 2>&1 &
  local launcher=$!
  await_log "$work/$name.out" "^step 20" 200
  kill -"$signal" "$launcher"
  wait "$launcher"
  local status=$? stopped_by
  stopped_by=$(python3 -c "import json; print(json.load(open('$work/$name.json'))['stopped_by'])" 2>/dev/null)
  if [[ $status -eq $expected && $stopped_by == "SIG$signal" && -s $work/$name.h5 ]] &&
    grep -q "stopped early by SIG$signal" "$work/$name.out"; then
    echo "ok   SIG$signal to mpirun: the ranks stopped cleanly with a checkpoint; mpirun exits $status"
  else
    fail "SIG$signal to mpirun: exit $status, stopped_by '$stopped_by': $(tail -3 "$work/$name.out")"
  fi
}
launcher_signalled launcher-usr1 USR1 75 1
launcher_signalled launcher-term TERM 1 5

# A second signal: the process ends at once (killed by it), not at the end
# of its step (of about 0.3 s here).
"$bin" train "$work/job.ini" --steps 100000 --set train.batch_size=256 --set data.synthetic_train_samples=1024 \
  --checkpoint "$work/twice.h5" >"$work/twice.out" 2>&1 &
pid=$!
await_log "$work/twice.out" "^step 10/" 400
kill -TERM "$pid"
sleep 0.05  # two signals sent back to back may arrive as one
kill -TERM "$pid"
wait "$pid"
status=$?
if [[ $status -eq 143 ]] && ! grep -q "stopped early" "$work/twice.out"; then
  echo "ok   a second SIGTERM ends the process at once (exit $status)"
else
  fail "second signal: exit $status: $(tail -2 "$work/twice.out")"
fi

finish stop_signal

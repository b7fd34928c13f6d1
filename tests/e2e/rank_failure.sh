#!/usr/bin/env bash
# A failing or killed rank stops every rank within seconds with a non-zero
# exit and a message; nothing hangs.
# Usage: rank_failure.sh BURSTPOOL_BINARY SOURCE_DIR
set -u
source "$(dirname "$0")/lib/harness.sh" "$@"
command -v mpirun >/dev/null || { echo "mpirun missing"; exit 1; }

cat >"$work/job.ini" <<JOB
[job]
model = $src/jobs/models/lenet5.ini
[data]
source = synthetic
synthetic_train_samples = 512
synthetic_test_samples = 0
[train]
batch_size = 32
steps = 100000
log_every = 50
JOB

# 1. The loss runs on rank 1 only, and a huge learning rate makes it
#    non-finite there: the run loop's agreement tells rank 0, so both stop
#    with the same message instead of rank 0 waiting for rank 1.
"$bin" plan --data-parallel "$src/jobs/models/lenet5.ini" --ranks 2 --global-batch 32 --out "$work/plan.json" >/dev/null
python3 - "$work/plan.json" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
for layer in p["layers"]:
    if layer["name"] in ("fc3", "loss"):
        layer["ranks"] = [1]
json.dump(p, open(sys.argv[1], "w"))
PY
# expect_failure NAME PATTERN: the last mpirun exited non-zero, not by the timeout, with PATTERN in its stderr
expect_failure() {
  if [[ $rc -eq 0 || $rc -eq 124 ]] || ! grep -q "$2" "$work/err"; then
    echo "FAIL $1: exit $rc after ${took}s"; sed 's/^/    /' "$work/err" | head -20; failures=$((failures + 1))
  else
    echo "ok   $1: exit $rc after ${took}s: $(grep -m1 'error on rank' "$work/err")"
  fi
}
start=$(date +%s)
timeout 60 mpirun -np 2 "$bin" train "$work/job.ini" --plan "$work/plan.json" --set optimizer.lr=100 \
  >"$work/out" 2>"$work/err"
rc=$?
took=$(($(date +%s) - start))
expect_failure "non-finite loss on one rank" "error on rank [01] .*training loss became non-finite"

# 1b. One rank throws alone (a test hook, just after step 20's agreement
#     started): rank 0, left waiting in that reduction, must not hang.
start=$(date +%s)
BURSTPOOL_TEST_FAIL=1:20 timeout 60 mpirun -np 2 -x BURSTPOOL_TEST_FAIL "$bin" train "$work/job.ini" \
  >"$work/out" 2>"$work/err"
rc=$?
took=$(($(date +%s) - start))
expect_failure "one rank throws" "error on rank 1 .*test failure injected at training step 20"

# 1c. The same with shadow learners, whose averaging thread runs rounds with
#     the other ranks': the failing rank's thread gives up its round rather
#     than waiting for ranks that will not finish theirs.
start=$(date +%s)
BURSTPOOL_TEST_FAIL=1:20 timeout 60 mpirun -np 2 -x BURSTPOOL_TEST_FAIL "$bin" train "$work/job.ini" \
  --set sync.strategy=shadow --set sync.learners=2 >"$work/out" 2>"$work/err"
rc=$?
took=$(($(date +%s) - start))
expect_failure "shadow: one rank throws" "error on rank 1 .*test failure injected at training iteration 20"

# 2. One rank is killed with SIGKILL mid-training.
timeout 120 mpirun -np 2 "$bin" train "$work/job.ini" >"$work/out2" 2>"$work/err2" &
launcher=$!
victim=""
for _ in $(seq 1 100); do  # wait until training runs, then find a rank process
  sleep 0.2
  grep -q "^step 50/" "$work/out2" 2>/dev/null || continue
  victim=$(pgrep -P "$launcher" -x burstpool | tail -n 1)
  [[ -n $victim ]] || victim=$(pgrep -P "$(pgrep -P "$launcher" | head -n 1)" -x burstpool | tail -n 1)
  [[ -n $victim ]] && break
done
if [[ -z $victim ]]; then
  echo "FAIL kill -9: no rank process found under mpirun (pid $launcher)"; failures=$((failures + 1))
  kill "$launcher" 2>/dev/null
else
  start=$(date +%s)
  kill -9 "$victim"
  wait "$launcher"
  rc=$?
  took=$(($(date +%s) - start))
  if [[ $rc -eq 0 || $rc -eq 124 || $took -gt 30 ]]; then
    echo "FAIL kill -9 rank pid $victim: exit $rc after ${took}s"; sed 's/^/    /' "$work/err2" | head; failures=$((failures + 1))
  else
    echo "ok   kill -9 rank pid $victim: every rank gone, exit $rc after ${took}s"
  fi
fi

finish rank_failure

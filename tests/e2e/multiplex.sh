#!/usr/bin/env bash
# Multiplexing on 2 ranks: a foreground LeNet-5 with a burst plan and a
# data-parallel background MLP. The foreground must end bitwise equal to the
# same run without the background, both jobs' losses must fall, the metrics
# must report both rates, and a background that stops, diverges or crashes on
# one rank must leave the foreground finishing normally. The background's
# own checkpoints equal the background job trained alone, and resume.
# Usage: multiplex.sh BURSTPOOL_BINARY SOURCE_DIR
set -u
source "$(dirname "$0")/lib/harness.sh" "$@"
command -v mpirun >/dev/null || { echo "mpirun missing"; exit 1; }
unset OMPI_MCA_mpi_yield_when_idle

cat >"$work/fg.ini" <<JOB
[job]
model = $src/jobs/models/lenet5.ini
seed = 4
[data]
source = synthetic
synthetic_train_samples = 1024
synthetic_test_samples = 0
[train]
batch_size = 32
steps = 300
log_every = 50
[optimizer]
lr = 0.02
[background]
job = bg.ini
calibrate_steps = 5
JOB
background_job "$work/bg.ini"
grep -v '^job = bg.ini' "$work/fg.ini" >"$work/alone.ini"
# Burst plan: the first convolution block on rank 0, the rest on rank 1, so
# each rank waits for the other for part of every step.
"$bin" plan --data-parallel "$src/jobs/models/lenet5.ini" --ranks 2 --global-batch 32 --out "$work/plan.json" >/dev/null
python3 - "$work/plan.json" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
for layer in p["layers"]:
    layer["ranks"] = [0] if layer["name"] in ("data", "conv1", "relu1", "pool1") else [1]
json.dump(p, open(sys.argv[1], "w"))
PY

run() {  # run NAME JOB [extra args]: mpirun on 2 ranks, output in $work/NAME.*
  local name=$1 job=$2
  shift 2
  timeout 120 mpirun -np 2 "$bin" train "$job" --plan "$work/plan.json" --checkpoint "$work/$name.h5" \
    --metrics "$work/$name.json" "$@" >"$work/$name.out" 2>"$work/$name.err"
}
same_as_alone() {  # the foreground's weights and momentum, bit for bit
  h5same "$work/alone.h5" "$work/$1.h5" || fail "$1: foreground differs from the run without background"
}
metric() { python3 -c "import json,sys; m=json.load(open('$work/$1.json')); print(eval(sys.argv[1]))" "$2"; }

run alone "$work/alone.ini" || fail "alone: exit $?"

# 1. Shared run: same foreground bits, both losses fall, all figures present.
run shared "$work/fg.ini" || fail "shared: exit $?: $(cat "$work/shared.err")"
same_as_alone shared
grep -q "^multiplexing: cluster throughput [0-9.]* against data parallel alone" "$work/shared.out" ||
  fail "shared: no closing multiplexing line"
python3 - "$work/shared.json" "$work/shared.out" <<'PY' || fail "shared: metrics or losses wrong"
import json, re, sys
m = json.load(open(sys.argv[1]))
b = m["background"]
losses = [float(x) for x in re.findall(r"\| loss ([0-9.]+) \|", open(sys.argv[2]).read())]
checks = {
    "foreground loss falls": losses[-1] < 0.5 * losses[0],
    "background loss falls": b["last_loss"] < 0.5 * b["first_loss"],
    "background ran beside the foreground": b["shared_steps"] > 0 and m["background_samples_per_second"] > 0,
    "rates": m["foreground_samples_per_second"] > 0 and b["alone_samples_per_second"] > 0,
    "slowdown and cluster throughput": m["foreground_slowdown"] > 0 and m["cluster_throughput_vs_own_plan"] > 0,
    "data-parallel reference measured for the plan": b["foreground_data_parallel_samples_per_second"] > 0
    and b["data_parallel_reference"].startswith("measured"),
    "cluster throughput against data parallel": abs(m["cluster_throughput_vs_data_parallel"]
        - (m["foreground_samples_per_second"] / b["foreground_data_parallel_samples_per_second"]
           + m["background_samples_per_second"] / b["alone_samples_per_second"])) < 1e-9,
    "idle priority": b["priority"] in ("SCHED_IDLE", "nice 19"),
    "no failure": b["failed_ranks"] == 0,
}
for name, ok in checks.items():
    print(("ok   " if ok else "FAIL ") + name)
print("foreground losses", losses[0], "->", losses[-1], "; background", b["first_loss"], "->", b["last_loss"])
sys.exit(0 if all(checks.values()) else 1)
PY

# 2. The background's own steps run out first: it stops, the foreground goes on.
sed -i 's/^steps = 100000/steps = 8/' "$work/bg.ini"
run stopped "$work/fg.ini" || fail "stopped: exit $?"
same_as_alone stopped
[[ "$(metric stopped 'm["background"]["steps"], m["background"]["failed_ranks"]')" == "(8, 0)" ]] ||
  fail "stopped: background steps/failures $(metric stopped 'm["background"]["steps"], m["background"]["failed_ranks"]')"
sed -i 's/^steps = 8/steps = 100000/' "$work/bg.ini"

# 3. The background diverges (non-finite loss): reported on every rank, foreground finishes.
sed -i "s/^lr = 0.02/lr = 100/" "$work/bg.ini"
run diverged "$work/fg.ini" || fail "diverged: exit $?"
same_as_alone diverged
grep -q "background job 'bg' failed on rank .*non-finite" "$work/diverged.err" || fail "diverged: no warning"
[[ "$(metric diverged 'm["background"]["failed_ranks"]')" == 2 ]] || fail "diverged: failed_ranks"
sed -i "s/^lr = 100/lr = 0.02/" "$work/bg.ini"

# 4. The background crashes on rank 1 alone, mid-step: rank 0's background is
#    left waiting for it and gives up when the foreground ends.
BURSTPOOL_TEST_BACKGROUND_FAIL=1:7 run crashed "$work/fg.ini" || fail "crashed: exit $?"
same_as_alone crashed
grep -q "failed on rank 1 .*test failure injected" "$work/crashed.err" || fail "crashed: no warning from rank 1"
grep -q "failed on rank 0 .*stopped waiting" "$work/crashed.err" || fail "crashed: rank 0 did not report giving up"
[[ "$(metric crashed 'm["background"]["failed_ranks"]')" == 2 ]] || fail "crashed: failed_ranks"

# 5. The background's own checkpoint ([output] in its job file): written by
#    its rank 0 every 3 of its steps and when it stops (its 5 calibration
#    steps alone make two), and equal bit for bit to the background job
#    trained alone for as many steps; --resume continues it from there.
sed 's/^job = bg.ini/job = bg_ckpt.ini/' "$work/fg.ini" >"$work/fg_ckpt.ini"
cp "$work/bg.ini" "$work/bg_ckpt.ini"
printf '[output]\ncheckpoint = %s\ncheckpoint_every = 3\n' "$work/bg.h5" >>"$work/bg_ckpt.ini"
bg_step() { h5dump -a /progress/step "$1" | grep -o '(0): [0-9]*' | cut -d' ' -f2; }
# same_as_background_alone FILE STEPS: the background job trained alone for STEPS steps
same_as_background_alone() {
  timeout 120 mpirun -np 2 "$bin" train "$work/bg_ckpt.ini" --steps "$2" --checkpoint "$work/bg_alone.h5" >/dev/null 2>&1 &&
    h5diff -d 0 "$work/bg_alone.h5" "$1" /weights /weights >/dev/null &&
    h5diff -d 0 "$work/bg_alone.h5" "$1" /optimizer /optimizer >/dev/null
}
run bg_ckpt "$work/fg_ckpt.ini" || fail "background checkpoint: exit $?: $(cat "$work/bg_ckpt.err")"
same_as_alone bg_ckpt
first=$(bg_step "$work/bg.h5")
if [[ -n $first && -f $work/bg.h5.prev ]] && same_as_background_alone "$work/bg.h5" "$first"; then
  echo "ok   background checkpoint at its step $first (and an earlier one kept): identical to the background job alone"
else
  fail "background checkpoint (step '$first') differs from the background job trained alone"
fi
run bg_resumed "$work/fg_ckpt.ini" --resume || fail "background resume: exit $?: $(cat "$work/bg_resumed.err")"
same_as_alone bg_resumed
second=$(bg_step "$work/bg.h5")
if grep -q "background: resuming from the checkpoint of step $first " "$work/bg_resumed.out" &&
  [[ $second -gt $first ]] && same_as_background_alone "$work/bg.h5" "$second"; then
  echo "ok   --resume: the background went on from step $first to $second, identical to the background job alone"
else
  fail "background resume: from '$first' to '$second': $(grep -m1 background: "$work/bg_resumed.out")"
fi

# 6. Bad background jobs are refused before training, naming file and key.
printf '[parallel]\nplan = x.json\n' >>"$work/bg.ini"
timeout 60 mpirun -np 2 "$bin" train "$work/fg.ini" >/dev/null 2>"$work/bad.err" && fail "background with a plan accepted"
grep -q "bg.ini: \[parallel\] plan: a background job trains data parallel" "$work/bad.err" || fail "bad: $(cat "$work/bad.err")"

finish multiplex

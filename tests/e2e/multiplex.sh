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

# Cases 2-5 and 7 check how the jobs stop, fail, checkpoint and resume, not
# how the background is scheduled: at idle priority a loaded machine can leave
# it almost no core for the whole foreground (seen in CI: 2 shared steps in
# 300, short of the step the crash is injected at), so from here on it
# competes at normal priority with the gate held open.
compete='thread_priority = normal
max_slowdown = 10'
printf '%s\n' "$compete" >>"$work/fg.ini"  # fg.ini ends in its [background] section

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

# 6. A background job on a device (the twin stands in for a GPU): its thread
#    keeps normal priority, and a rank bound to one core is warned that the
#    thread needs a second one; with two cores there is no warning.
background_job "$work/bg_twin.ini" twin
sed -e 's/^job = bg.ini/job = bg_twin.ini/' -e 's/^steps = 300/steps = 40/' "$work/fg.ini" |
  grep -vxF "$compete" >"$work/fg_twin.ini"  # the priority its device chooses
one_rank() {  # one_rank NAME BINDING: mpirun --bind-to BINDING -np 1
  timeout 120 mpirun --bind-to "$2" -np 1 "$bin" train "$work/fg_twin.ini" --metrics "$work/$1.json" \
    >"$work/$1.out" 2>"$work/$1.err"
}
one_rank twin_core core || fail "twin background bound to a core: exit $?: $(cat "$work/twin_core.err")"
grep -q "warning: a rank may run on 1 core only.*--cpus-per-task=2" "$work/twin_core.err" ||
  fail "one core: no binding warning: $(cat "$work/twin_core.err")"
[[ "$(metric twin_core 'm["background"]["priority"]')" == "normal ([background] thread_priority)" ]] ||
  fail "twin background priority: $(metric twin_core 'm["background"]["priority"]')"
if [[ $(nproc) -ge 2 ]]; then
  one_rank twin_free none || fail "twin background unbound: exit $?"
  grep -q "warning: a rank may run" "$work/twin_free.err" && fail "two cores, yet warned: $(cat "$work/twin_free.err")"
fi
echo "ok   a device background keeps normal priority, and one core per rank is warned about"

# 7. [background] sync = none: each rank trains a replica of its own (its
#    seed plus the rank) and meets no other rank; rank 0's, the one
#    checkpointed, is the background job trained alone on one rank for as
#    many steps, bit for bit, and the foreground is untouched.
sed 's/^job = bg.ini/job = bg_own.ini/' "$work/fg.ini" >"$work/fg_own.ini"
printf 'sync = none\n' >>"$work/fg_own.ini"  # fg.ini ends in its [background] section
cp "$work/bg.ini" "$work/bg_own.ini"
printf '[output]\ncheckpoint = %s\n' "$work/bg_own.h5" >>"$work/bg_own.ini"
run own "$work/fg_own.ini" || fail "sync = none: exit $?: $(cat "$work/own.err")"
same_as_alone own
own_steps=$(bg_step "$work/bg_own.h5")
if [[ -n $own_steps ]] && timeout 120 mpirun -np 1 "$bin" train "$work/bg_own.ini" --steps "$own_steps" \
  --checkpoint "$work/bg_own_alone.h5" >/dev/null 2>&1 &&
  h5diff -d 0 "$work/bg_own_alone.h5" "$work/bg_own.h5" /weights /weights >/dev/null &&
  h5diff -d 0 "$work/bg_own_alone.h5" "$work/bg_own.h5" /optimizer /optimizer >/dev/null; then
  echo "ok   sync = none: rank 0's background after $own_steps steps is the job trained alone on one rank"
else
  fail "sync = none: rank 0's background ($own_steps steps) differs from the job trained alone on one rank"
fi
[[ "$(metric own 'm["background_samples_per_second"] > 0 and m["background"]["failed_ranks"] == 0')" == True ]] ||
  fail "sync = none: no background rate, or a failure"

# 8. Bad background jobs are refused before training, naming file and key.
printf '[parallel]\nplan = x.json\n' >>"$work/bg.ini"
timeout 60 mpirun -np 2 "$bin" train "$work/fg.ini" >/dev/null 2>"$work/bad.err" && fail "background with a plan accepted"
grep -q "bg.ini: \[parallel\] plan: a background job trains data parallel" "$work/bad.err" || fail "bad: $(cat "$work/bad.err")"

finish multiplex

#!/usr/bin/env bash
# train --trace and simulate --trace: a burst plan on 2 ranks (convolutions on
# both, the fully connected layers on rank 0) writes valid trace-event JSON
# with one process per rank; every layer's forward and backward show on
# exactly the ranks that hold it, slices and gradient buckets on their
# tracks, a "step N" event per step; each rank's idle events add up to its
# metrics' idle_seconds (within 10%); --trace-steps keeps only its window; a
# background job shows on its own track; simulate writes the same form for
# the predicted step, whose length is the predicted iteration.
# Usage: trace.sh BURSTPOOL_BINARY SOURCE_DIR
set -u
source "$(dirname "$0")/lib/harness.sh" "$@"

synthetic_job "$work/job.ini" "$src/jobs/models/lenet5.ini" "log_every = 10" "eval_every = 10"
"$bin" plan --data-parallel "$src/jobs/models/lenet5.ini" --ranks 2 --global-batch 32 --out "$work/plan.json" >/dev/null
python3 - "$work/plan.json" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
for layer in p["layers"]:
    if layer["name"] in ("fc1", "relu3", "fc2", "relu4", "fc3", "loss"):
        layer["ranks"] = [0]
json.dump(p, open(sys.argv[1], "w"))
PY

# check_trace TRACE PLAN METRICS STEPS: the checks above; METRICS "-" skips the idle comparison.
check_trace() {
  python3 - "$@" "$src/scripts" <<'PY'
import json, sys
trace, plan, metrics, steps = sys.argv[1], json.load(open(sys.argv[2])), sys.argv[3], [int(s) for s in sys.argv[4].split(",")]
sys.path.insert(0, sys.argv[-1])
from plot_plan import rank_list as ranges
t = json.load(open(trace))  # valid JSON, or this fails
events = [e for e in t["traceEvents"] if e["ph"] == "X"]
names = {e["pid"]: e["args"]["name"] for e in t["traceEvents"] if e["ph"] == "M" and e["name"] == "process_name"}
assert names == {0: "rank 0", 1: "rank 1"}, names
for e in events:
    assert e["dur"] >= 0 and e["ts"] >= 0 and e["tid"] in (0, 1, 2, 3), e
on = lambda name: sorted({e["pid"] for e in events if e["name"] == name})
for layer in plan["layers"]:
    if layer["name"] == "data":
        continue
    for p in ("forward", "backward"):
        assert on(f"{p} {layer['name']}") == ranges(layer["ranks"]), (p, layer["name"], on(f"{p} {layer['name']}"))
for r in (0, 1):
    got = sorted(int(e["name"].split()[1]) for e in events if e["pid"] == r and e["name"].startswith("step "))
    assert got == steps, f"rank {r} steps {got}"
    assert any(e["tid"] == 1 and e["pid"] == r for e in events), f"rank {r}: no transfers"
    assert any(e["name"].startswith("start allreduce bucket") and e["pid"] == r for e in events), f"rank {r}: no buckets"
idle = [sum(e["dur"] for e in events if e["pid"] == r and e["name"] == "idle") / 1e6 for r in (0, 1)]
line = f"{len(events)} events, layers on their ranks, steps {steps[0]}..{steps[-1]}"
if metrics != "-":
    m = json.load(open(metrics))
    for r in (0, 1):
        want = m["per_rank"][r]["idle_seconds"]
        assert want > 0 and abs(idle[r] - want) <= 0.1 * want, f"rank {r}: trace idle {idle[r]:.6f} s, metrics {want:.6f} s"
    line += f", idle {idle[0] * 1e3:.2f}/{idle[1] * 1e3:.2f} ms = metrics " + \
        "/".join(f"{m['per_rank'][r]['idle_seconds'] * 1e3:.2f}" for r in (0, 1))
print(line)
PY
}

mpirun -np 2 "$bin" train "$work/job.ini" --plan "$work/plan.json" --steps 20 --metrics "$work/m.json" \
  --trace "$work/t.json" >"$work/out" 2>&1 || fail "traced run: $(tail -3 "$work/out")"
if out=$(check_trace "$work/t.json" "$work/plan.json" "$work/m.json" "$(seq -s, 0 19)" 2>&1); then
  echo "ok   train --trace: $out"
else
  fail "train --trace: $out"
fi
python3 -c "
import json, sys
e = [e for e in json.load(open('$work/t.json'))['traceEvents'] if e['ph'] == 'X']
assert sum(x['name'] == 'evaluation' for x in e) == 2 * 2, 'one evaluation per 10 steps per rank'
assert sum(x['name'] == 'read batch' for x in e) == 2 * 20, 'each rank reads its share of every batch'
" || fail "evaluation and read events"

mpirun -np 2 "$bin" train "$work/job.ini" --plan "$work/plan.json" --steps 20 --trace "$work/w.json" \
  --trace-steps 5:8 >"$work/out2" 2>&1 || fail "windowed run: $(tail -3 "$work/out2")"
if out=$(check_trace "$work/w.json" "$work/plan.json" - 5,6,7 2>&1); then echo "ok   --trace-steps 5:8: $out"; else fail "--trace-steps: $out"; fi

# A background job: its steps on the background track. This checks the
# tracing, not the gate: on a busy 2-core machine the foreground alone runs
# past the default max_slowdown (1.1) and the gate rightly starts nothing,
# so the gate is opened wide here.
background_job "$work/bg.ini"
mpirun -np 2 "$bin" train "$work/job.ini" --steps 60 --set background.job="$work/bg.ini" \
  --set background.calibrate_steps=5 --set background.max_slowdown=10 --trace "$work/b.json" >"$work/out3" 2>&1 || fail "background: $(tail -3 "$work/out3")"
bg=$(python3 -c "
import json
e = json.load(open('$work/b.json'))['traceEvents']
print(sum(x['ph'] == 'X' and x['tid'] == 3 and x['name'].startswith('background step') for x in e))" 2>&1)
if [[ $bg =~ ^[0-9]+$ && $bg -gt 0 ]]; then echo "ok   background: $bg background steps traced"; else fail "background track: $bg"; fi

# The predicted step of the same plan, from a profile of this machine.
"$bin" profile "$src/jobs/models/lenet5.ini" --batches 1,2,4,8,16,32 --out "$work/p.json" >/dev/null
"$bin" simulate "$work/plan.json" --model "$src/jobs/models/lenet5.ini" --profile "$work/p.json" --bandwidth 10 \
  --latency 5 --out "$work/s.json" --trace "$work/st.json" >"$work/out4" 2>&1 || fail "simulate: $(cat "$work/out4")"
if out=$(python3 - "$work/st.json" "$work/s.json" "$work/plan.json" "$src/scripts" <<'PY' 2>&1
import json, sys
t, s, plan = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), json.load(open(sys.argv[3]))
sys.path.insert(0, sys.argv[-1])
from plot_plan import rank_list as ranges
events = [e for e in t["traceEvents"] if e["ph"] == "X"]
for layer in plan["layers"]:
    if layer["name"] != "data":
        for p in ("forward", "backward"):
            got = sorted({e["pid"] for e in events if e["name"] == f"{p} {layer['name']}"})
            assert got == ranges(layer["ranks"]), (p, layer["name"], got)
for r in (0, 1):
    step = [e for e in events if e["pid"] == r and e["name"] == "step"]
    assert len(step) == 1 and abs(step[0]["dur"] / 1e6 - s["iteration_s"]) < 1e-9, step
    end = max(e["ts"] + e["dur"] for e in events if e["pid"] == r)
    assert end <= step[0]["dur"] + 1e-3, "an event past the step"
    busy = sum(e["dur"] for e in events if e["pid"] == r and e["tid"] == 0 and e["name"].startswith(("forward", "backward")))
    assert abs(busy / 1e6 - s["busy_s"][r]) < 1e-9, (busy, s["busy_s"][r])
print(f"{len(events)} events, every layer on its ranks, step {s['iteration_s'] * 1e3:.3f} ms as predicted")
PY
); then echo "ok   simulate --trace: $out"; else fail "simulate --trace: $out"; fi

# Learners are not traced: said up front, not silently ignored.
if "$bin" train "$work/job.ini" --steps 2 --set sync.strategy=sma --trace "$work/x.json" >"$work/out5" 2>&1; then
  fail "--trace with sma ran"
elif grep -q "timelines cover data-parallel and burst runs" "$work/out5"; then
  echo "ok   --trace with sma refused: $(grep -o 'burstpool: error.*' "$work/out5" | head -1)"
else
  fail "--trace with sma: $(cat "$work/out5")"
fi
finish trace

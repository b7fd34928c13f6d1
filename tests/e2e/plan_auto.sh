#!/usr/bin/env bash
# train --plan auto on 2 ranks: the first run measures the layer and network
# profiles and caches them, the second reuses both (the log says which), and
# training with the plan it wrote, passed by hand, ends with the same
# checkpoint bit for bit; the metrics give the plan's predicted and measured
# step. A cached profile that does not load is named and measured again.
# On 4 ranks over fewer cores the log says they share them.
# Usage: plan_auto.sh BURSTPOOL_BINARY SOURCE_DIR
set -u
source "$(dirname "$0")/lib/harness.sh" "$@"
cd "$work" || exit 1

# A tight amplification limit makes the planner put layers on fewer ranks at
# the price of a slower step, which pays only with a background job to take
# the rank time freed: the job has one (a replica per rank, so the
# foreground's numbers do not depend on it).
synthetic_job "$work/bg.ini" "$src/jobs/models/lenet5.ini" "steps = 100000"
synthetic_job "$work/job.ini" "$src/jobs/models/lenet5.ini" "log_every = 10" "[parallel]" "amp_limit = 1.05" \
  "[background]" "job = $work/bg.ini" "sync = none" "calibrate_steps = 4"
run() {  # run NAME [options]: 2 ranks, 20 steps, output in NAME.out, metrics NAME.json, checkpoint NAME.h5
  local name=$1
  shift
  timeout 300 mpirun -np 2 "$bin" train "$work/job.ini" --steps 20 --metrics "$work/$name.json" \
    --checkpoint "$work/$name.h5" "$@" >"$work/$name.out" 2>&1 || fail "$name: $(tail -3 "$work/$name.out")"
}

run first --plan auto
if grep -q "measuring the layer profile" first.out && grep -q "measuring the network" first.out &&
  [[ $(ls burstpool-profiles | wc -l) -eq 2 ]]; then
  echo "ok   first run measured and cached: $(ls burstpool-profiles | tr '\n' ' ')"
else
  fail "first run: $(grep 'plan auto' first.out)"; ls burstpool-profiles
fi
# The sums take the ranks' cores (copies and additions over shared memory):
# the network profile measured some core time, and the log says how much.
if core=$(python3 -c "
import glob, json
net = json.load(open(glob.glob('burstpool-profiles/network-*.json')[0]))
core = net['allreduce']['core_seconds_per_byte']
assert core > 0, net['allreduce']
print(f'{core * 1e9:.3g}')" 2>&1) && grep -q "taking $core ms of the rank's core per MB" first.out; then
  echo "ok   the sums' core time was measured: $core ms per MB"
else
  fail "sums' core time: $core $(grep 'network:' first.out)"
fi
# Beside a background job the plan is kept only if it is predicted to give at
# least [parallel] auto_min_gain more throughput of both jobs together than
# data parallel beside the same background; when it is not, the log says so
# and the plan written is data parallel.
if out=$(python3 - <<'PY' 2>&1
import json
plan, log = json.load(open("first.plan.json")), open("first.out").read()
fewer = [e["name"] for e in plan["layers"] if e["ranks"] != "0-1"]
why = [line for line in log.splitlines() if "plan auto: beside the [background] job" in line]
assert not (why and fewer), (why, fewer)
assert not why or why[0].endswith(": data parallel"), why
print(why[0][len("plan auto: "):][:150] if why else f"the plan kept, {len(fewer)} layers on fewer ranks")
PY
); then
  echo "ok   beside a background: $out"
else
  fail "beside a background: $out $(grep 'plan auto' first.out)"
fi
# Four ranks on fewer cores share them: a rank idle while its core-mate
# computes frees nothing a background could use, so beside one the two
# candidates are simulated per core, and the log says so.
timeout 300 mpirun -np 4 --oversubscribe "$bin" train "$work/job.ini" --steps 10 --plan auto \
  --metrics "$work/four.json" --checkpoint "$work/four.h5" >four.out 2>&1 || fail "four ranks: $(tail -3 four.out)"
cores=$(env -u OMP_NUM_THREADS nproc)  # nproc alone obeys OMP_NUM_THREADS
if ((cores >= 4)); then
  echo "ok   four ranks: not oversubscribed on $cores cores, nothing to check"
elif grep -q "plan auto: 4 ranks, 1 thread each, share $cores cores: a background's room is simulated per core" four.out &&
  grep -q "plan auto: .* layers on fewer than 4 ranks" four.out; then
  echo "ok   four ranks on $cores cores: $(grep -m1 'share' four.out | cut -c1-80)"
else
  fail "four ranks on $cores cores: $(grep 'plan auto' four.out)"
fi
run second --plan auto
if grep -q "layer profile from burstpool-profiles/" second.out && grep -q "network profile from" second.out &&
  ! grep -q measuring second.out; then
  echo "ok   second run reused both profiles: $(grep -m1 'layers on fewer' second.out | cut -c1-90)"
else
  fail "second run: $(grep 'plan auto' second.out)"
fi
run by_hand --plan "$work/second.plan.json"
h5same second.h5 by_hand.h5 && echo "ok   the plan passed by hand trains to the same checkpoint" ||
  fail "--plan auto and its plan by hand differ"
if out=$(python3 - <<'PY' 2>&1
import json
m, plan = json.load(open("second.json")), json.load(open("second.plan.json"))
assert m["plan_file"].endswith("second.plan.json") and m["predicted_step_seconds"] > 0 and m["measured_step_seconds"] > 0, m
assert m["predicted_data_parallel_step_seconds"] > 0, m
counts = {e["name"]: e["ranks"] for e in plan["layers"]}
print(f"predicted {1e3 * m['predicted_step_seconds']:.2f} ms (data parallel {1e3 * m['predicted_data_parallel_step_seconds']:.2f}), measured {1e3 * m['measured_step_seconds']:.2f} ms, "
      f"ranks {sorted(set(counts.values()))}")
PY
); then echo "ok   metrics: $out"; else fail "metrics: $out"; fi

# Without a background job nothing uses the rank time such a plan frees:
# --plan auto runs data parallel unless the plan is predicted at least
# [parallel] auto_min_gain (default 10%) faster.
run alone --plan auto --set background.job=none
if out=$(python3 - <<'PY' 2>&1
import json, re
m, plan = json.load(open("alone.json")), json.load(open("alone.plan.json"))
step, dp = m["predicted_step_seconds"], m["predicted_data_parallel_step_seconds"]
fewer = [e["name"] for e in plan["layers"] if e["ranks"] != "0-1"]
why = re.search(r"amplification limit \(([\d.]+) ms\) is not predicted at least 10% faster than data parallel "
                r"\(([\d.]+) ms; \[parallel\] auto_min_gain\) and no \[background\] job uses the rank time it frees: "
                r"data parallel", open("alone.out").read())
if why:  # the limit's plan not predicted 10% faster: data parallel instead
    limited, by_dp = float(why.group(1)), float(why.group(2))
    assert limited > 0.9 * by_dp and abs(1e3 * dp - by_dp) < 0.01 and step == dp and not fewer, (why.group(0), m, plan)
    print(f"the limit's plan predicted {limited:.2f} ms, data parallel {by_dp:.2f} ms: data parallel")
elif not fewer:  # the limit's plan is data parallel itself: no rule to apply
    assert abs(step - dp) <= 1e-9 * dp and re.search(r"plan auto: 0 of \d+ layers on fewer than", open("alone.out").read()), (m, plan)
    print(f"the limit's plan is data parallel itself ({1e3 * step:.2f} ms)")
else:  # the profiles made it at least 10% faster: kept
    assert step <= 0.9 * dp, (m, plan)
    print(f"the limit's plan predicted {1e3 * step:.2f} ms, data parallel {1e3 * dp:.2f} ms: the plan kept")
PY
); then
  echo "ok   without a background: $out"
else
  fail "without a background: $out $(grep 'plan auto' alone.out)"
fi

# A cached layer profile that does not load: named, and measured again.
profile=$(ls burstpool-profiles/lenet5-*.json)
echo '{"format": "burstpool-profile", "version": 1' >"$profile"
run third --plan auto
if grep -q "cached profile refused: .*$(basename "$profile")" third.out && grep -q "measuring the layer profile" third.out &&
  python3 -c "import json; json.load(open('$profile'))"; then
  echo "ok   a broken cache file is named and measured again: $(grep -o 'cached profile refused: [^;]*' third.out | cut -c1-100)"
else
  fail "broken cache: $(grep -i 'plan auto\|warning' third.out)"
fi
finish plan_auto

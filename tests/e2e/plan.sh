#!/usr/bin/env bash
# burstpool plan with a shipped profile: the summary's per-layer times add up
# to the predicted step (branches in turn), the default plan (branches at
# once where faster) is no slower, the layer-time rule keeps
# every layer within the limit counting sync and transfers and is never
# faster than the compute rule, the plan is written with rank ranges and
# reads back (simulate), and scripts/plot_plan.py draws it.
# Usage: plan.sh BURSTPOOL_BINARY SOURCE_DIR
set -u
source "$(dirname "$0")/lib/harness.sh" "$@"

model=$src/jobs/models/resnet20.ini
profile=$src/jobs/profiles/resnet20.cpu.json
for rule in compute layer-time; do
  "$bin" plan "$model" --profile "$profile" --bandwidth 12.5 --latency 5 --ranks 16 --global-batch 32 \
    --amp-limit 2 --amp-rule "$rule" --branches in-turn --out "$work/$rule.json" --summary "$work/$rule.s.json" \
    >"$work/$rule.out" 2>&1 || fail "plan --amp-rule $rule: $(tail -3 "$work/$rule.out")"
done
# Branches at once where faster (the default): a block then costs its slowest branch, so the rows no longer add up.
"$bin" plan "$model" --profile "$profile" --bandwidth 12.5 --latency 5 --ranks 16 --global-batch 32 \
  --amp-limit 2 --summary "$work/auto.s.json" >"$work/auto.out" 2>&1 || fail "plan --branches auto: $(tail -3 "$work/auto.out")"
if out=$(python3 - "$work" <<'PY' 2>&1
import json, sys
w = sys.argv[1]
c, t = json.load(open(f"{w}/compute.s.json")), json.load(open(f"{w}/layer-time.s.json"))
for s in (c, t):
    total = sum(l["compute_s"] + l["sync_s"] + l["transfer_s"] for l in s["layers"])
    assert abs(total - s["iteration_s"]) <= 1e-9 * s["iteration_s"], (total, s["iteration_s"])
assert t["amp_rule"] == "layer-time" and c["amp_rule"] == "compute"
assert t["iteration_s"] >= c["iteration_s"] * (1 - 1e-12), "a stricter rule cannot plan a faster step"
one = {l["name"]: l["compute_s"] / l["amplification"] * l["ranks"] for l in c["layers"] if l["amplification"] > 0}
for l in t["layers"]:
    if l["ranks"] > 1 and l["name"] in one and one[l["name"]] > 0:
        layer_time = l["ranks"] * (l["compute_s"] + l["sync_s"] + l["transfer_s"])
        assert layer_time <= 2 * one[l["name"]] * (1 + 1e-9), (l["name"], layer_time, one[l["name"]])
auto = json.load(open(f"{w}/auto.s.json"))
assert auto["branches"] == "auto" and c["branches"] == "in-turn"
assert auto["iteration_s"] <= c["iteration_s"] * (1 + 1e-12), "the cheaper of in turn and at once"
plan = json.load(open(f"{w}/layer-time.json"))
assert all(isinstance(e["ranks"], str) for e in plan["layers"]), "ranks written as ranges"
print(f"step {1e3 * c['iteration_s']:.2f} ms (compute rule), {1e3 * t['iteration_s']:.2f} ms (layer-time rule)")
PY
); then echo "ok   plan: $out"; else fail "plan summaries: $out"; fi
"$bin" simulate "$work/layer-time.json" --model "$model" --profile "$profile" --bandwidth 12.5 --latency 5 \
  >"$work/sim.out" 2>&1 && echo "ok   the ranges plan reads back: $(head -1 "$work/sim.out")" || fail "simulate: $(cat "$work/sim.out")"

python=$(python_with matplotlib)
if [[ -z $python ]]; then
  echo "skip plot_plan.py: no Python with matplotlib here"
elif "$python" "$src/scripts/plot_plan.py" "$work/layer-time.json" --summary "$work/layer-time.s.json" \
  --out "$work/plan.png" >"$work/plot.out" 2>&1 && [[ $(head -c 4 "$work/plan.png" | od -An -c | tr -d ' ') == "211PNG" ]]; then
  echo "ok   $(cat "$work/plot.out")"
else
  fail "plot_plan.py: $(cat "$work/plot.out")"
fi
finish plan

#!/usr/bin/env bash
# slurm/summarize_sweep.py on hand-made metrics: each point is the median of
# its repeats with the lowest and highest run as its spread, a superlinear
# point is flagged with its likely cause, and the plot's axes hold every run
# (an efficiency of 160% included), not only the medians.
# Usage: sweep_summary.sh BURSTPOOL_BINARY SOURCE_DIR
set -u
source "$(dirname "$0")/lib/harness.sh" "$@"

python=$(python_with matplotlib)
[[ -n $python ]] || { echo "skip: no Python with matplotlib here (Debian: python3-matplotlib)"; exit 0; }

# ranks-N-rK.json: global batch 256; 1 rank ~1000/s, 2 ranks ~3000/s (150%,
# one run at 3200/s = 160%), 4 ranks ~3600/s (90%).
metrics() {  # metrics FILE RANKS SAMPLES_PER_SECOND
  printf '{"ranks": %d, "samples_per_second": %s, "batch_size": 256, "test_accuracy": 0.5, "wall_seconds": 1.0}\n' \
    "$2" "$3" >"$work/$1"
}
metrics ranks-1-r1.json 1 1000; metrics ranks-1-r2.json 1 900; metrics ranks-1-r3.json 1 1100
metrics ranks-2-r1.json 2 3000; metrics ranks-2-r2.json 2 3200; metrics ranks-2-r3.json 2 2800
metrics ranks-4-r1.json 4 3600; metrics ranks-4-r2.json 4 3500; metrics ranks-4-r3.json 4 3700
"$python" "$src/slurm/summarize_sweep.py" "$work" >"$work/out" 2>&1 || fail "summarize_sweep: $(tail -3 "$work/out")"

if out=$("$python" - "$work" <<'PY' 2>&1
import json, sys
folder = sys.argv[1]
s = json.load(open(f"{folder}/summary.json"))
p = {q["ranks"]: q for q in s["points"]}
assert [q["runs"] for q in s["points"]] == [3, 3, 3], s["points"]
assert p[1]["samples_per_second"] == 1000 and p[2]["samples_per_second"] == 3000, "medians"
assert (p[2]["samples_per_second_min"], p[2]["samples_per_second_max"]) == (2800, 3200), "spread"
assert abs(p[2]["efficiency"] - 1.5) < 1e-12 and abs(p[4]["efficiency"] - 0.9) < 1e-12, "efficiency"
assert p[2]["superlinear"] and not p[4]["superlinear"] and not p[1]["superlinear"], "flags"
# Every run fits on the axes: the highest efficiency (3200/2/1000 = 160%) and rate (3700/s).
assert s["axes"]["efficiency_top_percent"] > 160 and s["axes"]["samples_per_second_top"] > 4000, s["axes"]
md = open(f"{folder}/summary.md").read()
assert "| dp | 2 | 3 | 3000 | 2800..3200 | 3.00 | 150% (superlinear) | 1.00 |" in md, md
assert "Superlinear at 2 ranks" in md and "cache" in md, md
assert open(f"{folder}/scaling.png", "rb").read(4) == b"\x89PNG", "scaling.png"
print("medians 1000/3000/3600 per s, 2 ranks flagged at 150%, efficiency axis to",
      round(s["axes"]["efficiency_top_percent"]))
PY
); then echo "ok   $out"; else fail "$out"; fi

# A single run per point keeps the old names (ranks-N.json).
mkdir "$work/single"
for n in 1 2; do metrics "single/ranks-$n.json" "$n" $((n * 1000)); done
if "$python" "$src/slurm/summarize_sweep.py" "$work/single" >"$work/out2" 2>&1 && grep -q "^| dp | 2 | 1 | 2000 |" "$work/single/summary.md"; then
  echo "ok   one run per point"
else
  fail "one run per point: $(cat "$work/out2")"
fi
# Two modes: burst points are summarised on their own and compared with dp at each rank count.
mkdir "$work/modes"
for n in 1 2; do metrics "modes/ranks-$n.json" "$n" $((n * 1000)); metrics "modes/burst-ranks-$n.json" "$n" $((n * 1100)); done
if "$python" "$src/slurm/summarize_sweep.py" "$work/modes" >"$work/out3" 2>&1 &&
  grep -q "^| burst | 2 | 1 | 2200 | 2200..2200 | 2.00 | 100% | 1.10 |" "$work/modes/summary.md" &&
  grep -q "^| dp | 2 | 1 | 2000 |" "$work/modes/summary.md" &&
  [[ $(head -c 4 "$work/modes/scaling.png" | od -An -c | tr -d ' ') == "211PNG" ]]; then
  echo "ok   dp and burst: burst 1.10x dp at 2 ranks"
else
  fail "modes: $(cat "$work/out3")"
fi
finish sweep_summary

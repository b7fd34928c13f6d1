#!/usr/bin/env bash
# The simulated cluster study in a reduced form (one model, two rank counts,
# one batch): it runs, its table has every column, every mode appears at every
# point, data parallel alone is the reference (1.0), and the figures obey the
# packing model's arithmetic. Also 'simulate --background' against hand
# arithmetic from its own JSON, and 'fit-packing' on a file with a bad key.
# Usage: cluster_study.sh BURSTPOOL_BINARY SOURCE_DIR
set -u
source "$(dirname "$0")/lib/harness.sh" "$@"

# Debian's python3 carries python3-matplotlib (scripts/install-deps.sh); another python3 on PATH may not.
py=/usr/bin/python3
[[ -x $py ]] || py=python3
"$py" "$src/perf/cluster_study.py" --build "$(dirname "$bin")" --models resnet20 --ranks 8,16 --batches 32 \
  --out "$work/study" >"$work/study.log" 2>&1 || fail "cluster_study.py: exit $?: $(tail -3 "$work/study.log")"
[[ -s "$work/study.png" ]] || fail "no PNG"
python3 - "$work/study.json" "$work/study.md" <<'PY' || fail "study output incomplete or inconsistent"
import json, sys
d = json.load(open(sys.argv[1]))
md = open(sys.argv[2]).read()
rows, cols = d["rows"], d["columns"]
modes = {"dp", "dp+bg"} | {f"burst {a}{s}" for a in ("1.5", "2", "none") for s in ("", "+bg")}
checks = {
    "labelled simulated": d["simulated"] is True and "SIMULATED" in md and "GB/s" in d["network"],
    "every column in every row": all(set(cols) <= set(r) for r in rows),
    "every mode at every point": all({r["mode"] for r in rows if r["ranks"] == n} == modes for n in (8, 16)),
    "data parallel alone is the reference": all(abs(r["cluster_throughput_vs_dp"] - 1) < 1e-9 and
                                               abs(r["iteration_vs_dp"] - 1) < 1e-9
                                               for r in rows if r["mode"] == "dp"),
    "a mode alone is its rate against dp": all(abs(r["cluster_throughput_vs_dp"] - r["fg_vs_dp"]) < 1e-9
                                               for r in rows if not r["mode"].endswith("+bg")),
    "with a background: fg + bg terms": all(abs(r["cluster_throughput_vs_dp"] - r["fg_vs_dp"] - r["bg_share"]) < 1e-6
                                            for r in rows if r["mode"].endswith("+bg")),
    "the CPU packing is the fitted one": all(r["packing"].startswith("fitted") for r in rows),
    "a command per point": len(d["commands"]) == 2 and all(len(c) == 4 for c in d["commands"].values()),
    "table header": "**cluster throughput vs dp**" in md and "| resnet20 | 32 |" in md,
}
for name, ok in checks.items():
    print(("ok   " if ok else "FAIL ") + name)
sys.exit(0 if all(checks.values()) else 1)
PY

# The CPU-cluster variant: profiles from a folder and a measured network profile (here one written by
# hand: 1 Gbit/s and 100 us both ways, so 8 ranks' gradient sums are slower than the 25 GB/s default's).
mkdir -p "$work/profiles"
cp "$src/jobs/profiles/resnet20.cpu.json" "$work/profiles/resnet20.json"
cat >"$work/net.json" <<'JSON'
{"format": "burstpool-network", "ranks": 2, "p2p": {"latency_s": 1e-4, "bandwidth_bytes_per_s": 1.25e8},
 "allreduce": {"latency_s": 1e-4, "bandwidth_bytes_per_s": 1.25e8}, "largest_bytes": 1048576, "seconds": 1, "samples": []}
JSON
"$py" "$src/perf/cluster_study.py" --build "$(dirname "$bin")" --models resnet20 --ranks 8 --batches 32 --no-png \
  --profile-dir "$work/profiles" --network "$work/net.json" --out "$work/slow" >"$work/slow.log" 2>&1 ||
  fail "cluster_study.py --network: exit $?: $(tail -3 "$work/slow.log")"
python3 - "$work/study.json" "$work/slow.json" "$work/slow.md" <<'PY' || fail "the variant's network is not the one given"
import json, sys
fast, slow = (json.load(open(f))["rows"] for f in sys.argv[1:3])
md = open(sys.argv[3]).read()
dp = lambda rows: next(r["iteration_ms"] for r in rows if r["mode"] == "dp" and r["ranks"] == 8)
checks = {"the measured profile is named": "net.json: point-to-point 1.00 Gbit/s and 100 us" in md,
          "the command shows the variant": "--profile-dir" in md and "--network net.json" in md,
          "a slower network makes data parallel slower": dp(slow) > dp(fast)}
for name, ok in checks.items():
    print(("ok   " if ok else "FAIL ") + name)
sys.exit(0 if all(checks.values()) else 1)
PY

# fit-packing refuses a sample without a number, naming the file and the key.
echo '{"samples": [{"label": "x", "idle_share": 0.5, "slack_share": 0, "background_share": "a lot", "foreground_slowdown": 1}]}' \
  >"$work/bad.json"
"$bin" fit-packing "$work/bad.json" --out "$work/p.json" >"$work/fit.out" 2>&1 && fail "fit-packing took a bad file"
grep -q "bad.json: samples\[0\]: \"background_share\" must be a finite number" "$work/fit.out" ||
  fail "fit-packing: unclear error: $(cat "$work/fit.out")"
finish cluster_study

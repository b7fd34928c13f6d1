#!/usr/bin/env bash
# perf/mux1_summary.py (the GPU check's one-process multiplexing figures) on
# hand-made metrics: per foreground batch, the medians over rounds of the
# slowdown and the cluster throughput, the share of the GPU the foreground
# keeps busy, the cause runs' figures, and an incomplete round named as
# missing instead of counted. Values worked by hand in the comments.
# Usage: mux1_summary.sh BURSTPOOL_BINARY SOURCE_DIR
set -u
source "$(dirname "$0")/lib/harness.sh" "$@"

alone() {  # alone FILE SAMPLES_PER_SECOND
  printf '{"samples_per_second": %s, "run": {"device": "NVIDIA H200 (cuda)"}}\n' "$2" >"$work/$1"
}
shared() {  # shared FILE FG BG BG_ALONE
  local format='{"foreground_samples_per_second": %s, "background_samples_per_second": %s,'
  format+=' "foreground_slowdown": 1.05, "cluster_throughput_vs_data_parallel": 1.2,'
  format+=' "background": {"alone_samples_per_second": %s, "priority": "SCHED_IDLE", "gate_wait_seconds": 0.5}}\n'
  # shellcheck disable=SC2059  # the format is ours
  printf "$format" "$2" "$3" "$4" >"$work/$1"
}
# Batch 32: slowdowns 3200/2900 and 3000/2800, cluster throughputs
# 2900/3200 + 2000/10000 = 1.10625 and 2800/3000 + 0.3 = 1.2333...
alone b32_alone_1.json 3200; shared b32_shared_1.json 2900 2000 10000
alone b32_alone_2.json 3000; shared b32_shared_2.json 2800 3000 10000
# Batch 4: slowdowns 800/760 and 800/780, cluster throughputs 0.95 + 0.6 and 0.975 + 0.7.
alone b4_alone_1.json 800; shared b4_shared_1.json 760 6000 10000
alone b4_alone_2.json 800; shared b4_shared_2.json 780 7000 10000
alone b8_alone_1.json 1500  # its shared run failed
shared cause_before.json 7000 64 14700

python3 "$src/perf/mux1_summary.py" "$work" "$work/mux1.json" >"$work/out.txt" || fail "exit $?: $(cat "$work/out.txt")"
python3 - "$work/mux1.json" <<'PY' || fail "figures differ from the hand-worked ones: $(cat "$work/mux1.json")"
import json, math, sys
s = json.load(open(sys.argv[1]))
close = lambda a, b: math.isclose(a, b, rel_tol=1e-9)
p = {q["foreground_batch"]: q for q in s["points"]}
checks = {
    "device": s["device"] == "NVIDIA H200 (cuda)" and p[4]["device"] == s["device"],
    "batches with a complete round": sorted(p) == [4, 32] and p[4]["rounds"] == 2,
    "slowdown at 32": close(p[32]["foreground_slowdown"], (3200 / 2900 + 3000 / 2800) / 2),
    "cluster throughput at 32": close(p[32]["cluster_throughput"], (1.10625 + 2800 / 3000 + 0.3) / 2),
    "slowdown at 4": close(p[4]["foreground_slowdown"], (800 / 760 + 800 / 780) / 2),
    "cluster throughput at 4": close(p[4]["cluster_throughput"], (1.55 + 1.675) / 2),
    # step at 32: 32 / 3100 s; at 4: 4 / 800 s; busy = 4/32 x (32/3100) / (4/800) = 800/3100
    "GPU busy at 4": close(p[4]["gpu_busy_fraction"], 800 / 3100),
    "GPU busy at 32": close(p[32]["gpu_busy_fraction"], 1.0),
    "missing round named": s["missing"] == ["batch 8 round 1"],
    "cause figures": s["causes"]["before"]["background_shared_samples_per_second"] == 64
    and s["causes"]["before"]["thread_priority"] == "SCHED_IDLE",
}
for name, ok in checks.items():
    print(("ok   " if ok else "FAIL ") + name)
sys.exit(0 if all(checks.values()) else 1)
PY
grep -q "^missing: batch 8 round 1$" "$work/out.txt" || fail "the missing round is not printed"
finish mux1_summary

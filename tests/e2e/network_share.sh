#!/usr/bin/env bash
# perf/network_share.py on hand-made time-to-accuracy studies: every repeat's
# samples/s from its epochs and seconds, repeats pooled over the studies of a
# side, settings matched by label and settings less the seed, a setting that
# only one side has left out, and the network's share as 1 - shaped /
# unshaped. Values worked by hand in the comments.
# Usage: network_share.sh BURSTPOOL_BINARY SOURCE_DIR
set -u
source "$(dirname "$0")/lib/harness.sh" "$@"

study() {  # study FILE SSGD_SECONDS SSGD_EPOCHS WAITING [EXTRA_LABEL]
  python3 - "$work/$1" "$2" "$3" "$4" "${5:-}" <<'PY'
import json, sys
path, seconds, epochs, waiting, extra = sys.argv[1:]
record = lambda s, e, seed: {"settings": {"sync.strategy": "ssgd", "optimizer.lr": 0.08, "train.epochs": 8,
                                          "job.seed": seed, "train.log_every": 9},
                             "repeat_seconds": [float(x) if x != "-" else None for x in s.split(",")],
                             "repeat_epochs": [float(x) for x in e.split(",")], "shares": {"waiting": float(waiting)}}
runs = {"ssgd, global batch 512": [record(seconds, epochs, 2)]}
if extra:
    runs[extra] = [record("1", "1", 1)]
json.dump({"model": "lenet5", "target": 0.89, "runs": runs}, open(path, "w"))
PY
}
# Unshaped repeats, with 600 samples an epoch: 2 epochs in 0.1 s = 12000/s, 1 in 0.1 s = 6000/s, and in the
# second study 3 in 0.2 s = 9000/s and one that missed the target (no seconds): median of 12000, 6000, 9000 = 9000.
study u1.json 0.1,0.1 2,1 0.25
study u2.json 0.2,- 3,4 0.35 "local-sgd, batch 16"
# Shaped: 1 epoch in 0.2 s = 3000/s, 2 in 0.2 s = 6000/s, 3 in 0.4 s = 4500/s: median 4500; share 1 - 4500/9000.
study s1.json 0.2,0.2,0.4 1,2,3 0.5
python3 "$src/perf/network_share.py" --unshaped "$work/u1.json" "$work/u2.json" --shaped "$work/s1.json" \
  --samples 600 --out "$work/share" >"$work/out.txt" || fail "exit $?: $(cat "$work/out.txt")"
python3 - "$work/share.json" <<'PY' || fail "figures differ from the hand-worked ones: $(cat "$work/share.json")"
import json, math, sys
rows = json.load(open(sys.argv[1]))["rows"]
close = lambda a, b: math.isclose(a, b, rel_tol=1e-9)
r = rows[0] if rows else {}
checks = {
    "one setting in both": len(rows) == 1 and r["label"] == "ssgd, global batch 512",
    "unshaped rates pooled": sorted(r["unshaped_rates"]) == sorted([12000.0, 6000.0, 9000.0]),
    "unshaped median": close(r["unshaped_median"], 9000),
    "shaped median": close(r["shaped_median"], 4500),
    "network's share": close(r["network_share"], 0.5),
    "waiting medians": close(r["unshaped_waiting"], 0.3) and close(r["shaped_waiting"], 0.5),
}
for name, ok in checks.items():
    print(("ok   " if ok else "FAIL ") + name)
sys.exit(0 if all(checks.values()) else 1)
PY
grep -q "| ssgd, global batch 512 | lr 0.08, 8-epoch cosine | 9000 (6000-12000, 3 runs) | 4500 (3000-6000, 3 runs) | 50% | 30% | 50% |" \
  "$work/share.md" || fail "the table's row differs: $(cat "$work/share.md")"
study missed.json - 1 0.2  # its one repeat missed the target: no rate to compare
python3 "$src/perf/network_share.py" --unshaped "$work/missed.json" --shaped "$work/s1.json" --samples 600 \
  --out "$work/x" >"$work/err.txt" 2>&1 && fail "studies without a setting that reached the target in both are accepted"
grep -q "no setting reached the target in both" "$work/err.txt" || fail "no reason given: $(cat "$work/err.txt")"
finish network_share

#!/usr/bin/env bash
# perf/time_to_accuracy.py's grid rules on hand-made studies: --bests-of takes
# each strategy's fastest settings that reached the target (a setting that
# missed it in a repeat never), --neighbours adds each named best's
# neighbours (learning rate halved and doubled, schedule a quarter of its
# length either side, a step of at least one epoch, no schedule below 1
# epoch; --neighbour-keys steps only the keys named; batch: ssgd at half
# and twice its global batch, the learning rate scaled), a best on a tuned
# key's extreme is an edge, and --interleave runs every setting once per
# seed before the next seed.
# Usage: study_grids.sh BURSTPOOL_BINARY SOURCE_DIR
set -u
source "$(dirname "$0")/lib/harness.sh" "$@"

if out=$(cd "$src/perf" && python3 - "$work" <<'PY' 2>&1
import argparse, json, sys
import time_to_accuracy as tta

ssgd = {"sync.strategy": "ssgd", "train.batch_size": 128, "optimizer.lr": 0.02, "train.epochs": 2}
bm = {"sync.strategy": "shadow", "optimizer.lr": 0.005, "train.epochs": 3, "train.eval_every": 468}
run = lambda settings, seconds: {"settings": {**settings, "job.seed": 1}, "time_to_target_seconds": seconds}
study = f"{sys.argv[1]}/study.json"
json.dump({"runs": {"ssgd": [run(ssgd, 130.0), run({**ssgd, "optimizer.lr": 0.04}, 120.0),
                             run({**ssgd, "optimizer.lr": 0.08}, None)],
                    "shadow bm": [run(bm, 124.0), run({**bm, "optimizer.lr": 0.01}, 150.0)],
                    "sma": [run({"sync.strategy": "sma", "optimizer.lr": 0.02, "train.epochs": 1}, None)]}},
          open(study, "w"))
args = lambda neighbours, keys=("lr", "epochs"): argparse.Namespace(bests_of=[study], top=1, neighbours=neighbours,
                                                                    neighbour_keys=keys)

plain = tta.grid_for(args(None))
assert list(plain) == ["ssgd", "shadow bm"], plain  # sma never reached the target
assert plain["ssgd"] == [{**ssgd, "optimizer.lr": 0.04}], plain["ssgd"]  # the fastest that reached it
assert plain["shadow bm"] == [{"sync.strategy": "shadow", "optimizer.lr": 0.005, "train.epochs": 3}], plain
grid = tta.grid_for(args(["shadow"]))
assert grid["ssgd"] == plain["ssgd"], "only the named strategies get neighbours"
pairs = [(s["optimizer.lr"], s["train.epochs"]) for s in grid["shadow bm"]]
assert pairs == [(0.005, 3), (0.0025, 3), (0.01, 3), (0.005, 2), (0.005, 4)], pairs
assert tta.grid_edges(grid["shadow bm"][0], grid["shadow bm"]) == [], "the centre is inside"
assert tta.grid_edges(grid["shadow bm"][1], grid["shadow bm"]) == ["lr lowest"]
assert tta.grid_edges(grid["shadow bm"][4], grid["shadow bm"]) == ["epochs highest"]
lengths = [(s["optimizer.lr"], s["train.epochs"]) for s in tta.grid_for(args(["shadow"], ["epochs"]))["shadow bm"]]
assert lengths == [(0.005, 3), (0.005, 2), (0.005, 4)], lengths  # --neighbour-keys epochs: the schedule alone
batches = tta.grid_for(args(["ssgd"], ["batch"]))  # ssgd at half and twice its batch, the rate scaled with it
assert batches["ssgd"] == plain["ssgd"], batches  # the best itself, no other neighbours
assert [(label, s["train.batch_size"], s["optimizer.lr"], s["train.epochs"], s["train.eval_every"])
        for label in ("ssgd, global batch 64", "ssgd, global batch 256") for s in batches[label]] == [
    ("ssgd, global batch 64", 64, 0.02, 2, 234), ("ssgd, global batch 256", 256, 0.08, 2, 58)], batches
assert "shadow bm" in batches and len(batches) == 4, "learners get no batch neighbours"
short = tta.neighbourhoods([{"optimizer.lr": 0.02, "train.epochs": 1}, {"optimizer.lr": 0.04, "train.epochs": 1}])
assert [(s["optimizer.lr"], s["train.epochs"]) for s in short] == [
    (0.02, 1), (0.01, 1), (0.04, 1), (0.02, 2), (0.08, 1), (0.04, 2)], short  # no 0-epoch; (0.04, 1) once
long = tta.neighbourhoods([{"optimizer.lr": 0.1, "train.epochs": 12}, {"optimizer.lr": 0.1, "train.epochs": 6}], ["epochs"])
assert [s["train.epochs"] for s in long] == [12, 9, 15, 6, 4, 8], long  # a quarter of 12 is 3; of 6, 1.5 -> 2

order = [(label, n, seed) for _, label, n, _, seed in tta.run_order(["a", "b"], {"a": [1, 2], "b": [3]}, 2, True)]
assert order == [("a", 0, 1), ("a", 1, 1), ("b", 0, 1), ("a", 0, 2), ("a", 1, 2), ("b", 0, 2)], order
print("bests, neighbours (5 around lr 0.005 at 3 epochs), edges and rounds as worked by hand")
PY
); then echo "ok   $out"; else fail "$out"; fi

finish study_grids

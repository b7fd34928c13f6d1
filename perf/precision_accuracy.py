#!/usr/bin/env python3
"""Does a model train as well in bf16 as in fp32? `burstpool train JOB` once
per seed and [job] precision, the precisions alternating within a seed, on
the same ranks; the final test accuracy of each run, the per-seed
difference (bf16 - fp32), and samples/s for what the emulation costs on
the CPU (bf16 keeps its values in float storage there, so it is slower and
the speed is not what a GPU would give).

  perf/precision_accuracy.py --build build --job jobs/fashion_mnist_lenet.ini --seeds 1 2 3 --out perf/results/NAME
"""
import argparse
import json
import os
import statistics
import subprocess
import tempfile

from report import write_report


def train(build, job, ranks, precision, seed, extra):
    with tempfile.TemporaryDirectory() as tmp:
        metrics = os.path.join(tmp, "m.json")
        cmd = ["mpirun", "-np", str(ranks), os.path.join(build, "burstpool"), "train", job, "--metrics", metrics,
               "--set", f"job.precision={precision}", "--set", f"job.seed={seed}"] + extra
        done = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if done.returncode != 0:
            raise SystemExit(f"{' '.join(cmd)} failed:\n{done.stderr[-2000:]}")
        with open(metrics) as f:
            m = json.load(f)
    return {"test_accuracy": m["evaluations"][-1]["test_accuracy"], "samples_per_second": m["samples_per_second"],
            "epochs": m["epochs"], "final_loss": m["final_loss"]}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", required=True)
    ap.add_argument("--job", required=True)
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    ap.add_argument("--set", action="append", default=[], help="passed to train as --set KEY=VALUE")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    extra = [x for kv in a.set for x in ("--set", kv)]
    runs = []
    for i, seed in enumerate(a.seeds):
        order = ["fp32", "bf16"] if i % 2 == 0 else ["bf16", "fp32"]
        got = {p: train(a.build, a.job, a.ranks, p, seed, extra) for p in order}
        runs.append({"seed": seed, **got})
        print(f"seed {seed}: fp32 {got['fp32']['test_accuracy']:.4f}, bf16 {got['bf16']['test_accuracy']:.4f}")
    diffs = [r["bf16"]["test_accuracy"] - r["fp32"]["test_accuracy"] for r in runs]
    speed = [r["bf16"]["samples_per_second"] / r["fp32"]["samples_per_second"] for r in runs]
    lines = [
        f"`burstpool train {os.path.basename(a.job)}` {' '.join(extra)} on {a.ranks} rank(s), [job] precision fp32 "
        f"and bf16 for each seed (which goes first alternating); final test accuracy.",
        "",
        "| seed | fp32 accuracy | bf16 accuracy | bf16 - fp32 | fp32 samples/s | bf16 samples/s |",
        "|---|---|---|---|---|---|",
    ]
    for r, d in zip(runs, diffs):
        lines.append(f"| {r['seed']} | {r['fp32']['test_accuracy']:.4f} | {r['bf16']['test_accuracy']:.4f} | {d:+.4f} | "
                     f"{r['fp32']['samples_per_second']:.0f} | {r['bf16']['samples_per_second']:.0f} |")
    lines += ["", f"Median difference bf16 - fp32: {statistics.median(diffs):+.4f} (from {min(diffs):+.4f} to "
              f"{max(diffs):+.4f}); median speed bf16 / fp32: {statistics.median(speed):.2f}."]
    write_report(a.out, lines, {"job": a.job, "ranks": a.ranks, "extra": extra, "runs": runs})


if __name__ == "__main__":
    main()

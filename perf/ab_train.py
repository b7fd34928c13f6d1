#!/usr/bin/env python3
"""Two burstpool builds on one job, side by side: `burstpool train JOB` with
each build in every round (which goes first alternating), the same mpirun
rank count, and the median over rounds of the per-round ratio of their
samples/s (this build over the baseline). For checking that a change to the
run's control flow costs nothing, on kinds of run strong_scaling.py does not
cover (the learners, a background job).

  perf/ab_train.py --build build --baseline OLD/build --job JOB.ini --ranks 2 --rounds 5 --out perf/results/NAME
"""
import argparse
import json
import os
import statistics
import subprocess
import tempfile

from report import write_report


def samples_per_second(build, job, ranks, extra):
    with tempfile.TemporaryDirectory() as tmp:
        metrics = os.path.join(tmp, "m.json")
        cmd = ["mpirun", "-np", str(ranks), os.path.join(build, "burstpool"), "train", job, "--metrics", metrics] + extra
        done = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if done.returncode != 0:
            raise SystemExit(f"{' '.join(cmd)} failed:\n{done.stderr[-2000:]}")
        with open(metrics) as f:
            return json.load(f)["samples_per_second"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", required=True)
    ap.add_argument("--baseline", required=True)
    ap.add_argument("--label", default="this build", help="what --build is, for the report")
    ap.add_argument("--baseline-label", default="baseline", help="what --baseline is, for the report")
    ap.add_argument("--job", required=True)
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--set", action="append", default=[], help="passed to train as --set KEY=VALUE")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    extra = [x for kv in a.set for x in ("--set", kv)]
    rounds = []
    for r in range(a.rounds):
        order = [("new", a.build), ("old", a.baseline)]
        if r % 2:
            order.reverse()
        got = {name: samples_per_second(build, a.job, a.ranks, extra) for name, build in order}
        rounds.append(got)
        print(f"round {r + 1}: this build {got['new']:.0f}/s, {a.baseline_label} {got['old']:.0f}/s")
    ratios = [g["new"] / g["old"] for g in rounds]
    lines = [
        f"`burstpool train {os.path.basename(a.job)}` {' '.join(extra)} on {a.ranks} rank(s), {a.label} "
        f"against {a.baseline_label}, {a.rounds} rounds, which goes first alternating.",
        "",
        "| round | this build samples/s | baseline samples/s | ratio |",
        "|---|---|---|---|",
    ]
    lines += [f"| {i + 1} | {g['new']:.0f} | {g['old']:.0f} | {g['new'] / g['old']:.3f} |" for i, g in enumerate(rounds)]
    lines += ["", f"Median of the per-round ratios: {statistics.median(ratios):.3f} "
                  f"(from {min(ratios):.3f} to {max(ratios):.3f})."]
    write_report(a.out, lines, {"rounds": rounds, "median_ratio": statistics.median(ratios)})


if __name__ == "__main__":
    main()

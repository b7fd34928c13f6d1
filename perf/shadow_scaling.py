#!/usr/bin/env python3
"""Shadow trainer scaling on this machine: samples/s of shadow (average rule)
with 1, 2 and 4 trainers (learners per rank x ranks) against synchronous SGD
(ssgd) on the same ranks with the same samples per step (global batch =
trainers x learner batch), LeNet-5 on synthetic data, learner batch 16, one
thread per rank (shared by the rank's learners). Medians of --rounds rounds,
the configurations of a round run one after another.

ShadowSync's claim is that throughput grows with the trainers because no
trainer waits for the network; on one 2-core machine the trainers compete for
the same cores, so what this shows is the cost of the averaging thread and of
several learners per rank beside ssgd's synchronous steps.

Usage: perf/shadow_scaling.py [--build build] [--rounds 3] [--steps 400] [--out perf/results/shadow_scaling]
"""
import argparse
import json
import os
import statistics
import subprocess
import tempfile

from report import write_report

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
BATCH = 16
CONFIGS = [(1, 1), (1, 2), (2, 1), (1, 4), (2, 2)]  # (ranks, learners per rank)


def train(build, tmp, ranks, settings, steps):
    job = os.path.join(tmp, "job.ini")
    open(job, "w").write(f"[job]\nmodel = {ROOT}/jobs/models/lenet5.ini\nthreads = 1\n[data]\nsource = synthetic\n"
                         "synthetic_train_samples = 8192\nsynthetic_test_samples = 0\n[train]\nlog_every = 100000\n")
    metrics = os.path.join(tmp, "m.json")
    cmd = [f"{build}/burstpool", "train", job, "--steps", str(steps), "--metrics", metrics]
    for k, v in settings.items():
        cmd += ["--set", f"{k}={v}"]
    subprocess.run(["mpirun", "-np", str(ranks), "--bind-to", "none", *cmd], env=ENV, check=True,
                   capture_output=True, text=True)
    return json.load(open(metrics))["samples_per_second"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=400)
    ap.add_argument("--out", default=os.path.join(ROOT, "perf/results/shadow_scaling"))
    a = ap.parse_args()
    rows = {}
    with tempfile.TemporaryDirectory() as tmp:
        for k in range(a.rounds):
            for ranks, learners in CONFIGS:
                trainers = ranks * learners
                shadow = train(a.build, tmp, ranks, {"sync.strategy": "shadow", "sync.learners": learners,
                                                     "train.learner_batch_size": BATCH}, a.steps)
                ssgd = train(a.build, tmp, ranks, {"train.batch_size": BATCH * trainers}, a.steps)
                rows.setdefault((ranks, learners), []).append((shadow, ssgd))
                print(f"round {k + 1}: {ranks} rank(s) x {learners} learner(s): shadow {shadow:.0f}, "
                      f"ssgd {ssgd:.0f} samples/s", flush=True)
    lines = [f"Shadow trainer scaling, LeNet-5, learner batch {BATCH}, synthetic data, one thread per rank, "
             f"{a.steps} steps per run, medians of {a.rounds} rounds (`python3 perf/shadow_scaling.py`). ssgd runs "
             "on the same ranks with global batch = trainers x learner batch.", "",
             "| ranks | learners per rank | trainers | shadow samples/s | ssgd samples/s | shadow / ssgd |",
             "|---|---|---|---|---|---|"]
    out = []
    for (ranks, learners), runs in rows.items():
        shadow = statistics.median(r[0] for r in runs)
        ssgd = statistics.median(r[1] for r in runs)
        ratio = statistics.median(r[0] / r[1] for r in runs)
        lines.append(f"| {ranks} | {learners} | {ranks * learners} | {shadow:.0f} | {ssgd:.0f} | {ratio:.2f} |")
        out.append({"ranks": ranks, "learners": learners, "shadow_samples_per_second": shadow,
                    "ssgd_samples_per_second": ssgd, "ratio": ratio, "rounds": runs})
    write_report(a.out, lines, out)


if __name__ == "__main__":
    main()

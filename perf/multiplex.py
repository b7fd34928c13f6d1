#!/usr/bin/env python3
"""Multiplexing on 2 ranks of this machine (one core per rank): a foreground
small-VGG (global batch 32) beside a background small-VGG trained data
parallel (batch 64, per-rank batch-norm statistics), for two foreground plans:

  split:     jobs/multiplex/vgg_small_split_2ranks.json - block 1 on rank 0,
             block 2 on rank 1, block 3 and the classifier on both, so each
             rank waits for the other for part of every step;
  alternate: jobs/multiplex/vgg_small_alternate_2ranks.json - every layer on
             one rank, the ranks taking turns (block 1 and conv3_2 on rank 0,
             block 2, conv3_1 and the classifier on rank 1): each rank idle
             about half of every step;
  dp:        plain data parallel, where a rank is hardly ever idle.

Each round runs, side by side, the foreground alone (no [background]) and the
foreground with the background. Reported per plan, medians over rounds:
  - from the shared run's metrics: foreground and background samples/s, the
    foreground's slowdown against its own first steps alone, and cluster
    throughput = fg shared/fg alone + bg shared/bg alone (both jobs' "alone"
    rates are measured inside the run: calibrate_steps steps each);
  - side by side: the foreground's slowdown against the separate alone run.

Usage: perf/multiplex.py [--build build] [--rounds 3] [--steps 300] [--out perf/results/multiplex]
"""
import argparse
import json
import os
import statistics
import subprocess
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
JOBS = os.path.join(ROOT, "jobs", "multiplex")
ENV = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", OMPI_ALLOW_RUN_AS_ROOT="1",
           OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
ENV.pop("OMPI_MCA_mpi_yield_when_idle", None)  # it would hand the foreground's core away at every MPI poll


def train(build, tmp, plan, steps, background):
    metrics = os.path.join(tmp, "m.json")
    cmd = ["mpirun", "-np", "2", f"{build}/burstpool", "train", os.path.join(JOBS, "foreground_vgg_small.ini"),
           "--plan", plan, "--steps", str(steps), "--metrics", metrics]
    if not background:
        cmd += ["--set", "background.job=none"]
    subprocess.run(cmd, env=ENV, check=True, capture_output=True, text=True)
    return json.load(open(metrics))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--out", default=os.path.join(ROOT, "perf", "results", "multiplex"))
    args = ap.parse_args()
    tmp = tempfile.mkdtemp()
    dp_plan = os.path.join(tmp, "dp.json")
    subprocess.run([f"{args.build}/burstpool", "plan", "--data-parallel", os.path.join(ROOT, "jobs/models/vgg_small.ini"),
                    "--ranks", "2", "--global-batch", "32", "--out", dp_plan], env=ENV, check=True, capture_output=True)
    plans = {"split": os.path.join(JOBS, "vgg_small_split_2ranks.json"),
             "alternate": os.path.join(JOBS, "vgg_small_alternate_2ranks.json"), "dp": dp_plan}
    runs = {name: [] for name in plans}
    for r in range(args.rounds):
        for name, plan in plans.items():
            alone = train(args.build, tmp, plan, args.steps, False)
            shared = train(args.build, tmp, plan, args.steps, True)
            b = shared["background"]
            row = {
                "fg_alone_separate": alone["samples_per_second"],
                "fg_alone_in_run": b["foreground_alone_samples_per_second"],
                "fg_shared": shared["foreground_samples_per_second"],
                "slowdown_in_run": shared["foreground_slowdown"],
                "slowdown_side_by_side": alone["samples_per_second"] / shared["foreground_samples_per_second"],
                "bg_alone": b["alone_samples_per_second"],
                "bg_shared": shared["background_samples_per_second"],
                "cluster_throughput": shared["cluster_throughput"],
                "cluster_throughput_side_by_side": shared["foreground_samples_per_second"] / alone["samples_per_second"]
                + shared["background_samples_per_second"] / b["alone_samples_per_second"],
                "gate_wait_seconds": b["gate_wait_seconds"],
                "priority": b["priority"],
            }
            runs[name].append(row)
            print(f"round {r + 1} {name}: " + ", ".join(f"{k} {v:.3f}" if isinstance(v, float) else f"{k} {v}"
                                                         for k, v in row.items()), flush=True)
    keys = [k for k in runs["split"][0] if k != "priority"]
    medians = {name: {k: statistics.median(row[k] for row in rows) for k in keys} for name, rows in runs.items()}
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out + ".json", "w") as f:
        json.dump({"rounds": args.rounds, "steps": args.steps, "runs": runs, "medians": medians}, f, indent=1)
    labels = {
        "fg_alone_separate": "foreground alone, separate run (samples/s)",
        "fg_alone_in_run": "foreground alone, its first steps in the shared run (samples/s)",
        "fg_shared": "foreground beside the background (samples/s)",
        "slowdown_in_run": "foreground slowdown (metrics: vs its first steps)",
        "slowdown_side_by_side": "foreground slowdown (vs the separate alone run)",
        "bg_alone": "background alone (samples/s)",
        "bg_shared": "background beside the foreground (samples/s)",
        "cluster_throughput": "cluster throughput (metrics)",
        "cluster_throughput_side_by_side": "cluster throughput (fg vs the separate alone run)",
        "gate_wait_seconds": "background held back by the gate (s)",
    }
    lines = [f"# Multiplexing on 2 ranks (medians of {args.rounds} rounds, {args.steps} foreground steps)", "",
             "Command: `python3 perf/multiplex.py` (foreground jobs/multiplex/foreground_vgg_small.ini, batch 32; "
             "background jobs/multiplex/background_vgg_small.ini, batch 64, data parallel; one core per rank; "
             f"background thread priority: {runs['split'][0]['priority']}).", "",
             "| figure | split plan | alternate plan | data parallel |", "|---|---|---|---|"]
    for k in keys:
        lines.append(f"| {labels[k]} | " + " | ".join(f"{medians[p][k]:.3f}" for p in plans) + " |")
    with open(args.out + ".md", "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()

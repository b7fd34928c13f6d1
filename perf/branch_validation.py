#!/usr/bin/env python3
"""Branches at once, simulated against measured, on this machine.

inception (jobs/models/inception.ini) at a small global batch on 2, 3 and 4
ranks: `burstpool plan --branches at-once` (every block's branches on
disjoint ranks where the ranks allow), `--branches in-turn` and `--branches
auto` (the cheaper, as predicted) from a layer
profile measured here by two processes at once (the ranks share the
machine) and a measured network profile; each plan's step as `burstpool
simulate` predicts it (`--cores` for more ranks than cores: rank r on core
r mod cores, as Open MPI binds them) against the measured time per training
step (one thread per rank, synthetic data). Reports each plan's error, how
many layers the plan puts off the rank-0 prefix, and the measured step of
in turn over at once and over auto. Medians over --rounds rounds, the plans of a round run
alternately.

Usage: perf/branch_validation.py [--build build] [--rounds 3] [--batch 8] [--steps 8]
                                 [--out perf/results/branch_validation]
"""
import argparse
import json
import os
import statistics
import subprocess
import tempfile

from report import write_report

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODEL = f"{ROOT}/jobs/models/inception.ini"
CORES = os.cpu_count() or 1
ENV = dict(os.environ, OMP_NUM_THREADS="1", OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           OMPI_MCA_mpi_yield_when_idle="1")


def run(cmd):
    return subprocess.run(cmd, env=ENV, check=True, capture_output=True, text=True).stdout


def mpirun(ranks, cmd):
    bind = ["--oversubscribe", "--bind-to", "core:overload-allowed"] if ranks > CORES else []
    return run(cmd if ranks == 1 else ["mpirun", "-np", str(ranks), *bind, *cmd])


def plan(a, tmp, profile, net, ranks, branches):
    path = os.path.join(tmp, f"plan-{ranks}-{branches}.json")
    summary = path + ".s.json"
    run([f"{a.build}/burstpool", "plan", MODEL, "--profile", profile, "--network", net, "--ranks", str(ranks),
         "--global-batch", str(a.batch), "--amp-limit", "none", "--branches", branches, "--out", path,
         "--summary", summary])
    off = sum(1 for l in json.load(open(summary))["layers"] if l["first_rank"] > 0)
    sim = os.path.join(tmp, "sim.json")
    run([f"{a.build}/burstpool", "simulate", path, "--model", MODEL, "--profile", profile, "--network", net,
         "--out", sim, "--cores", str(CORES if ranks > CORES else 0)])
    return path, off, json.load(open(sim))["iteration_s"]


def measure(a, tmp, plan_path, ranks):
    job = os.path.join(tmp, "inception.ini")
    open(job, "w").write(f"[job]\nmodel = {MODEL}\n[data]\nsource = synthetic\nsynthetic_train_samples = 256\n"
                         f"synthetic_test_samples = 0\n[train]\nbatch_size = {a.batch}\nlog_every = 100000\n")
    metrics = os.path.join(tmp, "m.json")
    mpirun(ranks, [f"{a.build}/burstpool", "train", job, "--steps", str(a.steps), "--plan", plan_path,
                   "--metrics", metrics])
    m = json.load(open(metrics))
    return m["train_seconds"] / m["steps"]


def one_round(a, tmp, net):
    profile = os.path.join(tmp, "inception.prof.json")
    batches = ",".join(str(b) for b in (1, 2, 4, 8, 16) if b <= a.batch)
    mpirun(min(2, CORES), [f"{a.build}/burstpool", "profile", MODEL, "--batches", batches, "--warmup", "1",
                           "--repeats", "3", "--out", profile])
    rows = []
    for ranks in (2, 3, 4):
        for branches in ("at-once", "in-turn", "auto"):
            path, off, predicted = plan(a, tmp, profile, net, ranks, branches)
            measured = measure(a, tmp, path, ranks)
            rows.append({"ranks": ranks, "branches": branches, "layers_off_prefix": off,
                         "predicted_ms": 1e3 * predicted, "measured_ms": 1e3 * measured,
                         "error": predicted / measured - 1})
            print(rows[-1], flush=True)
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--out", default=os.path.join(ROOT, "perf/results/branch_validation"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--steps", type=int, default=8)
    a = ap.parse_args()
    rounds = []
    with tempfile.TemporaryDirectory() as tmp:
        net = os.path.join(tmp, "net.json")
        run(["mpirun", "-np", "2", f"{a.build}/burstpool", "profile", "--network", "--max-bytes", "16000000",
             "--out", net])
        for i in range(a.rounds):
            print(f"round {i + 1} of {a.rounds}", flush=True)
            rounds.append(one_round(a, tmp, net))
    lines = [f"inception, global batch {a.batch}, amplification limit none, {a.steps} steps per run, one thread per "
             f"rank on this {CORES}-core machine (3 and 4 ranks share the cores, simulated with --cores {CORES}); "
             f"plans from a profile measured by 2 processes at once; medians of {a.rounds} rounds "
             "(`python3 perf/branch_validation.py`).", "",
             "| ranks | branches | layers off prefix | simulated ms | measured ms | error | each round |",
             "|---|---|---|---|---|---|---|"]
    for i, first in enumerate(rounds[0]):
        same = [r[i] for r in rounds]
        med = {k: statistics.median(r[k] for r in same) for k in ("predicted_ms", "measured_ms", "error")}
        each = ", ".join(f"{100 * r['error']:+.0f}%" for r in same)
        lines.append(f"| {first['ranks']} | {first['branches']} | {first['layers_off_prefix']} | "
                     f"{med['predicted_ms']:.1f} | {med['measured_ms']:.1f} | {100 * med['error']:+.0f}% | {each} |")
    def measured(rows, ranks, branches):
        return next(r for r in rows if r["ranks"] == ranks and r["branches"] == branches)["measured_ms"]
    for other in ("at-once", "auto"):
        lines += ["", f"Measured step, in turn over {other} (median of the rounds' ratios; above 1: {other} faster):"]
        for ranks in (2, 3, 4):
            ratios = [measured(rows, ranks, "in-turn") / measured(rows, ranks, other) for rows in rounds]
            lines.append(f"- {ranks} ranks: {statistics.median(ratios):.2f}x ({', '.join(f'{x:.2f}' for x in ratios)})")
    write_report(a.out, lines, rounds)


if __name__ == "__main__":
    main()

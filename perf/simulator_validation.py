#!/usr/bin/env python3
"""Simulator against real runs on this machine: for lenet5 and vgg_small at
global batch 64, plans on 1 to 4 ranks (data parallel; on 2 and 3 ranks the
classifier head on one rank, and on 2 ranks on a non-prefix rank), the
iteration time that `burstpool simulate` predicts from a 1-thread layer
profile (made alone for 1-rank plans, and by as many processes as cores at
once under mpirun otherwise, as the ranks then share the machine) and a
measured network profile, against the measured median training step (one
thread per rank). With more ranks than cores (3 and 4 ranks on 2 cores), the
ranks share the cores: they are bound round-robin (rank r on core r mod
cores, Open MPI's placement, which Linux keeps anyway) and `simulate --cores`
models the ranks on one core splitting it. Reports the relative error of each.

Usage: perf/simulator_validation.py [--build build] [--rounds 3] [--out perf/results/simulator_validation]
"""
import argparse
import json
import os
import statistics
import subprocess
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BATCH = 64
STEPS = {"lenet5": 400, "vgg_small": 30}
ENV = dict(os.environ, OMP_NUM_THREADS="1", OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           OMPI_MCA_mpi_yield_when_idle="1")


def run(cmd):
    return subprocess.run(cmd, env=ENV, check=True, capture_output=True, text=True).stdout


CORES = os.cpu_count() or 1


def plans(build, tmp, model):
    out = {}
    for ranks in (1, 2, 3, 4):
        path = os.path.join(tmp, f"{model}-dp{ranks}.json")
        run([f"{build}/burstpool", "plan", "--data-parallel", f"{ROOT}/jobs/models/{model}.ini", "--ranks", str(ranks),
             "--global-batch", str(BATCH), "--out", path])
        out[f"data parallel, {ranks} rank(s)"] = (ranks, path)
    for ranks, name, head in ((2, "head on rank 0", [0]), (2, "head on rank 1 (non-prefix)", [1]),
                              (3, "head on rank 0", [0])):
        dp = json.load(open(out[f"data parallel, {ranks} rank(s)"][1]))
        seen_head = False
        for layer in dp["layers"]:
            seen_head = seen_head or layer["name"].startswith("fc")
            if seen_head:
                layer["ranks"] = head
        path = os.path.join(tmp, f"{model}-{ranks}-{head[0]}.json")
        json.dump(dp, open(path, "w"))
        out[f"{ranks} ranks, {name}"] = (ranks, path)
    return out


def one_round(build, tmp, net):
    """Profiles every model afresh, then predicts and measures every plan once."""
    rows = []
    for model in STEPS:
        # Profiles as the ranks will run: alone, and one process per core sharing the machine.
        profiles = {}
        for ranks in sorted({1, min(2, CORES)}):
            profiles[ranks] = os.path.join(tmp, f"{model}.{ranks}.prof.json")
            cmd = [f"{build}/burstpool", "profile", f"{ROOT}/jobs/models/{model}.ini", "--batches",
                   "1,2,4,8,16,32,64", "--warmup", "2", "--repeats", "5", "--out", profiles[ranks]]
            run(cmd if ranks == 1 else ["mpirun", "-np", str(ranks), *cmd])
        job = os.path.join(tmp, f"{model}.ini")
        open(job, "w").write(f"[job]\nmodel = {ROOT}/jobs/models/{model}.ini\n[data]\nsource = synthetic\n"
                             "synthetic_train_samples = 1024\nsynthetic_test_samples = 0\n"
                             f"[train]\nbatch_size = {BATCH}\nlog_every = 100000\n")
        for name, (ranks, plan) in plans(build, tmp, model).items():
            sim = os.path.join(tmp, "sim.json")
            run([f"{build}/burstpool", "simulate", plan, "--model", f"{ROOT}/jobs/models/{model}.ini",
                 "--profile", profiles[min(ranks, 2, CORES)], "--network", net, "--out", sim,
                 "--cores", str(CORES if ranks > CORES else 0)])
            predicted = json.load(open(sim))["iteration_s"]
            metrics = os.path.join(tmp, "m.json")
            cmd = [f"{build}/burstpool", "train", job, "--steps", str(STEPS[model]), "--plan", plan,
                   "--metrics", metrics]
            bind = ["--oversubscribe", "--bind-to", "core:overload-allowed"] if ranks > CORES else []
            run(cmd if ranks == 1 else ["mpirun", "-np", str(ranks), *bind, *cmd])
            m = json.load(open(metrics))
            # the median step: the steady step the simulator predicts (the mean carries the start-up)
            measured = m.get("median_step_seconds") or m["train_seconds"] / m["steps"]
            rows.append({"model": model, "plan": name, "predicted_ms": 1e3 * predicted,
                         "measured_ms": 1e3 * measured, "error": predicted / measured - 1})
            print(rows[-1], flush=True)
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--out", default=os.path.join(ROOT, "perf/results/simulator_validation"))
    ap.add_argument("--rounds", type=int, default=3, help="whole rounds (profiles, predictions, runs); medians reported")
    args = ap.parse_args()
    rounds = []
    with tempfile.TemporaryDirectory() as tmp:
        net = os.path.join(tmp, "net.json")
        run(["mpirun", "-np", "2", f"{args.build}/burstpool", "profile", "--network", "--max-bytes", "16000000",
             "--out", net])
        for i in range(args.rounds):
            print(f"round {i + 1} of {args.rounds}", flush=True)
            rounds.append(one_round(args.build, tmp, net))
    lines = [f"Simulator against measured steps, global batch {BATCH}, one thread per rank (this {CORES}-core machine; "
             f"plans with more ranks than cores run with rank r bound to core r mod {CORES} and simulated with "
             f"--cores {CORES}). Medians of {args.rounds} rounds, each with fresh layer profiles; the last column is "
             "each round's error.", "",
             "| model | plan | predicted ms | measured ms | error | rounds |", "|---|---|---|---|---|---|"]
    worst = 0
    for i, first in enumerate(rounds[0]):
        same = [r[i] for r in rounds]
        med = {k: statistics.median(r[k] for r in same) for k in ("predicted_ms", "measured_ms", "error")}
        worst = max(worst, abs(med["error"]))
        each = ", ".join(f"{100 * r['error']:+.0f}%" for r in same)
        lines.append(f"| {first['model']} | {first['plan']} | {med['predicted_ms']:.2f} | {med['measured_ms']:.2f} | "
                     f"{100 * med['error']:+.0f}% | {each} |")
    lines += ["", f"Largest median error: {100 * worst:.0f}%; largest in any round: "
              f"{100 * max(abs(r['error']) for rows in rounds for r in rows):.0f}%."]
    text = "\n".join(lines) + "\n"
    print(text)
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    open(args.out + ".md", "w").write(text)
    json.dump(rounds, open(args.out + ".json", "w"), indent=1)


if __name__ == "__main__":
    main()

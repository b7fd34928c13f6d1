#!/usr/bin/env python3
"""Time to accuracy on real Fashion-MNIST, LeNet-5, 2 ranks x 1 thread:
large-batch synchronous SGD against small-batch learners (sma with an
auto-tuned learner count, local-sgd, shadow), to 0.89 test accuracy.

Each strategy gets a small learning-rate grid (and for ssgd two schedule
lengths); every run stops at the target (stop_at_target) or at its epoch
budget. The table reports, per strategy, the run that reached the target in
the least training time (evaluation excluded; wall time including loading
and evaluation alongside), and every run is in the JSON. The best runs' logs
([output] log) are drawn by scripts/plot_run.py into <out>.png: training
loss and test accuracy against wall seconds and epochs.

--plot-best reruns only each strategy's best setting from an earlier
<out>.json and draws the PNG from those runs, leaving the table alone.

Usage: perf/time_to_accuracy.py [--build build] [--out perf/results/time_to_accuracy] [--plot-best]
"""
import argparse
import json
import os
import shutil
import subprocess
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ENV = dict(os.environ, OMP_NUM_THREADS="1", OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           OMPI_MCA_mpi_yield_when_idle="1")
TARGET = 0.89
BASE = f"""[job]
model = {ROOT}/jobs/models/lenet5.ini
seed = 1
[data]
source = fashion-mnist
normalize_mean = 0.2860
normalize_std = 0.3530
[train]
target_accuracy = {TARGET}
stop_at_target = true
log_every = 1000000
[optimizer]
momentum = 0.9
weight_decay = 0.0001
[schedule]
type = cosine
"""
# strategy label -> list of (settings); batch is per learner except for ssgd (global)
GRID = {
    "ssgd, global batch 1024": [
        {"sync.strategy": "ssgd", "train.batch_size": 1024, "train.epochs": e, "train.eval_every": 15,

         "optimizer.lr": lr, "optimizer.nesterov": "true", "schedule.warmup_steps": 58}
        for e in (10, 20) for lr in (0.05, 0.1, 0.2, 0.4)],
    "sma, batch 16 per learner, auto-tuned learners": [
        {"sync.strategy": "sma", "train.learner_batch_size": 16, "train.epochs": 5, "train.eval_every": 470,

         "optimizer.lr": lr, "sync.alpha": 0.1} for lr in (0.01, 0.02, 0.05)],
    "local-sgd, batch 16, average every 8": [
        {"sync.strategy": "local-sgd", "train.learner_batch_size": 16, "train.epochs": 5, "train.eval_every": 470,

         "optimizer.lr": lr, "sync.local_steps": 8} for lr in (0.01, 0.02, 0.05)],
    "shadow, batch 16": [
        {"sync.strategy": "shadow", "train.learner_batch_size": 16, "train.epochs": 5, "train.eval_every": 470,

         "optimizer.lr": lr} for lr in (0.01, 0.02, 0.05)],
}


def run(build, tmp, settings, log):
    # Progress records for the plot: about 12 per epoch (58 ssgd steps, ~1875 learner iterations an epoch).
    settings = {"train.log_every": 5 if settings["sync.strategy"] == "ssgd" else 160, **settings}
    if settings["sync.strategy"] != "ssgd" and "train.batch_size" in settings:  # results written before the key
        settings["train.learner_batch_size"] = settings.pop("train.batch_size")
    job = os.path.join(tmp, "job.ini")
    open(job, "w").write(BASE)
    metrics = os.path.join(tmp, "m.json")
    cmd = ["mpirun", "-np", "2", f"{build}/burstpool", "train", job, "--metrics", metrics, "--set", f"output.log={log}"]
    for k, v in settings.items():
        cmd += ["--set", f"{k}={v}"]
    subprocess.run(cmd, env=ENV, check=True, capture_output=True, text=True)
    m = json.load(open(metrics))
    return {"settings": settings, "log": log, "time_to_target_seconds": m["time_to_target_seconds"],
            "wall_to_target_seconds": m["wall_to_target_seconds"], "epochs_to_target": m["epochs_to_target"],
            "best_accuracy": max(e["test_accuracy"] for e in m["evaluations"]), "epochs_run": m["epochs"],
            "samples_per_second": m["samples_per_second"], "learners_per_rank": m["learners_per_rank"],
            "learner_tuning": m["learner_tuning"]}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--out", default=os.path.join(ROOT, "perf", "results", "time_to_accuracy"))
    ap.add_argument("--plot-best", action="store_true")
    args = ap.parse_args()
    tmp = tempfile.mkdtemp()
    if args.plot_best:
        plot_best(args, tmp)
        return
    results = {}
    for label, grid in GRID.items():
        results[label] = []
        for number, settings in enumerate(grid):
            r = run(args.build, tmp, settings, os.path.join(tmp, f"{len(results)}-{number}.jsonl"))
            results[label].append(r)
            print(label, json.dumps(r), flush=True)
    best = {label: best_of(runs) for label, runs in results.items()}
    base = best["ssgd, global batch 1024"]
    lines = [f"# Time to {TARGET} test accuracy, LeNet-5 on Fashion-MNIST, 2 ranks x 1 thread", "",
             "Command: `python3 perf/time_to_accuracy.py`. One run per setting; the best of each strategy's grid "
             "(all runs in the JSON). Training seconds exclude evaluations; wall seconds include loading and "
             "evaluations.", "",
             "| strategy | best setting | epochs to target | training s to target | wall s to target | samples/s "
             "| learners per rank | speed-up vs ssgd (training s) |", "|---|---|---|---|---|---|---|---|"]
    for label, r in best.items():
        if r is None:
            lines.append(f"| {label} | none reached {TARGET} | | | | | | |")
            continue
        s = r["settings"]
        setting = f"lr {s['optimizer.lr']}" + (f", {s['train.epochs']}-epoch cosine" if "ssgd" in label else "")
        speedup = base["time_to_target_seconds"] / r["time_to_target_seconds"] if base else float("nan")
        lines.append(f"| {label} | {setting} | {r['epochs_to_target']:.2f} | {r['time_to_target_seconds']:.1f} | "
                     f"{r['wall_to_target_seconds']:.1f} | {r['samples_per_second']:.0f} | {r['learners_per_rank']} | "
                     f"{speedup:.2f}x |")
    tuning = best["sma, batch 16 per learner, auto-tuned learners"]
    if tuning:
        lines += ["", "Auto-tuner trials of the best sma run (learners per rank: samples/s): " +
                  ", ".join(f"{t['learners']}: {t['samples_per_second']:.0f}" for t in tuning["learner_tuning"])]
    text = "\n".join(lines) + "\n"
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    open(args.out + ".md", "w").write(text)
    for runs in results.values():
        for r in runs:
            r["log"] = os.path.basename(r["log"])
    json.dump({"target": TARGET, "runs": results}, open(args.out + ".json", "w"), indent=1)
    print(text)
    plot(best, tmp, args.out + ".png")
    shutil.rmtree(tmp)


def best_of(runs):
    reached = [r for r in runs if r["time_to_target_seconds"] is not None]
    return min(reached, key=lambda r: r["time_to_target_seconds"]) if reached else None


def plot_best(args, tmp):
    """Each strategy's best setting of the last full study, run again, then drawn."""
    earlier = json.load(open(args.out + ".json"))["runs"]
    best = {}
    for number, (label, runs) in enumerate(earlier.items()):
        chosen = best_of(runs)
        if chosen is not None:
            best[label] = run(args.build, tmp, chosen["settings"], os.path.join(tmp, f"best-{number}.jsonl"))
            print(label, json.dumps(best[label]), flush=True)
    plot(best, tmp, args.out + ".png")
    shutil.rmtree(tmp)


def plot(best, tmp, png):
    """The best run of each strategy, through scripts/plot_run.py (a Python with matplotlib)."""
    logs, labels = [], []
    for label, r in best.items():
        if r is not None:
            logs.append(os.path.join(tmp, r["log"]))
            labels += ["--label", label]
    python = next((p for p in ("python3", "/usr/bin/python3")
                   if subprocess.run([p, "-c", "import matplotlib"], capture_output=True).returncode == 0), None)
    if python is None:
        print("no Python with matplotlib: no plot")
        return
    subprocess.run([python, os.path.join(ROOT, "scripts", "plot_run.py"), *logs, "--out", png, *labels,
                    "--title", f"Time to {TARGET} test accuracy: the best run of each strategy"], check=True)


if __name__ == "__main__":
    main()

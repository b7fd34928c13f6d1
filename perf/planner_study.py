#!/usr/bin/env python3
"""Planner study (simulated, not measured): vgg16, resnet20 and inception at a
fixed global batch of 32 on 1..256 simulated ranks with a GPU-cluster network
model (100 Gb/s = 12.5 GB/s, 5 us, for point to point and allreduce), data
parallel against burst plans at amplification limits 1.5, 2, 2.5 and none.
Plans come from `burstpool plan`; every plan is then run through
`burstpool simulate`.

Per point: simulated iteration time, device-time used (busy rank-seconds per
step), and the share of the ranks' time freed for background work (idle rank
time / (N x iteration time); data parallel uses min(N, 32) ranks, the others
idle). Layer times come from the shipped
CPU profiles (jobs/profiles/<model>.cpu.json, this project's 2-core CPU), so
absolute times are CPU times; the shape of the trade-off is what this shows.
Also times the planner on vgg16 at 1024 ranks.

Usage: perf/planner_study.py [--build build] [--out perf/results/planner_study]
"""
import argparse
import json
import os
import subprocess
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODELS = ["vgg16", "resnet20", "inception"]
RANKS = [1, 2, 4, 8, 16, 32, 64, 128, 256]
LIMITS = ["1.5", "2", "2.5", "none"]
NET = ["--bandwidth", "12.5", "--latency", "5"]
BATCH = 32


def plan(build, tmp, model, ranks, limit):
    summary, out = os.path.join(tmp, "s.json"), os.path.join(tmp, "plan.json")
    subprocess.run([f"{build}/burstpool", "plan", f"{ROOT}/jobs/models/{model}.ini", "--profile",
                    f"{ROOT}/jobs/profiles/{model}.cpu.json", *NET, "--ranks", str(ranks), "--global-batch",
                    str(BATCH), "--amp-limit", limit, "--summary", summary, "--out", out], check=True,
                   capture_output=True)
    return json.load(open(summary)), out


def simulate(build, tmp, model, plan_path, ranks):
    """Simulated iteration, busy rank-seconds and freed share over `ranks` ranks."""
    sim = os.path.join(tmp, "sim.json")
    subprocess.run([f"{build}/burstpool", "simulate", plan_path, "--model", f"{ROOT}/jobs/models/{model}.ini",
                    "--profile", f"{ROOT}/jobs/profiles/{model}.cpu.json", *NET, "--out", sim], check=True,
                   capture_output=True)
    s = json.load(open(sim))
    t = s["iteration_s"]
    busy = sum(s["busy_s"])
    return t, busy, 1.0 - busy / (ranks * t)


def data_parallel(build, tmp, model, ranks):
    path = os.path.join(tmp, "dp.json")
    subprocess.run([f"{build}/burstpool", "plan", "--data-parallel", f"{ROOT}/jobs/models/{model}.ini", "--ranks",
                    str(min(ranks, BATCH)), "--global-batch", str(BATCH), "--out", path], check=True,
                   capture_output=True)
    return simulate(build, tmp, model, path, ranks)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--out", default=os.path.join(ROOT, "perf/results/planner_study"))
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for model in MODELS:
            for ranks in RANKS:
                dp_t, dp_busy, dp_freed = data_parallel(args.build, tmp, model, ranks)
                for limit in LIMITS:
                    s, path = plan(args.build, tmp, model, ranks, limit)
                    t, busy, free = simulate(args.build, tmp, model, path, ranks)
                    rows.append({"model": model, "ranks": ranks, "limit": limit, "iteration_ms": 1e3 * t,
                                 "device_ms": 1e3 * busy, "freed": free, "planner_iteration_ms": 1e3 * s["iteration_s"],
                                 "dp_iteration_ms": 1e3 * dp_t, "dp_device_ms": 1e3 * dp_busy, "dp_freed": dp_freed,
                                 "planning_s": s["planning_seconds"]})
        big, _ = plan(args.build, tmp, "vgg16", 1024, "2")
    lines = [f"Planner study at global batch {BATCH}: plans from `burstpool plan`, run through `burstpool simulate` with "
             "the CPU profiles in jobs/profiles (2-core CPU) and a 12.5 GB/s, 5 us network model. "
             "Simulated iteration ms / busy rank-ms / share of rank time freed.", ""]
    for model in MODELS:
        lines += [f"### {model}", "",
                  "| ranks | data parallel | A=1.5 | A=2 | A=2.5 | no limit |", "|---|---|---|---|---|---|"]
        for ranks in RANKS:
            pts = [r for r in rows if r["model"] == model and r["ranks"] == ranks]
            dp = pts[0]
            cells = [f"{dp['dp_iteration_ms']:.0f} / {dp['dp_device_ms']:.0f} / {100 * dp['dp_freed']:.0f}%"]
            for p in pts:
                cells.append(f"{p['iteration_ms']:.0f} / {p['device_ms']:.0f} / {100 * p['freed']:.0f}%")
            lines.append(f"| {ranks} | " + " | ".join(cells) + " |")
        lines.append("")
    lines.append(f"Planning vgg16 for 1024 ranks took {big['planning_seconds']:.3f} s "
                 f"(predicted iteration {1e3 * big['iteration_s']:.0f} ms).")
    text = "\n".join(lines) + "\n"
    print(text)
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    open(args.out + ".md", "w").write(text)
    json.dump({"rows": rows, "vgg16_1024": big}, open(args.out + ".json", "w"), indent=1)

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(2, len(MODELS), figsize=(5 * len(MODELS), 7), sharex=True)
    for col, model in enumerate(MODELS):
        pts = [r for r in rows if r["model"] == model]
        top, bottom = axes[0][col], axes[1][col]
        dp = [p for p in pts if p["limit"] == LIMITS[0]]
        top.plot(RANKS, [p["dp_iteration_ms"] for p in dp], "k--", label="data parallel")
        bottom.plot(RANKS, [100 * p["dp_freed"] for p in dp], "k--", label="data parallel")
        for limit in LIMITS:
            sel = [p for p in pts if p["limit"] == limit]
            top.plot(RANKS, [p["iteration_ms"] for p in sel], "o-", ms=3, label=f"burst A={limit}")
            bottom.plot(RANKS, [100 * p["freed"] for p in sel], "o-", ms=3, label=f"burst A={limit}")
        top.set_title(model)
        top.set_xscale("log", base=2)
        top.set_yscale("log")
        top.set_ylabel("simulated iteration (ms)")
        bottom.set_ylabel("rank time freed (%)")
        bottom.set_xlabel("ranks")
    axes[0][0].legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(args.out + ".png", dpi=90)


if __name__ == "__main__":
    main()

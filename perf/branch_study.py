#!/usr/bin/env python3
"""Branches at once against branches in turn (simulated, not measured).

For each model and rank count at a global batch of 32 and amplification
limit 2, `burstpool plan` makes two plans, `--branches in-turn` (every
branch on a prefix, one after another) and `--branches auto` (the cheaper
of that and the branches at once on disjoint ranks), and `burstpool
simulate` replays each. Reports the planner's predicted step, the simulated
step and the device-time (busy rank-ms per step) of both. Profiles:
inception and resnet20 from the shipped CPU profiles (jobs/profiles, this
project's 2-core CPU), vgg16 from the H200 profile in perf/results/gpu/run1
(a chain: nothing to put at once, a control). Network: 12.5 GB/s, 5 us.

Usage: perf/branch_study.py [--build build] [--out perf/results/branch_study]
"""
import argparse
import json
import os
import subprocess
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODELS = {"inception": "jobs/profiles/inception.cpu.json", "resnet20": "jobs/profiles/resnet20.cpu.json",
          "vgg16": "perf/results/gpu/run1/vgg16_profile_cuda.json"}
RANKS = [8, 16, 32, 64, 128, 256]
NET = ["--bandwidth", "12.5", "--latency", "5"]
BATCH = 32


def run(cmd):
    subprocess.run(cmd, check=True, capture_output=True)


def point(build, tmp, model, profile, ranks, branches):
    summary, out, sim = (os.path.join(tmp, f) for f in ("s.json", "plan.json", "sim.json"))
    args = [f"{ROOT}/jobs/models/{model}.ini", "--profile", f"{ROOT}/{profile}", *NET]
    run([f"{build}/burstpool", "plan", *args, "--ranks", str(ranks), "--global-batch", str(BATCH), "--amp-limit", "2",
         "--branches", branches, "--summary", summary, "--out", out])
    run([f"{build}/burstpool", "simulate", out, "--model", args[0], "--profile", args[2], *NET, "--out", sim])
    s, m = json.load(open(summary)), json.load(open(sim))
    apart = sum(1 for l in s["layers"] if l["first_rank"] > 0)
    return {"predicted_ms": 1e3 * s["iteration_s"], "simulated_ms": 1e3 * m["iteration_s"],
            "device_ms": 1e3 * sum(m["busy_s"]), "layers_off_prefix": apart,
            "planning_s": s["planning_seconds"]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=f"{ROOT}/build")
    ap.add_argument("--out", default=f"{ROOT}/perf/results/branch_study")
    a = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for model, profile in MODELS.items():
            for ranks in RANKS:
                turn = point(a.build, tmp, model, profile, ranks, "in-turn")
                once = point(a.build, tmp, model, profile, ranks, "auto")
                rows.append({"model": model, "ranks": ranks, "in_turn": turn, "auto": once})
                print(model, ranks, turn, once, flush=True)
    json.dump({"global_batch": BATCH, "amp_limit": 2, "network": "12.5 GB/s, 5 us", "rows": rows},
              open(a.out + ".json", "w"), indent=1)
    lines = ["# Branches at once against branches in turn (simulated)", "",
             f"Global batch {BATCH}, amplification limit 2, 12.5 GB/s / 5 us network; `python3 perf/branch_study.py`. "
             "Plans by `burstpool plan --branches in-turn | auto`, replayed by `burstpool simulate`. "
             "Step ms (planner's prediction / simulated) and device-time (busy rank-ms per step, simulated); "
             "`off prefix`: layers the auto plan puts on ranges that do not start at rank 0. "
             "inception and resnet20: CPU profiles; vgg16: H200 profile (a chain, a control).", "",
             "| model | ranks | in turn: step pred / sim | in turn: device | auto: step pred / sim | auto: device "
             "| off prefix | simulated speed-up |", "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        t, o = r["in_turn"], r["auto"]
        lines.append(f"| {r['model']} | {r['ranks']} | {t['predicted_ms']:.2f} / {t['simulated_ms']:.2f} | "
                     f"{t['device_ms']:.1f} | {o['predicted_ms']:.2f} / {o['simulated_ms']:.2f} | {o['device_ms']:.1f} | "
                     f"{o['layers_off_prefix']} | {t['simulated_ms'] / o['simulated_ms']:.2f}x |")
    open(a.out + ".md", "w").write("\n".join(lines) + "\n")
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, axes = plt.subplots(1, len(MODELS), figsize=(4 * len(MODELS), 3.4))
        for ax, model in zip(axes, MODELS):
            pts = [r for r in rows if r["model"] == model]
            for key, label in (("in_turn", "in turn"), ("auto", "auto (at once where faster)")):
                ax.plot([p["ranks"] for p in pts], [p[key]["simulated_ms"] for p in pts], marker="o", label=label)
            ax.set_xscale("log", base=2)
            ax.set_title(model)
            ax.set_xlabel("ranks")
            ax.set_ylabel("simulated step (ms)")
        axes[0].legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(a.out + ".png", dpi=110)
    except ImportError:
        print("matplotlib missing: no PNG")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Summarises a strong-scaling sweep folder: summary.md (table), summary.json
and scaling.png (samples/s and parallel efficiency against rank count).

The folder holds one metrics file per run: ranks-N.json, or ranks-N-rK.json
when each point was run several times (BURSTPOOL_REPEATS). A point's figure
is the median of its runs; the table and the plot also give the spread
(lowest and highest). Efficiency above 105% is flagged: more than linear
speedup usually means the per-rank batch, once small enough, keeps its
activations in cache, so the one-rank baseline is the slow one.

Usage: summarize_sweep.py SWEEP_FOLDER
"""
import glob
import json
import os
import re
import statistics
import sys

SUPERLINEAR = 1.05  # efficiency above which a point is flagged


def load_runs(folder):
    """{ranks: [metrics, ...]} from ranks-N.json and ranks-N-rK.json."""
    runs = {}
    for path in sorted(glob.glob(os.path.join(folder, "ranks-*.json"))):
        if not re.fullmatch(r"ranks-\d+(-r\d+)?\.json", os.path.basename(path)):
            continue
        m = json.load(open(path))
        runs.setdefault(m["ranks"], []).append(m)
    return runs


def summarise(runs):
    """One point per rank count: median and spread of samples/s, speedup and
    efficiency against the smallest rank count's median."""
    points = []
    for ranks in sorted(runs):
        rates = [m["samples_per_second"] for m in runs[ranks]]
        accs = [m["test_accuracy"] for m in runs[ranks] if m.get("test_accuracy") is not None]
        points.append({"ranks": ranks, "runs": len(rates), "samples_per_second": statistics.median(rates),
                       "samples_per_second_min": min(rates), "samples_per_second_max": max(rates),
                       "batch_size": runs[ranks][0]["batch_size"],
                       "test_accuracy": statistics.median(accs) if accs else None,
                       "wall_seconds": statistics.median(m["wall_seconds"] for m in runs[ranks])})
    base = points[0]
    for p in points:
        scale = base["ranks"] / p["ranks"] / base["samples_per_second"]
        p["speedup"] = p["samples_per_second"] / base["samples_per_second"]
        p["efficiency"] = p["samples_per_second"] * scale
        p["efficiency_min"] = p["samples_per_second_min"] * scale
        p["efficiency_max"] = p["samples_per_second_max"] * scale
        p["superlinear"] = p["efficiency"] > SUPERLINEAR
    return points


def axis_limits(points):
    """(samples/s top, efficiency top in %): every point and every run fits,
    with room above, and efficiency always shows the 100% line."""
    rate_top = max(max(p["samples_per_second_max"], base_linear(points, p["ranks"])) for p in points)
    eff_top = max(110.0, max(100 * p["efficiency_max"] for p in points) * 1.1)
    return rate_top * 1.1, eff_top


def base_linear(points, ranks):
    base = points[0]
    return base["samples_per_second"] * ranks / base["ranks"]


def table(points, folder):
    base = points[0]
    repeats = max(p["runs"] for p in points)
    lines = [f"Strong scaling at global batch {base['batch_size']} ({folder}), "
             f"median of {repeats} run(s) per point, spread = lowest..highest.", "",
             "| ranks | runs | samples/s | spread | speedup | efficiency | test accuracy |",
             "|---|---|---|---|---|---|---|"]
    for p in points:
        acc = "n/a" if p["test_accuracy"] is None else f"{p['test_accuracy']:.4f}"
        flag = " (superlinear)" if p["superlinear"] else ""
        lines.append(f"| {p['ranks']} | {p['runs']} | {p['samples_per_second']:.0f} | "
                     f"{p['samples_per_second_min']:.0f}..{p['samples_per_second_max']:.0f} | "
                     f"{p['speedup']:.2f} | {100 * p['efficiency']:.0f}%{flag} | {acc} |")
    for p in points:
        if p["superlinear"]:
            lines += ["", f"Superlinear at {p['ranks']} ranks ({100 * p['efficiency']:.0f}%): each rank's batch is "
                      f"{p['batch_size'] // p['ranks']} samples against {base['batch_size'] // base['ranks']} at "
                      f"{base['ranks']} rank(s). The likely cause is that the smaller per-rank batch keeps its "
                      "activations in cache, which makes the baseline slow rather than this point fast"
                      + ("; with one run per point it can also be noise (set BURSTPOOL_REPEATS)."
                         if p["runs"] == 1 or base["runs"] == 1 else ".")]
    return "\n".join(lines) + "\n"


def plot(points, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    ranks = [p["ranks"] for p in points]
    rate_top, eff_top = axis_limits(points)
    fig, left = plt.subplots(figsize=(6, 4))
    rates = [p["samples_per_second"] for p in points]
    spread = [[r - p["samples_per_second_min"] for r, p in zip(rates, points)],
              [p["samples_per_second_max"] - r for r, p in zip(rates, points)]]
    left.errorbar(ranks, rates, yerr=spread, fmt="o-", capsize=3, label="samples/s (median, spread)")
    left.plot(ranks, [base_linear(points, r) for r in ranks], "--", color="grey", label="linear")
    left.set_xlabel("ranks")
    left.set_ylabel("training samples/s")
    left.set_xticks(ranks)
    left.set_ylim(0, rate_top)
    right = left.twinx()
    right.plot(ranks, [100 * p["efficiency"] for p in points], "s:", color="tab:red", label="efficiency")
    for p in points:
        if p["superlinear"]:
            right.annotate("superlinear", (p["ranks"], 100 * p["efficiency"]), textcoords="offset points",
                           xytext=(0, 6), ha="center", fontsize="small", color="tab:red")
    right.axhline(100, color="tab:red", linewidth=0.5)
    right.set_ylabel("parallel efficiency (%)")
    right.set_ylim(0, eff_top)
    handles = left.get_lines()[-1:] + left.containers[:1] + right.get_lines()[:1]
    fig.legend(handles, ["linear", "samples/s (median, spread)", "efficiency"], loc="lower center", ncol=3,
               fontsize="small")
    left.set_title(f"Strong scaling, global batch {points[0]['batch_size']}")
    fig.tight_layout(rect=(0, 0.08, 1, 1))
    fig.savefig(path, dpi=100)


def main():
    folder = sys.argv[1]
    runs = load_runs(folder)
    if not runs:
        sys.exit(f"summarize_sweep: no ranks-*.json in {folder}")
    points = summarise(runs)
    text = table(points, folder)
    open(os.path.join(folder, "summary.md"), "w").write(text)
    rate_top, eff_top = axis_limits(points)
    json.dump({"points": points, "axes": {"samples_per_second_top": rate_top, "efficiency_top_percent": eff_top}},
              open(os.path.join(folder, "summary.json"), "w"), indent=2)
    print(text)
    plot(points, os.path.join(folder, "scaling.png"))


if __name__ == "__main__":
    main()

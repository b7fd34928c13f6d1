#!/usr/bin/env python3
"""Summarises a strong-scaling sweep folder: summary.md (table), summary.json
and scaling.png (samples/s and parallel efficiency against rank count).

The folder holds one metrics file per run: ranks-N.json, or ranks-N-rK.json
when each point was run several times (BURSTPOOL_REPEATS), and
burst-ranks-N[-rK].json for runs with a burst plan made at start-up
(BURSTPOOL_MODES="dp burst"); each mode is summarised on its own, and the
burst mode is compared with data parallelism at the same rank count. A point's figure
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
    """{mode: {ranks: [metrics, ...]}} from [burst-]ranks-N[-rK].json."""
    runs = {}
    for path in sorted(glob.glob(os.path.join(folder, "*ranks-*.json"))):
        match = re.fullmatch(r"(burst-)?ranks-\d+(-r\d+)?\.json", os.path.basename(path))
        if not match:
            continue
        m = json.load(open(path))
        runs.setdefault("burst" if match.group(1) else "dp", {}).setdefault(m["ranks"], []).append(m)
    return runs


def summarise(runs, mode="dp"):
    """One point per rank count: median and spread of samples/s, speedup and
    efficiency against the smallest rank count's median."""
    points = []
    for ranks in sorted(runs):
        rates = [m["samples_per_second"] for m in runs[ranks]]
        accs = [m["test_accuracy"] for m in runs[ranks] if m.get("test_accuracy") is not None]
        points.append({"mode": mode, "ranks": ranks, "runs": len(rates), "samples_per_second": statistics.median(rates),
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


def compare_modes(points):
    """Each point's samples/s against data parallelism's at its rank count (None without one)."""
    dp = {p["ranks"]: p["samples_per_second"] for p in points if p["mode"] == "dp"}
    for p in points:
        p["vs_dp"] = p["samples_per_second"] / dp[p["ranks"]] if p["ranks"] in dp else None


def table(points, folder):
    base = points[0]
    repeats = max(p["runs"] for p in points)
    lines = [f"Strong scaling at global batch {base['batch_size']} ({folder}), "
             f"median of {repeats} run(s) per point, spread = lowest..highest; burst: --plan auto.", "",
             "| mode | ranks | runs | samples/s | spread | speedup | efficiency | vs dp | test accuracy |",
             "|---|---|---|---|---|---|---|---|---|"]
    for p in points:
        acc = "n/a" if p["test_accuracy"] is None else f"{p['test_accuracy']:.4f}"
        flag = " (superlinear)" if p["superlinear"] else ""
        vs = "n/a" if p["vs_dp"] is None else f"{p['vs_dp']:.2f}"
        lines.append(f"| {p['mode']} | {p['ranks']} | {p['runs']} | {p['samples_per_second']:.0f} | "
                     f"{p['samples_per_second_min']:.0f}..{p['samples_per_second_max']:.0f} | "
                     f"{p['speedup']:.2f} | {100 * p['efficiency']:.0f}%{flag} | {vs} | {acc} |")
    for p in points:
        base = next(q for q in points if q["mode"] == p["mode"])
        if p["superlinear"]:
            lines += ["", f"Superlinear at {p['ranks']} ranks, {p['mode']} ({100 * p['efficiency']:.0f}%): each rank's batch is "
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
    rate_top, eff_top = axis_limits(points)
    fig, left = plt.subplots(figsize=(6, 4))
    right = left.twinx()
    all_ranks = sorted({p["ranks"] for p in points})
    left.plot(all_ranks, [base_linear(points, r) for r in all_ranks], "--", color="grey", label="linear")
    for k, mode in enumerate(dict.fromkeys(p["mode"] for p in points)):
        mine = [p for p in points if p["mode"] == mode]
        ranks, rates = [p["ranks"] for p in mine], [p["samples_per_second"] for p in mine]
        spread = [[r - p["samples_per_second_min"] for r, p in zip(rates, mine)],
                  [p["samples_per_second_max"] - r for r, p in zip(rates, mine)]]
        colour = f"C{2 * k}"
        left.errorbar(ranks, rates, yerr=spread, fmt="o-", capsize=3, color=colour,
                      label=f"{mode} samples/s (median, spread)")
        right.plot(ranks, [100 * p["efficiency"] for p in mine], "s:", color=f"C{2 * k + 1}", label=f"{mode} efficiency")
        for p in mine:
            if p["superlinear"]:
                right.annotate("superlinear", (p["ranks"], 100 * p["efficiency"]), textcoords="offset points",
                               xytext=(0, 6), ha="center", fontsize="small", color=f"C{2 * k + 1}")
    left.set_xlabel("ranks")
    left.set_ylabel("training samples/s")
    left.set_xticks(all_ranks)
    left.set_ylim(0, rate_top)
    right.axhline(100, color="grey", linewidth=0.5)
    right.set_ylabel("parallel efficiency (%)")
    right.set_ylim(0, eff_top)
    handles, labels = [], []
    for ax in (left, right):
        h, l = ax.get_legend_handles_labels()
        handles += h
        labels += l
    fig.legend(handles, labels, loc="lower center", ncol=2, fontsize="small")
    left.set_title(f"Strong scaling, global batch {points[0]['batch_size']}")
    fig.tight_layout(rect=(0, 0.06 + 0.04 * ((len(labels) + 1) // 2), 1, 1))
    fig.savefig(path, dpi=100)


def main():
    folder = sys.argv[1]
    runs = load_runs(folder)
    if not runs:
        sys.exit(f"summarize_sweep: no ranks-*.json in {folder}")
    points = [p for mode in sorted(runs, key=lambda m: m != "dp") for p in summarise(runs[mode], mode)]
    compare_modes(points)
    text = table(points, folder)
    open(os.path.join(folder, "summary.md"), "w").write(text)
    rate_top, eff_top = axis_limits(points)
    json.dump({"points": points, "axes": {"samples_per_second_top": rate_top, "efficiency_top_percent": eff_top}},
              open(os.path.join(folder, "summary.json"), "w"), indent=2)
    print(text)
    plot(points, os.path.join(folder, "scaling.png"))


if __name__ == "__main__":
    main()

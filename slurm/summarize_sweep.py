#!/usr/bin/env python3
"""Summarises a strong-scaling sweep folder of ranks-N.json metrics files:
summary.md (table), summary.json and scaling.png (samples/s and parallel
efficiency against rank count).

Usage: summarize_sweep.py SWEEP_FOLDER
"""
import glob
import json
import os
import re
import sys


def main():
    folder = sys.argv[1]
    points = []
    for path in glob.glob(os.path.join(folder, "ranks-*.json")):
        m = json.load(open(path))
        points.append({"ranks": m["ranks"], "samples_per_second": m["samples_per_second"],
                       "batch_size": m["batch_size"], "test_accuracy": m["test_accuracy"],
                       "wall_seconds": m["wall_seconds"], "file": os.path.basename(path)})
    if not points:
        sys.exit(f"summarize_sweep: no ranks-*.json in {folder}")
    points.sort(key=lambda p: p["ranks"])
    base = points[0]
    for p in points:
        p["speedup"] = p["samples_per_second"] / base["samples_per_second"]
        p["efficiency"] = p["speedup"] * base["ranks"] / p["ranks"]
    lines = [f"Strong scaling at global batch {base['batch_size']} ({folder}).", "",
             "| ranks | samples/s | speedup | efficiency | test accuracy |", "|---|---|---|---|---|"]
    for p in points:
        acc = "n/a" if p["test_accuracy"] is None else f"{p['test_accuracy']:.4f}"
        lines.append(f"| {p['ranks']} | {p['samples_per_second']:.0f} | {p['speedup']:.2f} | "
                     f"{100 * p['efficiency']:.0f}% | {acc} |")
    text = "\n".join(lines) + "\n"
    open(os.path.join(folder, "summary.md"), "w").write(text)
    json.dump(points, open(os.path.join(folder, "summary.json"), "w"), indent=2)
    print(text)

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    ranks = [p["ranks"] for p in points]
    fig, left = plt.subplots(figsize=(6, 4))
    left.plot(ranks, [p["samples_per_second"] for p in points], "o-", label="samples/s")
    left.plot(ranks, [base["samples_per_second"] * r / base["ranks"] for r in ranks], "--", color="grey",
              label="linear")
    left.set_xlabel("ranks")
    left.set_ylabel("training samples/s")
    left.set_xticks(ranks)
    right = left.twinx()
    right.plot(ranks, [100 * p["efficiency"] for p in points], "s:", color="tab:red", label="efficiency")
    right.set_ylabel("parallel efficiency (%)")
    right.set_ylim(0, 110)
    handles = left.get_lines() + right.get_lines()
    fig.legend(handles, [h.get_label() for h in handles], loc="lower center", ncol=3, fontsize="small")
    left.set_title(f"Strong scaling, global batch {base['batch_size']}")
    fig.tight_layout(rect=(0, 0.08, 1, 1))
    fig.savefig(os.path.join(folder, "scaling.png"), dpi=100)


if __name__ == "__main__":
    main()

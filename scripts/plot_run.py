#!/usr/bin/env python3
"""Plots training runs from their [output] log files (JSON Lines): training
loss and test accuracy against wall seconds and against epochs, one line per
log, in one PNG. A resumed run's log holds every part; each part is drawn.

Usage: plot_run.py LOG.jsonl [LOG.jsonl ...] --out runs.png [--title TEXT] [--label TEXT ...]
(--label names each log's line, in order; default: the job's name.)
Needs matplotlib (Debian: python3-matplotlib).
"""
import argparse
import json
import os
import sys


def read_log(path):
    """(label, progress records, evaluation records) of one log; bad lines are named and skipped."""
    progress, evals, label = [], [], None
    with open(path) as f:
        for number, line in enumerate(f, 1):
            try:
                r = json.loads(line)
            except json.JSONDecodeError:
                print(f"{path}:{number}: not a JSON record, skipped", file=sys.stderr)
                continue
            if r.get("event") == "start":
                label = label or r.get("job")
            elif r.get("event") == "progress":
                progress.append(r)
            elif r.get("event") == "evaluation":
                evals.append(r)
    return label or os.path.basename(path), progress, evals


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("logs", nargs="+")
    ap.add_argument("--out", required=True, help="PNG to write")
    ap.add_argument("--title", default="")
    ap.add_argument("--label", action="append", default=[], help="a line's name, once per log, in order")
    a = ap.parse_args()
    if a.label and len(a.label) != len(a.logs):
        sys.exit(f"plot_run.py: {len(a.label)} --label for {len(a.logs)} logs")
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        sys.exit("plot_run.py needs matplotlib (Debian: python3-matplotlib)")
    fig, axes = plt.subplots(2, 2, figsize=(11, 7), sharey="row")
    drawn = 0
    for number, path in enumerate(a.logs):
        label, progress, evals = read_log(path)
        label = a.label[number] if a.label else label
        if not progress and not evals:
            print(f"{path}: no progress or evaluation records", file=sys.stderr)
            continue
        drawn += 1
        for column, x in enumerate(("wall_seconds", "epoch")):
            line, = axes[0][column].plot([r[x] for r in progress], [r["loss"] for r in progress], label=label)
            axes[1][column].plot([r[x] for r in evals], [r["accuracy"] for r in evals], marker="o",
                                 color=line.get_color(), label=label)
    if drawn == 0:
        sys.exit("plot_run.py: nothing to draw")
    for column, name in enumerate(("wall seconds", "epochs")):
        axes[1][column].set_xlabel(name)
    axes[0][0].set_ylabel("training loss")
    axes[1][0].set_ylabel("test accuracy")
    for row in axes:
        for ax in row:
            ax.grid(alpha=0.3)
    axes[0][1].legend(fontsize=8)
    if a.title:
        fig.suptitle(a.title)
    fig.tight_layout()
    fig.savefig(a.out, dpi=110)
    print(f"wrote {a.out}: {drawn} run(s)")


if __name__ == "__main__":
    main()

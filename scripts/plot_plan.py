#!/usr/bin/env python3
"""Draws a plan as a layer x rank grid: one row per layer (in the plan's
order), a filled cell where the layer runs, one colour per distinct rank set;
with the planner's summary (burstpool plan ... --summary S.json), each row
also shows the layer's predicted milliseconds per step (compute + gradient
sync + incoming transfer) and the title the predicted step.

Usage: plot_plan.py PLAN.json [--summary S.json] --out PLAN.png
Needs matplotlib (Debian: python3-matplotlib).
"""
import argparse
import json
import sys


def rank_list(ranks):
    """A plan entry's ranks as a list: an array as it is, ranges such as "0-3,6" expanded (also for the tests)."""
    if isinstance(ranks, list):
        return ranks
    out = []
    for part in ranks.split(","):
        lo, _, hi = part.strip().partition("-")
        out += range(int(lo), int(hi or lo) + 1)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("plan")
    ap.add_argument("--summary", default="")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.patches import Rectangle
    except ImportError:
        sys.exit("plot_plan.py needs matplotlib (Debian: python3-matplotlib)")
    plan = json.load(open(a.plan))
    layers = [(entry["name"], rank_list(entry["ranks"])) for entry in plan["layers"]]
    ms = {}
    title = f"{a.plan}: {plan['ranks']} ranks, global batch {plan['global_batch']}"
    if a.summary:
        s = json.load(open(a.summary))
        ms = {l["name"]: 1e3 * (l["compute_s"] + l["sync_s"] + l["transfer_s"]) for l in s.get("layers", [])}
        title += f"\npredicted {1e3 * s['iteration_s']:.2f} ms per step (data parallel " \
                 f"{1e3 * s['data_parallel_iteration_s']:.2f} ms), amplification limit {s['amp_limit']}"
    sets = {}
    colours = plt.get_cmap("tab20")
    R, L = plan["ranks"], len(layers)
    fig, ax = plt.subplots(figsize=(min(3 + 0.35 * R, 18) + (1.5 if ms else 0), min(1.5 + 0.22 * L, 30)))
    for row, (name, ranks) in enumerate(layers):
        colour = colours(sets.setdefault(tuple(ranks), len(sets)) % 20)
        for r in ranks:
            ax.add_patch(Rectangle((r, row), 1, 1, facecolor=colour, edgecolor="white", linewidth=0.5))
        if name in ms:
            ax.text(R + 0.3, row + 0.5, f"{ms[name]:.3f} ms", va="center", fontsize=7)
    ax.set_xlim(0, R + (2.5 if ms else 0))
    ax.set_ylim(L, 0)
    ax.set_yticks([i + 0.5 for i in range(L)])
    ax.set_yticklabels([name for name, _ in layers], fontsize=7)
    step = max(1, R // 16)
    ax.set_xticks([r + 0.5 for r in range(0, R, step)])
    ax.set_xticklabels([str(r) for r in range(0, R, step)], fontsize=7)
    ax.set_xlabel("rank")
    ax.set_title(title, fontsize=9)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    fig.tight_layout()
    fig.savefig(a.out, dpi=110)
    print(f"wrote {a.out}: {L} layers, {R} ranks, {len(sets)} rank sets")


if __name__ == "__main__":
    main()

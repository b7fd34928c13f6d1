#!/usr/bin/env python3
"""The network's share of a strategy's time: the same settings run without
shaping and on a shaped network, from perf/time_to_accuracy.py's JSONs.

A trace's waiting share says how long a rank waited, not why. On more ranks
than cores (oversubscribed) a rank also waits while its core-mate computes,
so the trace's waiting overstates what the network costs. This report
compares each setting's samples/s over shared memory (r_u) with the same
setting's on the shaped links (r_s), every repeat's rate taken from its
epochs and seconds to the target: the network's share of the shaped run's
time is 1 - r_s / r_u (the time a sample takes shaped, less the time it takes
unshaped, over the former). A setting matches across studies by its label
and its settings less the seed; several studies per side (alternating rounds)
pool their repeats.

Usage: perf/network_share.py --unshaped A.json [...] --shaped B.json [...]
                             --out perf/results/NAME [--samples 60000]
"""
import argparse
import json
import os
import statistics

from time_to_accuracy import setting_text  # one home for how a setting is named

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
IGNORED = ("job.seed", "train.log_every")


def key(label, settings):
    return label + json.dumps({k: v for k, v in settings.items() if k not in IGNORED}, sort_keys=True)


def pooled(studies, samples):
    """{setting key: (label, settings, [each repeat's samples/s], [each record's waiting share])} over `studies`."""
    out = {}
    for path in studies:
        for label, runs in json.load(open(path))["runs"].items():
            for r in runs:
                entry = out.setdefault(key(label, r["settings"]), (label, r["settings"], [], []))
                pairs = zip(r.get("repeat_seconds") or [r["time_to_target_seconds"]],
                            r.get("repeat_epochs") or [r["epochs_to_target"]])
                entry[2].extend(e * samples / s for s, e in pairs if s is not None)
                if r.get("shares"):
                    entry[3].append(r["shares"]["waiting"])
    return out


def rows(unshaped, shaped):
    """One row per setting in both: rates' medians and spreads, the network's share, the traces' waiting."""
    out = []
    for k, (label, settings, shaped_rates, shaped_wait) in shaped.items():
        if k not in unshaped or not shaped_rates or not unshaped[k][2]:
            continue
        rates, wait = unshaped[k][2], unshaped[k][3]
        u, s = statistics.median(rates), statistics.median(shaped_rates)
        out.append({"label": label, "settings": settings, "unshaped_rates": rates, "shaped_rates": shaped_rates,
                    "unshaped_median": u, "shaped_median": s, "network_share": 1 - s / u,
                    "unshaped_waiting": statistics.median(wait) if wait else None,
                    "shaped_waiting": statistics.median(shaped_wait) if shaped_wait else None})
    return out


def table(found, command):
    pct = lambda x: "" if x is None else f"{x:.0%}"
    spread = lambda xs: f"{min(xs):.0f}-{max(xs):.0f}"
    lines = ["# The network's share of each setting's time", "", f"Command: `{command}`. Samples/s of every repeat "
             "(its epochs x samples over its seconds to the target), median and spread, over shared memory and on "
             "the shaped links; the network's share of the shaped run's time is 1 - shaped / unshaped; waiting: the "
             "traces' share (medians of the studies' records), which on oversubscribed ranks also counts a "
             "core-mate's computing.", "",
             "| strategy | setting | unshaped samples/s | shaped samples/s | network's share | waiting unshaped | "
             "waiting shaped |", "|---|---|---|---|---|---|---|"]
    for r in found:
        lines.append(f"| {r['label']} | {setting_text(r['settings'])} | {r['unshaped_median']:.0f} "
                     f"({spread(r['unshaped_rates'])}, {len(r['unshaped_rates'])} runs) | {r['shaped_median']:.0f} "
                     f"({spread(r['shaped_rates'])}, {len(r['shaped_rates'])} runs) | {r['network_share']:.0%} | "
                     f"{pct(r['unshaped_waiting'])} | {pct(r['shaped_waiting'])} |")
    return lines


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--unshaped", nargs="+", required=True, metavar="STUDY.json")
    ap.add_argument("--shaped", nargs="+", required=True, metavar="STUDY.json")
    ap.add_argument("--out", required=True)
    ap.add_argument("--samples", type=int, default=60000, help="training samples an epoch (Fashion-MNIST: 60000)")
    args = ap.parse_args()
    found = rows(pooled(args.unshaped, args.samples), pooled(args.shaped, args.samples))
    if not found:
        ap.error("no setting reached the target in both the unshaped and the shaped studies")
    rel = lambda paths: " ".join(os.path.relpath(p, ROOT) for p in paths)
    command = (f"python3 perf/network_share.py --unshaped {rel(args.unshaped)} --shaped {rel(args.shaped)} "
               f"--out {os.path.relpath(args.out, ROOT)}")
    text = "\n".join(table(found, command)) + "\n"
    open(args.out + ".md", "w").write(text)
    json.dump({"command": command, "rows": found}, open(args.out + ".json", "w"), indent=1)
    print(text)


if __name__ == "__main__":
    main()

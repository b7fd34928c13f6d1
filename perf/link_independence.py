#!/usr/bin/env python3
"""Does a strategy's learning depend on the link? time_to_accuracy.py studies
of the same settings and seeds run on different links (shared memory, shaped
to G Gbit/s) are compared run by run: the epochs at which each reached the
target and the best test accuracy it saw. Where a strategy's runs agree to the
digit on every link, its learning is the same computation everywhere (ssgd
and local-sgd: fixed reduction orders, no decision taken from a clock), so a
learning-rate and schedule grid tuned on one link ranks its settings the same
on every other: the link changes only the samples/s, and the samples/s of
one strategy and batch do not depend on its learning rate or schedule.
Strategies that decide from clocks (shadow's averaging rounds, sma's learner
tuning) are listed too; they are expected to differ.

Usage: perf/link_independence.py STUDY.json... [--out OUT]
(each STUDY.json beside its STUDY.md, whose Command line names the link and
the ranks); writes OUT.md.
"""
import argparse
import collections
import json
import os
import re

from network_share import key  # one home for matching a setting across studies
from time_to_accuracy import setting_text  # one home for how a setting is named


def link_of(study):
    """'shared memory' or 'G Gbit/s', and the ranks, from the study's Command line."""
    command = next(line for line in open(study.removesuffix(".json") + ".md") if line.startswith("Command:"))
    gbit = re.search(r"--gbit ([0-9.]+)", command)
    ranks = re.search(r"--ranks (\d+)", command)
    link = f"{float(gbit.group(1)) * 1000:g} Mbit/s" if gbit and float(gbit.group(1)) < 1 else \
        f"{gbit.group(1)} Gbit/s" if gbit else "shared memory"
    if "--steady-link" in command:
        link += " steady"
    return link, int(ranks.group(1)) if ranks else 2


def runs_of(study):
    """(label, settings, seed, (epochs to target, best accuracy)) for every repeat of every setting. A study with
    repeats keeps each seed's epochs (repeat_epochs, seeds 1..N) but the best accuracy of its median run only:
    the others' accuracy is None (unknown)."""
    for label, summaries in json.load(open(study))["runs"].items():
        for summary in summaries:
            median_seed = summary["settings"].get("job.seed", 1)
            by_seed = enumerate(summary["repeat_epochs"], 1) if "repeat_epochs" in summary else \
                [(median_seed, summary["epochs_to_target"])]
            for seed, e in by_seed:
                yield label, summary["settings"], seed, (e, summary["best_accuracy"] if seed == median_seed else None)


def same(results):
    """Every link's epochs equal, and every known accuracy equal."""
    accuracies = {a for _, a in results if a is not None}
    return len({e for e, _ in results}) == 1 and len(accuracies) <= 1


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("studies", nargs="+")
    ap.add_argument("--out", default="perf/results/link_independence")
    args = ap.parse_args()
    seen = collections.defaultdict(dict)  # (ranks, setting key, seed) -> {study: (epochs, accuracy)}
    named = {}  # (ranks, setting key, seed) -> the row's ranks, label, setting and seed as the table names them
    names = {}  # study -> its file name and link
    for study in args.studies:
        link, ranks = link_of(study)
        names[study] = f"{os.path.basename(study).removesuffix('.json').removeprefix('time_to_accuracy_')} ({link})"
        for label, settings, seed, result in runs_of(study):
            row = (ranks, key(label, settings), seed)
            seen[row][study] = result
            named[row] = (ranks, label, setting_text(settings), seed)
    lines = ["# The same settings and seeds on different links: epochs to the target and best test accuracy", "",
             "Command: `python3 perf/link_independence.py " + " ".join(args.studies) + f" --out {args.out}`", "",
             "Best accuracy: ? where a study with repeats kept it for its median run only.", "",
             "| ranks | strategy | settings | seed | studies (links) | epochs to target | best accuracy | same on every link |",
             "|---|---|---|---|---|---|---|---|"]
    agree = collections.Counter()
    total = collections.Counter()
    for row, by_link in sorted(seen.items(), key=lambda kv: named[kv[0]]):
        if len(by_link) < 2:
            continue
        ranks, label, setting, seed = named[row]
        agreed = same(list(by_link.values()))
        family = f"{label.split(',')[0]} on {ranks} ranks"
        total[family] += 1
        agree[family] += agreed
        lines.append(f"| {ranks} | {label} | {setting} | {seed} | {'; '.join(names[study] for study in by_link)} | "
                     f"{'; '.join(str(e) for e, _ in by_link.values())} | "
                     f"{'; '.join('?' if a is None else str(a) for _, a in by_link.values())} | {'yes' if agreed else 'no'} |")
    lines += ["", "Runs the same on every link they ran on, per strategy and ranks: " +
              ", ".join(f"{family} {agree[family]} of {total[family]}" for family in sorted(total)) + "."]
    open(args.out + ".md", "w").write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()

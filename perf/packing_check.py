#!/usr/bin/env python3
"""The simulator's CPU packing model checked against a shaped study's runs,
leaving each foreground model out.

The packing model (include/burstpool/packing.hpp) maps the idle and slack
shares the simulator finds in a plan to the background's share of its alone
rate beside that plan. The shipped model (jobs/profiles/packing.cpu.json) was
fitted over shared memory; here every round of a perf/shaped_study.py run
(its JSON, and its working folder, which keeps each round's profiles and
plan) gives two pairs, beside data parallel and beside the burst plan: the
shares simulated from that round's profiles, and the background's share
measured in that round (samples/s beside / its own calibration alone).

For each foreground model, the model is fitted (burstpool fit-packing) to the
pairs of the other models only, and the held-out model's background samples/s
predicted with that fit (burstpool simulate --packing), so each prediction
is out of sample. Reported per point: measured, the shipped model's
prediction, the held-out fit's, their errors (median over rounds), and the fit
to every model (which --fit-out writes as a packing model).

Several studies (each with its own working folder, in the same order) are read
as one: so a fit can take models measured in separate studies.

Usage: perf/packing_check.py STUDY.json [STUDY.json ...] --workdir DIR [DIR ...]
                             [--build build] [--out perf/results/packing_check] [--fit-out PACKING.json]
                             [--packing PACKING.json]
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import tempfile

import shaped_study  # one home for a round's point and its simulation

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODES = {"dp": "dp_bg", "burst_bg": "burst_bg"}  # simulated plan -> the measured mode beside it
BESIDE = {"dp": "dp", "burst_bg": "plan"}  # for the report


def merged_study(paths, workdirs):
    """The studies at `paths` as one: their points in order, each with the working folder its rounds kept their
    files in (`workdir`); the commits joined."""
    if len(paths) != len(workdirs):
        raise SystemExit(f"packing_check: {len(paths)} studies but {len(workdirs)} working folders")
    studies = [json.load(open(p)) for p in paths]
    results = [dict(res, workdir=w) for study, w in zip(studies, workdirs) for res in study["results"]]
    return {"commit": ", ".join(dict.fromkeys(s["commit"] for s in studies)), "results": results}


def study_points(study):
    """Every point of the study with the files its rounds kept in the point's working folder."""
    for res in study["results"]:
        p = res["point"]
        yield res, dict(p, **shaped_study.point_files(res["workdir"], p["model"], p["batch"], p["ranks"], p["gbit"]))


def simulate_rounds(build, tmp, study, packing, model=None):
    """{(point index, round, plan): simulated background entry} with `packing`, for every point or `model`'s."""
    out = {}
    for i, (res, point) in enumerate(study_points(study)):
        if model and res["point"]["model"] != model:
            continue
        for r in range(len(res["rounds"])):
            sims = shaped_study.simulate_round(build, tmp, shaped_study.round_point(point, r), packing)["simulated"]
            for plan in MODES:
                out[(i, r, plan)] = sims[plan]
    return out


def samples(study, sims, keep):
    """Packing samples (burstpool fit-packing's input) of the points whose model `keep` accepts."""
    out = []
    for i, res in enumerate(study["results"]):
        p = res["point"]
        if not keep(p["model"]):
            continue
        for r, row in enumerate(res["rounds"]):
            for plan, mode in MODES.items():
                s, m = sims[(i, r, plan)], row[mode]
                out.append({"label": f"{p['model']} {p['batch']} at {p['gbit']}, round {r + 1}, beside {BESIDE[plan]}",
                            "idle_share": s["idle_share"], "slack_share": s["slack_share"],
                            "step_s": s["step_s"],
                            "idle_gaps_s": [[round(g, 7) for g in rank] for rank in s["idle_gaps_s"]],
                            "background_share": m["bg"] / m["bg_alone"], "foreground_slowdown": m["slowdown"]})
    return out


def fit(build, tmp, pairs, name):
    src, out = os.path.join(tmp, f"{name}.samples.json"), os.path.join(tmp, f"{name}.packing.json")
    json.dump({"samples": pairs}, open(src, "w"))
    subprocess.run([f"{build}/burstpool", "fit-packing", src, "--device", "cpu", "--out", out], check=True,
                   capture_output=True)
    return out


def errors(study, sims, i, plan):
    """The median over rounds of each round's predicted background samples/s against that round's run (None
    where the background never ran beside the foreground)."""
    rows = study["results"][i]["rounds"]
    each = [sims[(i, r, plan)]["bg_shared"] / row[MODES[plan]]["bg"] - 1 for r, row in enumerate(rows)
            if row[MODES[plan]]["bg"] > 0]
    return statistics.median(each) if each else None


def report(study, shipped, held_out, overall, args):
    coeff = json.load(open(overall))
    names = " ".join(os.path.relpath(p, ROOT) for p in args.study)
    lines = ["# The CPU packing model against shaped studies' runs", "",
             f"Studies: `{names}` (commit {study['commit']}). Command: "
             f"`python3 perf/packing_check.py {names} --workdir DIR...` (DIR: each study's "
             "working folder, which it names when it starts). Background samples/s beside data parallel and beside "
             "the burst plan: measured (median of the rounds), predicted by `burstpool simulate --packing` with the "
             f"shipped model `{os.path.relpath(args.packing, ROOT)}` and with a model fitted to "
             "the other foreground models' runs only (out of sample); errors are medians over rounds of each "
             "round's prediction against that round's run.", "",
             f"Fitted to every model's runs: base share {coeff['base_share']:.3f}, idle efficiency "
             f"{coeff['idle_efficiency']:.3f}, each idle stretch less {1e3 * coeff.get('gap_cost_s', 0):.2f} ms "
             f"(shipped model: see `{os.path.relpath(args.packing, ROOT)}`).", "",
             "| model | batch | ranks | Gbit/s | beside | measured | shipped model | error | held-out fit | error |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    counts = {"shipped": 0, "held": 0, "n": 0}
    for i, res in enumerate(study["results"]):
        p = res["point"]
        for plan, mode in MODES.items():
            e_ship, e_held = errors(study, shipped, i, plan), errors(study, held_out, i, plan)
            pred = lambda sims: statistics.median(sims[(i, r, plan)]["bg_shared"] for r in range(len(res["rounds"])))
            text = lambda e: "n/a" if e is None else f"{100 * e:+.0f}%"
            lines.append(f"| {p['model']} | {p['batch']} | {p['ranks']} | {p['gbit']} | {BESIDE[plan]} | "
                         f"{res['medians'][mode]['bg']:.0f} | {pred(shipped):.0f} | {text(e_ship)} | "
                         f"{pred(held_out):.0f} | {text(e_held)} |")
            if p["gbit"] != "none":
                counts["n"] += 1
                counts["shipped"] += e_ship is not None and abs(e_ship) <= 0.15
                counts["held"] += e_held is not None and abs(e_held) <= 0.15
    lines += ["", f"Within 15% at shaped points (both plans): shipped model {counts['shipped']} of {counts['n']}, "
                  f"held-out fit {counts['held']} of {counts['n']}."]
    return lines


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("study", nargs="+", help="perf/shaped_study.py JSONs, read as one")
    ap.add_argument("--workdir", required=True, nargs="+",
                    help="each study's working folder, in the same order (a study names it when it starts)")
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--out", default=os.path.join(ROOT, "perf", "results", "packing_check"))
    ap.add_argument("--fit-out", help="write the model fitted to every model's runs here")
    ap.add_argument("--packing", default=shaped_study.PACKING,
                    help="the model to check beside the held-out fits (default: the shared-memory fit)")
    args = ap.parse_args()
    study = merged_study(args.study, args.workdir)
    tmp = tempfile.mkdtemp()
    shipped = simulate_rounds(args.build, tmp, study, args.packing)
    models = sorted({res["point"]["model"] for res in study["results"]})
    held_out = {}
    for model in models:
        packing = fit(args.build, tmp, samples(study, shipped, lambda m: m != model), f"without-{model}")
        held_out.update(simulate_rounds(args.build, tmp, study, packing, model))
    overall = fit(args.build, tmp, samples(study, shipped, lambda m: True), "every-model")
    if args.fit_out:
        shutil.copy(overall, args.fit_out)
    lines = report(study, shipped, held_out, overall, args)
    open(args.out + ".md", "w").write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Multiplexing on 2 ranks of this machine (one core per rank), measured and
simulated: a foreground small-VGG (global batch 32) beside a background
small-VGG trained data parallel (batch 64, per-rank batch-norm statistics),
for three foreground plans:

  split:     jobs/multiplex/vgg_small_split_2ranks.json - block 1 on rank 0,
             block 2 on rank 1, block 3 and the classifier on both, so each
             rank waits for the other for part of every step;
  alternate: jobs/multiplex/vgg_small_alternate_2ranks.json - every layer on
             one rank, the ranks taking turns: each rank idle about half of
             every step;
  dp:        plain data parallel, where a rank is hardly ever idle.

Each round runs, side by side, every plan's foreground alone (no
[background]) and with the background. Reported per plan, medians over rounds:
  - cluster throughput against data parallel alone (the honest figure):
    fg shared / fg data parallel alone + bg shared / bg alone, once with the
    data-parallel rate the run measured in its calibration (metrics) and once
    with the separate data-parallel alone run of the same round;
  - cluster throughput against the plan's own foreground alone, kept beside
    it: it separates what the background costs from what the plan costs;
  - foreground and background rates, slowdowns, the gate's waits.

Then the simulator. Each round also makes a 1-thread layer profile of
small-VGG by 2 processes at once (as the ranks share the machine), so the
predictions see the same machine noise as the runs; with a network profile,
`burstpool simulate` gives each plan's idle and slack shares (medians over the
rounds' profiles). The packing model is fitted to the three plans (burstpool
fit-packing; written to --packing), and each plan is predicted with it from
every round's profile (medians), both in sample and fitted to the other two
plans alone (leave one out), against the measured medians.

Usage: perf/multiplex.py [--build build] [--rounds 3] [--steps 300] [--out perf/results/multiplex]
                         [--packing jobs/profiles/packing.cpu.json]
"""
import argparse
import json
import os
import statistics
import subprocess
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
JOBS = os.path.join(ROOT, "jobs", "multiplex")
MODEL = os.path.join(ROOT, "jobs", "models", "vgg_small.ini")
ENV = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", OMPI_ALLOW_RUN_AS_ROOT="1",
           OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
ENV.pop("OMPI_MCA_mpi_yield_when_idle", None)  # it would hand the foreground's core away at every MPI poll
PLANS = ("split", "alternate", "dp")


def run(cmd):
    return subprocess.run(cmd, env=ENV, check=True, capture_output=True, text=True).stdout


def train(build, tmp, plan, steps, background):
    metrics = os.path.join(tmp, "m.json")
    cmd = ["mpirun", "-np", "2", f"{build}/burstpool", "train", os.path.join(JOBS, "foreground_vgg_small.ini"),
           "--plan", plan, "--steps", str(steps), "--metrics", metrics]
    if not background:
        cmd += ["--set", "background.job=none"]
    run(cmd)
    return json.load(open(metrics))


def measure_round(build, tmp, plans, steps):
    alone = {name: train(build, tmp, plan, steps, False) for name, plan in plans.items()}
    rows = {}
    for name, plan in plans.items():
        shared = train(build, tmp, plan, steps, True)
        b = shared["background"]
        fg, bg, bg_alone = shared["foreground_samples_per_second"], shared["background_samples_per_second"], \
            b["alone_samples_per_second"]
        dp_separate = alone["dp"]["samples_per_second"]
        rows[name] = {
            "fg_dp_alone_separate": dp_separate,
            "fg_dp_alone_in_run": b["foreground_data_parallel_samples_per_second"],
            "fg_alone_separate": alone[name]["samples_per_second"],
            "fg_alone_in_run": b["foreground_alone_samples_per_second"],
            "fg_shared": fg,
            "slowdown_in_run": shared["foreground_slowdown"],
            "slowdown_side_by_side": alone[name]["samples_per_second"] / fg,
            "bg_alone": bg_alone,
            "bg_shared": bg,
            "bg_share": bg / bg_alone,
            "cluster_vs_dp": shared["cluster_throughput_vs_data_parallel"],
            "cluster_vs_dp_side_by_side": fg / dp_separate + bg / bg_alone,
            "cluster_vs_own_plan": shared["cluster_throughput_vs_own_plan"],
            "cluster_vs_own_plan_side_by_side": fg / alone[name]["samples_per_second"] + bg / bg_alone,
            "gate_wait_seconds": b["gate_wait_seconds"],
            "priority": b["priority"],
        }
    return rows


def profile_round(build, tmp, r):
    path = os.path.join(tmp, f"vgg_small.{r}.prof.json")
    run(["mpirun", "-np", "2", f"{build}/burstpool", "profile", MODEL, "--batches", "1,2,4,8,16,32,64",
         "--warmup", "2", "--repeats", "5", "--out", path])
    return path


def simulate(build, tmp, plan, net, profile, packing=None):
    out = os.path.join(tmp, "sim.json")
    cmd = [f"{build}/burstpool", "simulate", plan, "--model", MODEL, "--profile", profile, "--network", net,
           "--background", os.path.join(JOBS, "background_vgg_small.ini"), "--background-profile", profile,
           "--out", out]
    if packing:
        cmd += ["--packing", packing]
    run(cmd)
    return json.load(open(out))["background"]


def fit(build, tmp, samples, out):
    path = os.path.join(tmp, "samples.json")
    json.dump({"samples": samples}, open(path, "w"))
    run([f"{build}/burstpool", "fit-packing", path, "--device", "cpu", "--out", out])
    return out


def median_simulation(build, tmp, plan, net, profiles, packing=None):
    """Every figure of the background prediction, median over the rounds' profiles."""
    sims = [simulate(build, tmp, plan, net, p, packing) for p in profiles]
    return {k: statistics.median(s[k] for s in sims) for k, v in sims[0].items() if isinstance(v, (int, float))}


def predictions(build, tmp, plans, net, profiles, medians, packing_out):
    """Fits the packing model to all plans (written to packing_out) and to each
    pair of plans; returns {plan: {"in_sample": sim, "left_out": sim}}."""
    base = {name: median_simulation(build, tmp, plan, net, profiles) for name, plan in plans.items()}
    samples = [{"label": f"vgg_small {name} plan, 2 CPU ranks", "idle_share": base[name]["idle_share"],
                "slack_share": base[name]["slack_share"], "background_share": medians[name]["bg_share"],
                "foreground_slowdown": medians[name]["slowdown_in_run"]} for name in plans]
    fit(build, tmp, samples, packing_out)
    out = {name: {"in_sample": median_simulation(build, tmp, plan, net, profiles, packing_out)}
           for name, plan in plans.items()}
    for k, name in enumerate(plans):
        others = fit(build, tmp, samples[:k] + samples[k + 1:], os.path.join(tmp, f"packing-without-{name}.json"))
        out[name]["left_out"] = median_simulation(build, tmp, plans[name], net, profiles, others)
    return out


LABELS = {
    "cluster_vs_dp": "**cluster throughput against data parallel alone** (metrics)",
    "cluster_vs_dp_side_by_side": "**cluster throughput against data parallel alone** (separate alone run)",
    "cluster_vs_own_plan": "cluster throughput against the plan's own foreground alone (metrics)",
    "cluster_vs_own_plan_side_by_side": "cluster throughput against the plan's own foreground alone (separate run)",
    "fg_dp_alone_separate": "foreground data parallel alone, separate run (samples/s)",
    "fg_dp_alone_in_run": "foreground data parallel alone, measured in the run's calibration (samples/s)",
    "fg_alone_separate": "foreground under the plan alone, separate run (samples/s)",
    "fg_alone_in_run": "foreground under the plan alone, its first steps in the shared run (samples/s)",
    "fg_shared": "foreground beside the background (samples/s)",
    "slowdown_in_run": "foreground slowdown (metrics: vs its first steps)",
    "slowdown_side_by_side": "foreground slowdown (vs the separate alone run)",
    "bg_alone": "background alone (samples/s)",
    "bg_shared": "background beside the foreground (samples/s)",
    "bg_share": "background share of its rate alone",
    "gate_wait_seconds": "background held back by the gate (s)",
}
# measured key, predicted key, label
COMPARED = (("slowdown_in_run", "foreground_slowdown", "foreground slowdown"),
            ("bg_shared", "shared_samples_per_second", "background samples/s beside the foreground"),
            ("cluster_vs_dp", "cluster_throughput_vs_data_parallel", "cluster throughput against data parallel"),
            ("cluster_vs_own_plan", "cluster_throughput_vs_own_plan", "cluster throughput against the own plan"))


def report(args, runs, medians, sims, packing):
    lines = [f"# Multiplexing on 2 ranks (medians of {args.rounds} rounds, {args.steps} foreground steps)", "",
             "Command: `python3 perf/multiplex.py` (foreground jobs/multiplex/foreground_vgg_small.ini, batch 32; "
             "background jobs/multiplex/background_vgg_small.ini, batch 64, data parallel; one core per rank; "
             f"background thread priority: {runs['split'][0]['priority']}). Each round runs every plan's foreground "
             "alone, then each beside the background.", "",
             "Cluster throughput = fg shared / fg reference + bg shared / bg alone. The reference that counts is the "
             "same foreground trained **data parallel alone** on the same ranks; the figure against the plan's own "
             "foreground alone is kept below it and hides what the plan itself costs.", "",
             "| figure | split plan | alternate plan | data parallel |", "|---|---|---|---|"]
    for k in LABELS:
        lines.append(f"| {LABELS[k]} | " + " | ".join(f"{medians[p][k]:.3f}" for p in PLANS) + " |")
    lines += ["", "## Simulated against measured", "",
              f"`burstpool simulate PLAN --background ... --packing {os.path.relpath(args.packing, ROOT)}` with each "
              "round's 1-thread small-VGG profile (made by 2 processes at once) and a measured network profile, "
              "medians over the rounds. Packing model "
              f"fitted to the three plans' medians (`burstpool fit-packing`): base share "
              f"{packing['base_share']:.3f}, idle efficiency {packing['idle_efficiency']:.3f}, busy efficiency {packing['busy_efficiency']:.3f} (0 on a CPU), "
              f"foreground slowdown {packing['foreground_slowdown']:.3f}. 'left out' fits the model to the other two "
              "plans only, so that plan's prediction is out of sample.", "",
              "| plan | figure | measured | predicted (in sample) | error | predicted (left out) | error |",
              "|---|---|---|---|---|---|---|"]
    for p in PLANS:
        sim = sims[p]
        lines.append(f"| {p} | simulated idle / slack share of rank time | | {sim['in_sample']['idle_share']:.3f} / "
                     f"{sim['in_sample']['slack_share']:.3f} | | | |")
        lines.append(f"| {p} | background share of its rate alone (the packing model itself) | "
                     f"{medians[p]['bg_share']:.3f} | "
                     + " | ".join(f"{s:.3f} | {100 * (s / medians[p]['bg_share'] - 1):+.0f}%" for s in
                                  (sim[k]["shared_samples_per_second"] / sim[k]["alone_samples_per_second"]
                                   for k in ("in_sample", "left_out"))) + " |")
        lines.append(f"| {p} | background samples/s alone (the simulator) | {medians[p]['bg_alone']:.1f} | "
                     + " | ".join(f"{sim[k]['alone_samples_per_second']:.1f} | "
                                  f"{100 * (sim[k]['alone_samples_per_second'] / medians[p]['bg_alone'] - 1):+.0f}%"
                                  for k in ("in_sample", "left_out")) + " |")
        for measured, predicted, label in COMPARED:
            m, a, b = medians[p][measured], sim["in_sample"][predicted], sim["left_out"][predicted]
            lines.append(f"| {p} | {label} | {m:.3f} | {a:.3f} | {100 * (a / m - 1):+.0f}% | {b:.3f} | "
                         f"{100 * (b / m - 1):+.0f}% |")
    return lines


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--out", default=os.path.join(ROOT, "perf", "results", "multiplex"))
    ap.add_argument("--packing", default=os.path.join(ROOT, "jobs", "profiles", "packing.cpu.json"))
    args = ap.parse_args()
    tmp = tempfile.mkdtemp()
    dp_plan = os.path.join(tmp, "dp.json")
    run([f"{args.build}/burstpool", "plan", "--data-parallel", MODEL, "--ranks", "2", "--global-batch", "32",
         "--out", dp_plan])
    plans = {"split": os.path.join(JOBS, "vgg_small_split_2ranks.json"),
             "alternate": os.path.join(JOBS, "vgg_small_alternate_2ranks.json"), "dp": dp_plan}
    runs = {name: [] for name in plans}
    profiles = []
    for r in range(args.rounds):
        profiles.append(profile_round(args.build, tmp, r))
        for name, row in measure_round(args.build, tmp, plans, args.steps).items():
            runs[name].append(row)
            print(f"round {r + 1} {name}: " + ", ".join(f"{k} {v:.3f}" if isinstance(v, float) else f"{k} {v}"
                                                         for k, v in row.items()), flush=True)
    keys = [k for k in runs["split"][0] if k != "priority"]
    medians = {name: {k: statistics.median(row[k] for row in rows) for k in keys} for name, rows in runs.items()}
    net = os.path.join(tmp, "net.json")
    run(["mpirun", "-np", "2", f"{args.build}/burstpool", "profile", "--network", "--out", net])
    sims = predictions(args.build, tmp, plans, net, profiles, medians, args.packing)
    packing = json.load(open(args.packing))
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out + ".json", "w") as f:
        json.dump({"rounds": args.rounds, "steps": args.steps, "runs": runs, "medians": medians,
                   "simulated": sims, "packing": packing}, f, indent=1)
    lines = report(args, runs, medians, sims, packing)
    with open(args.out + ".md", "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()

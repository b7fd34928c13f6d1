#!/usr/bin/env python3
"""Burst plans and multiplexing measured where ranks wait on the network: the
same runs with no shaping (shared memory) and on links shaped by
scripts/shaped-net.sh to G Gbit/s per rank (one rank per emulated node).

Per point (model, global batch, ranks, bandwidth), each round runs four modes
side by side, in an order that alternates between rounds:

  dp        data parallel alone (the reference of cluster throughput);
  burst     the plan --plan auto makes from profiles measured at that point
            (data parallel where the amplification limit's plan is predicted
            slower, as no background job runs beside it);
  burst_bg  --plan auto's plan beside a background job (the limit's plan);
  dp_bg     data parallel beside the same background job (so what the plan
            and what the background each give are seen apart).

The background is small-VGG at batch 32 per rank with [background] sync =
none: each rank trains its own replica and sends nothing, as DeepPool's
background jobs do. Cluster throughput against data parallel alone =
fg samples/s shared / dp alone (the same round's separate run) + bg samples/s
shared / bg alone (the run's own calibration). Where each rank's time goes
comes from the runs' metrics (per_rank compute / transfer / allreduce / idle
seconds, and the background's compute seconds while shared).

Then the simulator (burstpool simulate) with the layer and network profiles
measured at the point (--plan auto's cache): predicted step time of dp and of
the burst plan, and the background's samples/s beside each
(--background-independent with the CPU packing model), against the medians.

2 ranks take one core each; 4 ranks on this 2-core machine are
oversubscribed (labelled so) and wait by yielding (OMPI_MCA_mpi_yield_when_idle=1),
as shaped ranks do; --yield-beside-background 0 turns that off for the two
modes beside the background (a yield inside MPI hands the core to it).
BLAS: OPENBLAS_CORETYPE=Haswell (this CPU's AVX2 kernel; OpenBLAS 0.3.21 would
pick Prescott by itself). Shaping needs root (scripts/shaped-net.sh).

Usage: perf/shaped_study.py [--build build] [--rounds 3] [--gbits none,10,3,1] [--ranks 2,4]
                            [--models vgg16_cifar,vgg_small,lenet5] [--out perf/results/shaped_study]
                            [--yield-beside-background 0|1] [--steady-link] [--packing PACKING.json] [--steps N]
                            [--calibrate-steps N] [--background-set KEY=VALUE ...]
       perf/shaped_study.py --from-json STUDY.json [--resimulate WORKDIR] --out OTHER
         (the report again; with --resimulate, every round simulated again with this build from the profiles and
         plans kept in the study's working folder, beside the same measurements)
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODELS = os.path.join(ROOT, "jobs", "models")
LAUNCHER = os.path.join(ROOT, "scripts", "shaped-net.sh")
PACKING = os.path.join(ROOT, "jobs", "profiles", "packing.cpu.json")
PACKING_USED = PACKING  # --packing: the model the background's predictions use
ENV = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", OPENBLAS_CORETYPE="Haswell",
           OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
ENV.pop("OMPI_MCA_mpi_yield_when_idle", None)
MODES = ("dp", "burst", "burst_bg", "dp_bg")
# model: (two global batches, foreground steps): small per-rank batches, the strong-scaling regime
SETTINGS = {"vgg16_cifar": ((16, 32), 14), "vgg_small": ((32, 64), 60), "lenet5": ((32, 128), 200)}
BACKGROUND_MODEL, BACKGROUND_BATCH = "vgg_small", 32
# OMPI_MCA_mpi_yield_when_idle of the modes beside a background where ranks yield (--yield-beside-background):
# "1" as alone, or "0" as docs/multiplexing.md advises (a yield inside MPI hands the core to the background).
YIELD_BESIDE_BACKGROUND = "1"
STEADY_LINK = False  # --steady-link: scripts/shaped-net.sh --steady
CALIBRATE_STEPS = 0  # --calibrate-steps: [background] calibrate_steps (0: a quarter of the foreground's steps)
BACKGROUND_SETS = []  # --background-set: job keys set for the two modes beside the background only


def log(text):
    print(text, flush=True)


def run(cmd, env=ENV, timeout=900):
    """`cmd`'s standard output; RuntimeError with its output's tail where it fails or overruns `timeout` s. An
    overrunning command gets SIGTERM first, so that scripts/shaped-net.sh ends its mpirun and removes its namespaces
    (a SIGKILL cannot be trapped and would leave them), and SIGKILL only if it is still there 60 s later."""
    with subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as proc:
        try:
            out, err = proc.communicate(timeout=timeout)
            failure = f"exit status {proc.returncode}" if proc.returncode != 0 else None
        except subprocess.TimeoutExpired:
            proc.terminate()
            try:
                out, err = proc.communicate(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                out, err = proc.communicate()
            failure = f"no end within {timeout} s (stopped)"
    if failure:
        raise RuntimeError(f"{' '.join(cmd)}: {failure}\n{out[-2000:]}\n{err[-2000:]}")
    return out


def write_jobs(tmp, model, batch, steps):
    fg, bg = os.path.join(tmp, f"fg-{model}-{batch}.ini"), background_files(tmp)["bg_job"]
    with open(bg, "w") as f:
        f.write(f"[job]\nmodel = {MODELS}/{BACKGROUND_MODEL}.ini\nseed = 5\n[data]\nsource = synthetic\n"
                "synthetic_train_samples = 4096\nsynthetic_test_samples = 0\n"
                f"[train]\nbatch_size = {BACKGROUND_BATCH}\nepochs = 1000\n[optimizer]\nlr = 0.01\n")
    with open(fg, "w") as f:
        f.write(f"[job]\nmodel = {MODELS}/{model}.ini\nseed = 3\n[data]\nsource = synthetic\n"
                "synthetic_train_samples = 4096\nsynthetic_test_samples = 0\n"
                f"[train]\nbatch_size = {batch}\nsteps = {steps}\nlog_every = 1000\n[optimizer]\nlr = 0.01\n"
                f"[background]\njob = {bg}\ncalibrate_steps = {CALIBRATE_STEPS or max(6, steps // 4)}\nsync = none\n")
    return fg, bg


def launch(point, cmd, yield_when_idle="1"):
    """The command under the point's network: plain mpirun over shared memory, or the shaped testbed.
    Oversubscribed or shaped, Open MPI's ranks yield while they poll unless `yield_when_idle` is "0"."""
    env = dict(ENV)
    if point["ranks"] > 2 or point["gbit"] != "none":  # see scripts/shaped-net.sh: spinning ranks starve the links
        env["OMPI_MCA_mpi_yield_when_idle"] = yield_when_idle
    mpirun = ["mpirun", "-np", str(point["ranks"]), "--oversubscribe"]
    if point["gbit"] == "none":
        return run(mpirun + cmd, env)
    steady = ["--steady"] if STEADY_LINK else []
    return run([LAUNCHER, "--quiet", *steady, "--gbit", str(point["gbit"]), "--nodes", str(point["ranks"]), "--"] +
               mpirun + cmd, env)


def train(build, tmp, point, mode):
    metrics = os.path.join(tmp, f"{mode}.json")
    cmd = [f"{build}/burstpool", "train", point["job"], "--metrics", metrics,
           "--set", f"parallel.profile_cache={point['cache']}"]
    if mode.startswith("burst"):
        cmd += ["--plan", "auto"]
    if mode.endswith("_bg"):
        for key_value in BACKGROUND_SETS:
            cmd += ["--set", key_value]
    else:
        cmd += ["--set", "background.job=none"]
    launch(point, cmd, YIELD_BESIDE_BACKGROUND if mode.endswith("_bg") else "1")
    m = json.load(open(metrics))
    if mode.startswith("burst"):
        shutil.copy(os.path.join(tmp, f"{mode}.plan.json"), point["plan" if mode == "burst" else "plan_beside"])
    return m


def time_shares(m):
    """Mean over ranks of where a rank's step time went, as shares; background_sync (a learner strategy's
    own thread, beside the steps) is not part of the sum."""
    shares = {}
    for k in ("compute", "transfer", "allreduce", "idle", "background_sync"):
        shares[k] = statistics.mean(r.get(f"{k}_seconds", 0.0) for r in m["per_rank"]) / m["train_seconds"]
    shares["waiting"] = shares["transfer"] + shares["allreduce"] + shares["idle"]
    return shares


def background_files(tmp):
    """The background's job and layer profile in the study's working folder `tmp`, shared by every point."""
    return {"bg_job": os.path.join(tmp, "bg.ini"), "bg_profile": os.path.join(tmp, "bg.prof.json")}


def point_files(tmp, model, batch, ranks, gbit):
    """A point's files in the study's working folder `tmp`: its model, the background's files, and the folder and
    plan name under which its rounds keep their profiles and plans (round_point)."""
    tag = f"{model}-{batch}-{ranks}-{gbit}"
    return {"model_file": f"{MODELS}/{model}.ini", **background_files(tmp),
            "cache": os.path.join(tmp, f"cache-{tag}"), "plan": os.path.join(tmp, f"plan-{tag}.json")}


def round_point(point, r):
    """The point as round r sees it: its own --plan auto cache (profiles) and plans (alone, and beside the
    background, where --plan auto takes the amplification limit's plan), kept in the working folder."""
    return dict(point, cache=os.path.join(point["cache"], f"round{r}"), plan=f"{point['plan'][:-5]}-round{r}.json",
                plan_beside=f"{point['plan'][:-5]}-round{r}-beside.json")


def measure_round(build, tmp, point, r):
    """The four modes side by side, then the simulator with the profiles this round's --plan auto measured."""
    point = round_point(point, r)
    os.makedirs(point["cache"], exist_ok=True)
    order = MODES if r % 2 == 0 else tuple(reversed(MODES))
    runs = {mode: train(build, tmp, point, mode) for mode in order}
    dp = runs["dp"]["samples_per_second"]
    row = {"order": list(order)}
    for mode, m in runs.items():
        # step: the median step (the steady one the simulator predicts; start-up weighs on short runs), where
        # the metrics have it; samples/s: everything, for the throughputs
        entry = {"fg": m["samples_per_second"] if not mode.endswith("_bg") else m["foreground_samples_per_second"],
                 "step_s": m.get("median_step_seconds") or point["batch"] / m["samples_per_second"],
                 "shares": time_shares(m)}
        if mode.startswith("burst"):
            entry["predicted_step_s"] = m.get("predicted_step_seconds")
        if mode.endswith("_bg"):
            b = m["background"]
            bg, bg_alone = m["background_samples_per_second"], b["alone_samples_per_second"]
            alone = runs[mode[:-3]]["samples_per_second"]
            entry.update(bg=bg, bg_alone=bg_alone, bg_share=bg / bg_alone,
                         slowdown=alone / entry["fg"],
                         # against its own plan's first steps alone, in the same run: with a background, --plan
                         # auto takes the limit's plan, which need not be the plan the alone run took
                         slowdown_in_run=m["foreground_slowdown"],
                         cluster_vs_dp=entry["fg"] / dp + bg / bg_alone,
                         cluster_vs_own_alone=entry["fg"] / alone + bg / bg_alone,
                         cluster_vs_dp_in_run=m["cluster_throughput_vs_data_parallel"],
                         shared_steps=b.get("shared_steps", 0))
        row[mode] = entry
    row.update(simulate_round(build, tmp, point, PACKING_USED))
    return row


def simulate_round(build, tmp, point, packing=PACKING):
    """This round's predictions: the dp and burst plans' steps and the background beside each (with the `packing`
    model; the simulated idle and slack shares it maps to the background's share beside), from the layer and
    network profiles measured in the round (so the machine's drift between rounds cancels), and the plan."""
    files = os.listdir(point["cache"])
    point["network_profile"] = os.path.join(point["cache"], next(f for f in files if f.startswith("network-")))
    point["layer_profile"] = os.path.join(point["cache"], next(f for f in files if f.startswith(point["model"] + "-")))
    dp_plan = os.path.join(tmp, "dp.plan.json")
    run([f"{build}/burstpool", "plan", "--data-parallel", point["model_file"], "--ranks", str(point["ranks"]),
         "--global-batch", str(point["batch"]), "--out", dp_plan])
    beside = point["plan_beside"] if os.path.exists(point.get("plan_beside", "")) else point["plan"]  # older studies
    sims = {"dp": simulate(build, tmp, point, dp_plan, packing),
            "burst": simulate(build, tmp, point, point["plan"], packing),
            "burst_bg": simulate(build, tmp, point, beside, packing)}
    plan = json.load(open(point["plan"]))
    net = json.load(open(point["network_profile"]))
    return {"layers_on_fewer_ranks": sum(1 for l in plan["layers"] if l["ranks"] != f"0-{point['ranks'] - 1}"),
            "network": {"p2p_gbit": 8e-9 * net["p2p"]["bandwidth_bytes_per_s"],
                        "allreduce_gbit": 8e-9 * net["allreduce"]["bandwidth_bytes_per_s"],
                        "core_ms_per_mb": 1e9 * net["allreduce"].get("core_seconds_per_byte", 0.0),
                        "largest_bytes": net.get("largest_bytes"), "seconds": net.get("seconds")},
            "simulated": {mode: {"step_s": s["iteration_s"],
                                 "bg_shared": s["background"]["shared_samples_per_second"],
                                 "bg_alone": s["background"]["alone_samples_per_second"],
                                 "idle_share": s["background"]["idle_share"],
                                 "usable_idle_share": s["background"].get("usable_idle_share"),
                                 "idle_gaps_s": s["background"].get("idle_gaps_s"),
                                 "slack_share": s["background"]["slack_share"]}
                          for mode, s in sims.items()}}


# (mode measured, key measured, mode simulated, key simulated): the predictions checked, per round
CHECKED = {"dp_step": ("dp", "step_s", "dp", "step_s"), "burst_step": ("burst", "step_s", "burst", "step_s"),
           "bg_beside_dp": ("dp_bg", "bg", "dp", "bg_shared"),
           "bg_beside_burst": ("burst_bg", "bg", "burst_bg", "bg_shared")}


def round_errors(row):
    """Simulated against measured, as a fraction (None where nothing was measured)."""
    out = {}
    for name, (mode, key, sim_mode, sim_key) in CHECKED.items():
        measured = row[mode].get(key)
        out[name] = row["simulated"][sim_mode][sim_key] / measured - 1 if measured else None
    return out


def simulate(build, tmp, point, plan, packing=None):
    """`burstpool simulate` of `plan` at the point; with a packing model, the background beside it too."""
    out = os.path.join(tmp, "sim.json")
    cmd = [f"{build}/burstpool", "simulate", plan, "--model", point["model_file"], "--profile", point["layer_profile"],
           "--network", point["network_profile"], "--out", out]
    if point["ranks"] > 2:
        cmd += ["--cores", "2"]
    if packing:
        cmd += ["--background", point["bg_job"], "--background-profile", point["bg_profile"],
                "--background-independent", "--packing", packing]
    run(cmd)
    return json.load(open(out))


def median_of(rows, mode, key):
    values = [row[mode][key] for row in rows if row[mode].get(key) is not None]
    return statistics.median(values) if values else None


def study_point(build, tmp, point, rounds):
    os.makedirs(point["cache"], exist_ok=True)
    rows = []
    for r in range(rounds):
        rows.append(measure_round(build, tmp, point, r))
        row = rows[-1]
        row["errors"] = round_errors(row)
        log(f"  round {r + 1}: dp {row['dp']['fg']:.1f}, burst {row['burst']['fg']:.1f} samples/s; "
            f"cluster vs dp: burst+bg {row['burst_bg']['cluster_vs_dp']:.3f}, dp+bg {row['dp_bg']['cluster_vs_dp']:.3f}; "
            f"simulated step: dp {100 * row['errors']['dp_step']:+.0f}%, burst {100 * row['errors']['burst_step']:+.0f}%")
    return summarise_point(point, rows)


def summarise_point(point, rows):
    """A point's result: its rounds, the medians over them of the measurements and of each prediction's error."""
    med = {mode: {k: median_of(rows, mode, k) for k in rows[0][mode] if k != "shares"} for mode in MODES}
    for mode in MODES:
        med[mode]["shares"] = {k: statistics.median(row[mode]["shares"][k] for row in rows)
                               for k in rows[0][mode]["shares"]}
    errors = {}
    for name in CHECKED:
        values = [row["errors"][name] for row in rows if row["errors"][name] is not None]
        errors[name] = statistics.median(values) if values else None
    return {"point": {k: v for k, v in point.items() if k in ("model", "batch", "ranks", "gbit")},
            "rounds": rows, "medians": med, "errors": errors,
            "layers_on_fewer_ranks": [row["layers_on_fewer_ranks"] for row in rows],
            "network": {k: statistics.median(row["network"][k] or 0 for row in rows) for k in rows[0]["network"]},
            "simulated": {mode: {k: statistics.median(row["simulated"][mode][k] for row in rows)
                                 for k in rows[0]["simulated"][mode]} for mode in rows[0]["simulated"]}}


def resimulate(results, build, workdir):
    """Every round's simulation again with `build`, from the profiles and plans the rounds kept in the study's
    working folder `workdir`, beside the same measurements: a simulator change checked against measured runs
    without measuring again."""
    tmp = tempfile.mkdtemp()
    out = []
    for res in results:
        p = res["point"]
        point = dict(p, **point_files(workdir, p["model"], p["batch"], p["ranks"], p["gbit"]))
        rows = []
        for r, row in enumerate(res["rounds"]):
            row = dict(row, **simulate_round(build, tmp, round_point(point, r), PACKING_USED))
            row["errors"] = round_errors(row)
            rows.append(row)
        out.append(summarise_point(point, rows))
    shutil.rmtree(tmp)
    return out


def pct(a, b):
    return f"{100 * (a / b - 1):+.0f}%" if a is not None and b else "n/a"


def point_error(res, name):
    """The median of the rounds' errors (each round's prediction from its own profiles), or, for a study saved
    before those were kept, the medians' error; None where nothing was measured."""
    if "errors" in res:
        return res["errors"][name]
    mode, key, sim_mode, sim_key = CHECKED[name]
    measured = res["medians"][mode].get(key)
    simulated = res["simulated"].get(sim_mode, res["simulated"]["burst"])
    return simulated[sim_key] / measured - 1 if measured else None


def slowdown(m):
    """The foreground's slowdown beside the background: against its own plan alone in the same run where the
    study kept it, else against the alone mode's separate run."""
    return m.get("slowdown_in_run") or m["slowdown"]


def slowdown_text(m):
    both = f"{slowdown(m):.2f}"
    return both + (f" ({m['slowdown']:.2f})" if m.get("slowdown_in_run") else "")


def error_text(res, name):
    e = point_error(res, name)
    return f"{100 * e:+.0f}%" if e is not None else "n/a"


def fewer_text(res):
    fewer = res["layers_on_fewer_ranks"]
    if not isinstance(fewer, list):
        return str(fewer)
    return str(fewer[0]) if len(set(fewer)) == 1 else "/".join(str(n) for n in fewer)


def report(results, args):
    yield_off = args.yield_beside_background == "0"
    steady = args.steady_link
    flags = (" --yield-beside-background 0" if yield_off else "") + (" --steady-link" if steady else "")
    flags += f" --packing {args.packing}" if args.packing != os.path.relpath(PACKING, ROOT) else ""
    flags += f" --batches {args.batches}" if getattr(args, "batches", "") else ""
    flags += f" --steps {args.steps}" if getattr(args, "steps", 0) else ""
    flags += f" --calibrate-steps {args.calibrate_steps}" if getattr(args, "calibrate_steps", 0) else ""
    flags += "".join(f" --background-set {kv}" for kv in getattr(args, "background_set", None) or [])
    yield_note = (" Shaped, the two modes beside the background run with OMPI_MCA_mpi_yield_when_idle=0 (as "
                  "docs/multiplexing.md advises: a yield inside MPI hands the core to the background), the alone "
                  "modes with scripts/shaped-net.sh's default of 1." if yield_off else "")
    resimulated = (f" Simulations redone at commit {args.resimulated} from the rounds' kept profiles and plans "
                   f"(`--from-json {args.from_json} --resimulate DIR --packing {args.packing}`); the "
                   "measurements are the study's." if getattr(args, "resimulated", None) else "")
    lines = ["# Burst plans and multiplexing on a shaped network", "",
             f"Commit {args.commit}.{resimulated} Command: `python3 perf/shaped_study.py --rounds {args.rounds} --gbits {args.gbits} --ranks {args.ranks} "
             f"--models {args.models}{flags}`. Medians of {args.rounds} rounds; each round runs the four modes side by side, "
             "in alternating order. `none`: plain mpirun over shared memory; a number: scripts/shaped-net.sh, one rank "
             "per emulated node, that many Gbit/s per rank each way" +
             (" (`--steady`: bursts held to the rate too, so a sum after a pause moves at the rate, not at the "
              "machine's speed up to the token bucket's depth)" if steady else "") + ". More than 2 ranks share this machine's 2 cores "
             "(oversubscribed, waits yield). Background: small-VGG at batch 32 per rank, `sync = none` (a replica per "
             "rank, no network). Cluster = fg shared / dp alone + bg shared / bg alone. Slowdown: the foreground's "
             "steps alone (its first steps, in the same run, under the same plan) against its steps beside the "
             "background; in brackets, against the alone mode's separate run (with a background, `--plan auto` "
             "takes the amplification limit's plan, which need not be the plan it takes alone)." + yield_note, "",
             "| model | batch | ranks | Gbit/s | dp samples/s | dp waiting | burst / dp | layers on fewer | "
             "burst+bg: slowdown (vs the burst run), bg share, **cluster vs dp** (vs burst alone) | "
             "dp+bg: slowdown (vs the dp run), bg share, **cluster vs dp** |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for res in results:
        p, m = res["point"], res["medians"]
        ranks = f"{p['ranks']}" + (" (oversubscribed)" if p["ranks"] > 2 else "")
        lines.append(
            f"| {p['model']} | {p['batch']} | {ranks} | {p['gbit']} | {m['dp']['fg']:.1f} | "
            f"{100 * m['dp']['shares']['waiting']:.0f}% | {m['burst']['fg'] / m['dp']['fg']:.2f} | "
            f"{fewer_text(res)} | {slowdown_text(m['burst_bg'])}, {m['burst_bg']['bg_share']:.2f}, "
            f"**{m['burst_bg']['cluster_vs_dp']:.2f}** ({m['burst_bg']['cluster_vs_own_alone']:.2f}) | "
            f"{slowdown_text(m['dp_bg'])}, {m['dp_bg']['bg_share']:.2f}, "
            f"**{m['dp_bg']['cluster_vs_dp']:.2f}** |")
    lines += ["", "## Where a rank's time goes (medians; shares of the training time, mean over ranks)", "",
              "| model | batch | ranks | Gbit/s | mode | compute | transfer | allreduce wait | idle |",
              "|---|---|---|---|---|---|---|---|---|"]
    for res in results:
        p, m = res["point"], res["medians"]
        for mode in MODES:
            s = m[mode]["shares"]
            lines.append(f"| {p['model']} | {p['batch']} | {p['ranks']} | {p['gbit']} | {mode} | "
                         f"{100 * s['compute']:.0f}% | {100 * s['transfer']:.0f}% | {100 * s['allreduce']:.0f}% | "
                         f"{100 * s['idle']:.0f}% |")
    lines += ["", "## Simulator and planner against the runs", "",
              "Layer and network profiles measured at the point by `--plan auto`, afresh in every round (allreduce "
              "fit shown, median over rounds). Measured step: the run's median step (`median_step_seconds`; "
              "a study saved before the metrics had it: batch / samples/s). Predicted step: `burstpool simulate` "
              "with the round's profiles and plan; error: the median over rounds of each round's prediction against that round's run (a study "
              "saved before rounds kept their own predictions: the medians' error). The planner's own prediction "
              "is the metrics' `predicted_step_seconds`. Background beside the foreground: "
              f"`--background-independent --packing {args.packing}`.", "",
              "| model | batch | ranks | Gbit/s | net fit Gbit/s | dp step ms: measured, simulated, error | "
              "burst step ms: measured, simulated, error, planner's | bg samples/s beside dp: measured, simulated, error | "
              "beside burst: measured, simulated, error | auto against the best alone mode |",
              "|---|---|---|---|---|---|---|---|---|---|"]
    for res in results:
        p, m, s = res["point"], res["medians"], res["simulated"]
        best = max(m["dp"]["fg"], m["burst"]["fg"])
        lines.append(
            f"| {p['model']} | {p['batch']} | {p['ranks']} | {p['gbit']} | {res['network']['allreduce_gbit']:.2f} | "
            f"{1e3 * m['dp']['step_s']:.1f}, {1e3 * s['dp']['step_s']:.1f}, "
            f"{error_text(res, 'dp_step')} | "
            f"{1e3 * m['burst']['step_s']:.1f}, {1e3 * s['burst']['step_s']:.1f}, "
            f"{error_text(res, 'burst_step')}, "
            f"{1e3 * (m['burst']['predicted_step_s'] or 0):.1f} | "
            f"{m['dp_bg']['bg']:.0f}, {s['dp']['bg_shared']:.0f}, "
            f"{error_text(res, 'bg_beside_dp')} | "
            f"{m['burst_bg']['bg']:.0f}, {s.get('burst_bg', s['burst'])['bg_shared']:.0f}, "
            f"{error_text(res, 'bg_beside_burst')} | "
            f"{m['burst']['fg'] / best:.2f} |")
    return lines + [""] + targets(results)


def targets(results):
    """How many points meet each of the study's aims, counted from the tables above."""
    shaped = [r for r in results if r["point"]["gbit"] != "none"]
    lines = ["## Against the aims", ""]
    for name, what in (("dp_step", "data parallel's step"), ("burst_step", "the plan's step"),
                       ("bg_beside_dp", "the background's samples/s beside data parallel"),
                       ("bg_beside_burst", "the background's samples/s beside the plan")):
        errors = [(r, point_error(r, name)) for r in shaped]
        within = [r for r, e in errors if e is not None and abs(e) <= 0.15]
        missed = [f"{r['point']['model']} {r['point']['batch']} at {r['point']['gbit']} ({100 * e:+.0f}%)"
                  for r, e in errors if e is not None and abs(e) > 0.15]
        lines.append(f"- Simulator, {what}: within 15% at {len(within)} of {len(errors)} shaped points"
                     + (f"; missed: {', '.join(missed)}" if missed else "") + ".")
    auto = [(r, r["medians"]["burst"]["fg"] / max(r["medians"]["dp"]["fg"], r["medians"]["burst"]["fg"]))
            for r in results]
    slow = [f"{r['point']['model']} {r['point']['batch']} at {r['point']['gbit']} ({a:.2f})" for r, a in auto if a < 0.95]
    lines.append(f"- `--plan auto` within 5% of the better alone mode at {len(auto) - len(slow)} of {len(auto)} points"
                 + (f"; not at: {', '.join(slow)}" if slow else "") + ".")
    waiting = [r for r in results if r["medians"]["dp"]["shares"]["waiting"] >= 0.30]
    for r in waiting:
        m = r["medians"]["burst_bg"]
        lines.append(f"- {r['point']['model']} {r['point']['batch']} at {r['point']['gbit']} (data parallel waits "
                     f"{100 * r['medians']['dp']['shares']['waiting']:.0f}%): cluster vs dp {m['cluster_vs_dp']:.2f} "
                     f"(aim 1.3), foreground slowdown {slowdown(m):.2f} (aim 1.10 at most); the background's "
                     f"steps beside the plan: {shared_steps_text(r)}.")
    return lines


def shared_steps_text(res):
    """The background's steps beside the plan in each round: its rate and share rest on these (a study saved before
    the metrics counted them: n/a)."""
    counts = [rnd["burst_bg"].get("shared_steps") for rnd in res.get("rounds", [])]
    return ", ".join(str(c) for c in counts) if counts and None not in counts else "n/a"


def plot(results, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        log("no matplotlib: no plot")
        return
    series = {}
    for res in results:
        p = res["point"]
        key = f"{p['model']} B={p['batch']} {p['ranks']}r"
        series.setdefault(key, []).append(res)
    fig, axes = plt.subplots(1, 2, figsize=(13, 5))
    order = lambda g: 1e9 if g == "none" else float(g)
    for key, rs in series.items():
        rs.sort(key=lambda r: order(r["point"]["gbit"]))
        xs = [str(r["point"]["gbit"]) for r in rs]
        axes[0].plot(xs, [r["medians"]["burst_bg"]["cluster_vs_dp"] for r in rs], marker="o", label=key)
        axes[1].plot(xs, [r["medians"]["burst"]["fg"] / r["medians"]["dp"]["fg"] for r in rs], marker="o", label=key)
    axes[0].set_title("burst + background: cluster throughput vs data parallel alone")
    axes[1].set_title("burst plan alone: foreground samples/s vs data parallel")
    for ax in axes:
        ax.axhline(1.0, color="grey", lw=0.8)
        ax.set_xlabel("Gbit/s per rank (none: shared memory)")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--gbits", default="none,10,3,1")
    ap.add_argument("--ranks", default="2,4")
    ap.add_argument("--models", default="vgg16_cifar,vgg_small,lenet5")
    ap.add_argument("--batches", default="", help="global batches for every model (default: two per model)")
    ap.add_argument("--steps", type=int, default=0,
                    help="foreground steps of every run (default: per model, 14 to 200); a plan whose steps are short "
                         "needs more, or the background beside it is still warming up when the run ends")
    ap.add_argument("--calibrate-steps", type=int, default=0,
                    help="steps each job runs alone first, the background included ([background] calibrate_steps; "
                         "default a quarter of --steps): long foreground runs need not calibrate a quarter of them")
    ap.add_argument("--background-set", action="append", metavar="KEY=VALUE",
                    help="a job key set (`--set`) for the two modes beside the background only, for instance "
                         "background.max_slowdown=1: how the multiplexing settings move the point (repeatable)")
    ap.add_argument("--out", default=os.path.join(ROOT, "perf", "results", "shaped_study"))
    ap.add_argument("--yield-beside-background", choices=("0", "1"), default="1",
                    help="OMPI_MCA_mpi_yield_when_idle of burst_bg and dp_bg where ranks yield (alone modes: 1)")
    ap.add_argument("--packing", help="the packing model for the background's predictions (a path from the "
                    f"repository's root; default {os.path.relpath(PACKING, ROOT)}, or with --from-json the study's)")
    ap.add_argument("--steady-link", action="store_true",
                    help="shape with scripts/shaped-net.sh --steady (bursts held to the rate too)")
    ap.add_argument("--from-json", help="only write the report and plot again from a study's JSON")
    ap.add_argument("--resimulate", metavar="WORKDIR",
                    help="with --from-json: simulate every round again with this build, from the profiles and plans "
                         "in the study's working folder (it names it when it starts)")
    args = ap.parse_args()
    global YIELD_BESIDE_BACKGROUND, STEADY_LINK, PACKING_USED, CALIBRATE_STEPS, BACKGROUND_SETS
    YIELD_BESIDE_BACKGROUND = args.yield_beside_background
    CALIBRATE_STEPS = args.calibrate_steps
    BACKGROUND_SETS = args.background_set or []
    STEADY_LINK = args.steady_link
    args.commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True,
                                 text=True).stdout.strip()
    if args.resimulate and not args.from_json:
        ap.error("--resimulate needs --from-json (the study whose rounds it simulates again)")
    if args.from_json:
        saved = json.load(open(args.from_json))
        args.resimulated = args.commit if args.resimulate else None
        args.commit, args.rounds = saved["commit"], saved["rounds"]
        args.gbits, args.ranks, args.models = saved["gbits"], saved["ranks"], saved["models"]
        args.yield_beside_background = saved.get("yield_beside_background", "1")
        args.steady_link = saved.get("steady_link", False)
        args.steps = saved.get("steps", 0)
        args.calibrate_steps = saved.get("calibrate_steps", 0)
        args.background_set = saved.get("background_set", [])
        args.batches = saved.get("batches", "")
        args.packing = args.packing or saved.get("packing", os.path.relpath(PACKING, ROOT))
        PACKING_USED = os.path.join(ROOT, args.packing)
        results = resimulate(saved["results"], args.build, args.resimulate) if args.resimulate else saved["results"]
        write_outputs(results, args)
        return
    args.packing = args.packing or os.path.relpath(PACKING, ROOT)
    PACKING_USED = os.path.join(ROOT, args.packing)
    if os.geteuid() != 0 and args.gbits != "none":
        sys.exit("shaped points need root (scripts/shaped-net.sh); --gbits none runs without")
    tmp = tempfile.mkdtemp()
    log(f"working folder (every round's profiles and plan, for perf/packing_check.py --workdir): {tmp}")
    bg_profile = background_files(tmp)["bg_profile"]
    run(["mpirun", "-np", "2", f"{args.build}/burstpool", "profile", f"{MODELS}/{BACKGROUND_MODEL}.ini",
         "--batches", f"1,2,4,8,16,{BACKGROUND_BATCH}", "--warmup", "2", "--repeats", "5", "--out", bg_profile])
    results, start = [], time.time()
    partial = args.out + ".partial.json"
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)  # the partial results go there first
    for model in args.models.split(","):
        batches, steps = SETTINGS[model]
        steps = args.steps or steps
        if args.batches:
            batches = tuple(int(b) for b in args.batches.split(","))
        for ranks in (int(r) for r in args.ranks.split(",")):
            for batch in batches:
                for gbit in args.gbits.split(","):
                    fg, _ = write_jobs(tmp, model, batch, steps)
                    point = {"model": model, "batch": batch, "ranks": ranks, "gbit": gbit, "job": fg,
                             **point_files(tmp, model, batch, ranks, gbit)}
                    log(f"{model} batch {batch}, {ranks} ranks, {gbit} Gbit/s ({time.time() - start:.0f} s so far)")
                    results.append(study_point(args.build, tmp, point, args.rounds))
                    json.dump({"results": results}, open(partial, "w"), indent=1)
    json.dump({"commit": args.commit, "rounds": args.rounds, "gbits": args.gbits, "ranks": args.ranks,
               "models": args.models, "yield_beside_background": args.yield_beside_background,
               "steady_link": args.steady_link, "packing": args.packing, "steps": args.steps,
               "calibrate_steps": args.calibrate_steps, "background_set": BACKGROUND_SETS,
               "batches": args.batches, "results": results,
               "seconds": time.time() - start},
              open(args.out + ".json", "w"), indent=1)
    os.remove(partial)
    write_outputs(results, args)


def write_outputs(results, args):
    lines = report(results, args)
    open(args.out + ".md", "w").write("\n".join(lines) + "\n")
    plot(results, args.out + ".png")
    log("\n".join(lines))


if __name__ == "__main__":
    main()

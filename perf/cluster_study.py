#!/usr/bin/env python3
"""Strong scaling, simulated: does burst parallelism with a background job
give a cluster more training than plain data parallelism?

Every figure here is SIMULATED (burstpool plan + burstpool simulate) from
measured layer profiles and a stated network model; none is a measured run.

For each model, global batch and rank count, five modes on the same ranks:
  - dp:          data parallel alone, the reference (cluster throughput 1.0); with a
                 global batch smaller than the ranks, the ranks past it get no work;
  - dp+bg:       data parallel beside a background job;
  - burst A:     the planner's burst plan at amplification limit A (1.5, 2, none), alone;
  - burst A+bg:  the same plan beside the background job.
Cluster throughput against data parallel = fg rate / fg data-parallel rate alone
+ bg rate / bg rate alone. The background is the foreground's own model trained
as a replica per rank at batch 32 (a single-device job on every device, with no
network: DeepPool's kind of background), placed by the packing model of the
profile's device kind (include/burstpool/packing.hpp):
  - CPU profiles: the model fitted to measured runs (jobs/profiles/packing.cpu.json,
    from perf/multiplex.py);
  - GPU profiles: no measured GPU packing exists yet, so the background is given
    every idle moment and all the capacity small kernels leave unused at no cost
    to the foreground (both efficiencies 1, slowdown 1): an UPPER BOUND, labelled so.

The CPU-cluster variant takes what was measured on this machine instead:
--profile-dir DIR reads each model's layer profile from DIR/MODEL.json,
measuring it there first if missing (1 thread, per-rank batches 1 to 32),
and --network NET.json a network profile (`burstpool profile --network`),
for instance one measured on links shaped by scripts/shaped-net.sh:
  scripts/shaped-net.sh --gbit 1 -- mpirun -np 2 build/burstpool profile --network --out NET.json

Usage: perf/cluster_study.py [--build build] [--models vgg16,resnet20,inception]
          [--ranks 8,16,...,1024] [--batches 32,128,256] [--bandwidth 25] [--latency 5]
          [--profile-dir DIR] [--network NET.json] [--out perf/results/cluster_study]
"""
import argparse
import json
import math
import os
import subprocess
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROFILES = {"vgg16": "perf/results/gpu/run1/vgg16_profile_cuda.json",
            "resnet20": "jobs/profiles/resnet20.cpu.json",
            "inception": "jobs/profiles/inception.cpu.json"}
CPU_PACKING = "jobs/profiles/packing.cpu.json"
AMP_LIMITS = ("1.5", "2", "none")
BACKGROUND_BATCH = 32
COLUMNS = ("model", "device", "packing", "ranks", "global_batch", "mode", "amp_limit", "iteration_ms",
           "iteration_vs_dp", "fg_vs_dp", "bg_share", "cluster_throughput_vs_dp")


def run(cmd):
    return subprocess.run(cmd, check=True, capture_output=True, text=True,
                          env=dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1",
                                   OPENBLAS_CORETYPE=os.environ.get("OPENBLAS_CORETYPE", "Haswell")))


def profile_of(args, model):
    """The model's layer profile: the shipped one, or DIR/MODEL.json from --profile-dir (measured if missing)."""
    if not args.profile_dir:
        return os.path.join(ROOT, PROFILES[model])
    path = os.path.join(args.profile_dir, f"{model}.json")
    if not os.path.exists(path):
        os.makedirs(args.profile_dir, exist_ok=True)
        print(f"measuring the layer profile of {model} into {path}", flush=True)
        run([args.burstpool, "profile", f"{ROOT}/jobs/models/{model}.ini", "--batches", "1,2,4,8,16,32",
             "--warmup", "1", "--repeats", "5", "--out", path])
    return path


def network_flags(args):
    """The plan's and simulator's network: a measured profile, or the stated bandwidth and latency."""
    if args.network:
        return ["--network", args.network]
    return ["--bandwidth", str(args.bandwidth), "--latency", str(args.latency)]


def network_text(args):
    if not args.network:
        return f"{args.bandwidth:g} GB/s and {args.latency:g} us for point-to-point and allreduce links"
    net = json.load(open(args.network))
    fit = lambda link: (f"{8e-9 * net[link]['bandwidth_bytes_per_s']:.2f} Gbit/s and "
                        f"{1e6 * net[link]['latency_s']:.0f} us")
    return (f"the measured network profile {os.path.basename(args.network)}: point-to-point {fit('p2p')}, "
            f"allreduce {fit('allreduce')}")


def gpu_bound_packing(tmp):
    path = os.path.join(tmp, "packing.gpu-bound.json")
    json.dump({"format": "burstpool-packing", "device": "cuda", "base_share": 0, "idle_efficiency": 1,
               "busy_efficiency": 1, "foreground_slowdown": 1,
               "calibration": "UPPER BOUND, not measured: every idle moment and all unused kernel capacity, free"},
              open(path, "w"))
    return path


def background_job(tmp, model):
    path = os.path.join(tmp, f"bg-{model}.ini")
    open(path, "w").write(f"[job]\nmodel = {ROOT}/jobs/models/{model}.ini\n[data]\nsource = synthetic\n"
                          f"synthetic_test_samples = 0\n[train]\nbatch_size = {BACKGROUND_BATCH}\n")
    return path


def shown_path(args, text):
    """A command word as the JSON keeps it: no machine's paths (the profile folder and network file by name)."""
    if args.profile_dir:
        text = text.replace(os.path.abspath(args.profile_dir), "$PROFILE_DIR").replace(args.profile_dir, "$PROFILE_DIR")
    if args.network:
        text = text.replace(os.path.abspath(args.network), "$NETWORK").replace(args.network, "$NETWORK")
    return text.replace(ROOT + "/", "")


def point(args, tmp, model, profile, packing, ranks, batch):
    """Rows of every mode at one (model, ranks, global batch), and the commands that made them."""
    mfile, net = f"{ROOT}/jobs/models/{model}.ini", network_flags(args)
    bg = ["--background", background_job(tmp, model), "--background-profile", profile, "--background-independent",
          "--packing", packing]
    plans = {"dp": ([args.burstpool, "plan", "--data-parallel", mfile], None)}
    for a in AMP_LIMITS:
        plans[f"burst {a}"] = ([args.burstpool, "plan", mfile, "--profile", profile, *net, "--amp-limit", a], a)
    rows, commands = [], []
    for name, (plan_cmd, amp) in plans.items():
        plan = os.path.join(tmp, "plan.json")
        sim = os.path.join(tmp, "sim.json")
        cmds = [plan_cmd + ["--ranks", str(ranks), "--global-batch", str(batch), "--out", plan],
                [args.burstpool, "simulate", plan, "--model", mfile, "--profile", profile, *net, *bg, "--out", sim]]
        for c in cmds:
            run(c)
        commands.append(" ".join(shown_path(args, x.replace(args.burstpool, "build/burstpool").replace(tmp, "$TMP"))
                                 for x in cmds[0] + ["&&"] + cmds[1]))
        s = json.load(open(sim))
        b = s["background"]
        dp_rate = b["foreground_data_parallel_samples_per_second"]
        alone = {"iteration_ms": 1e3 * s["iteration_s"],
                 "iteration_vs_dp": dp_rate / b["foreground_alone_samples_per_second"],
                 "fg_vs_dp": b["foreground_alone_samples_per_second"] / dp_rate, "bg_share": 0.0,
                 "cluster_throughput_vs_dp": b["foreground_alone_samples_per_second"] / dp_rate}
        shared = dict(alone, fg_vs_dp=b["foreground_shared_samples_per_second"] / dp_rate,
                      bg_share=b["shared_samples_per_second"] / b["alone_samples_per_second"],
                      cluster_throughput_vs_dp=b["cluster_throughput_vs_data_parallel"])
        base = {"model": model, "device": json.load(open(profile))["device"], "packing": b["packing"]["calibration"],
                "ranks": ranks, "global_batch": batch, "amp_limit": amp or ""}
        rows.append(dict(base, mode=name, **alone))
        rows.append(dict(base, mode=name + "+bg", **shared))
    return rows, commands


def table(rows):
    lines = ["| model | global batch | ranks | mode | iteration ms | iteration / dp | fg rate / dp | bg share | "
             "**cluster throughput vs dp** |", "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['model']} | {r['global_batch']} | {r['ranks']} | {r['mode']} | {r['iteration_ms']:.2f} | "
                     f"{r['iteration_vs_dp']:.2f} | {r['fg_vs_dp']:.2f} | {r['bg_share']:.2f} | "
                     f"{r['cluster_throughput_vs_dp']:.2f} |")
    return lines


def best_modes(rows):
    """Per (model, batch, ranks): the best mode and its figure."""
    best = {}
    for r in rows:
        key = (r["model"], r["global_batch"], r["ranks"])
        if key not in best or r["cluster_throughput_vs_dp"] > best[key]["cluster_throughput_vs_dp"]:
            best[key] = r
    return best


def plot(rows, models, batches, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(len(batches), len(models), figsize=(5 * len(models), 3.6 * len(batches)), squeeze=False)
    modes = sorted({r["mode"] for r in rows}, key=lambda m: (m.replace("+bg", ""), m.endswith("+bg")))
    for i, batch in enumerate(batches):
        for j, model in enumerate(models):
            ax = axes[i][j]
            for mode in modes:
                pts = sorted((r["ranks"], r["cluster_throughput_vs_dp"]) for r in rows
                             if r["model"] == model and r["global_batch"] == batch and r["mode"] == mode)
                if pts:
                    ax.plot(*zip(*pts), marker="o", ms=3, label=mode, linestyle="--" if mode.endswith("+bg") else "-")
            ax.axhline(1.0, color="black", lw=0.8)
            ax.set_xscale("log", base=2)
            device = next((r["device"] for r in rows if r["model"] == model), "")
            bound = " (GPU: bg is an upper bound)" if device == "cuda" else ""
            ax.set_title(f"{model}, {device} profile, global batch {batch}{bound}", fontsize=9)
            ax.set_xlabel("ranks")
            ax.set_ylabel("cluster throughput vs data parallel")
            ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=7)
    fig.suptitle("SIMULATED: cluster throughput against data parallel alone (burstpool plan + simulate)", fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=90)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--models", default="vgg16,resnet20,inception")
    ap.add_argument("--ranks", default="8,16,32,64,128,256,512,1024")
    ap.add_argument("--batches", default="32,128,256")
    ap.add_argument("--bandwidth", type=float, default=25.0, help="GB/s between nodes, both links")
    ap.add_argument("--latency", type=float, default=5.0, help="microseconds")
    ap.add_argument("--profile-dir", help="layer profiles DIR/MODEL.json, measured there if missing")
    ap.add_argument("--network", help="a network profile (burstpool profile --network) instead of the two above")
    ap.add_argument("--out", default=os.path.join(ROOT, "perf", "results", "cluster_study"))
    ap.add_argument("--no-png", action="store_true")
    args = ap.parse_args()
    args.burstpool = os.path.join(args.build, "burstpool")
    models = args.models.split(",")
    ranks = [int(x) for x in args.ranks.split(",")]
    batches = [int(x) for x in args.batches.split(",")]
    tmp = tempfile.mkdtemp()
    bound = gpu_bound_packing(tmp)
    rows, commands = [], {}
    profiles = {model: profile_of(args, model) for model in models}  # measured once, where --profile-dir lacks one
    for model in models:
        profile = profiles[model]
        device = json.load(open(profile))["device"]
        packing = os.path.join(ROOT, CPU_PACKING) if device == "cpu" else bound
        for batch in batches:
            for n in ranks:
                r, c = point(args, tmp, model, profile, packing, n, batch)
                rows += r
                commands[f"{model} B={batch} N={n}"] = c
                print(f"{model} batch {batch} ranks {n}: " + ", ".join(
                    f"{x['mode']} {x['cluster_throughput_vs_dp']:.2f}" for x in r), flush=True)
    network = network_text(args)
    described = {m: os.path.relpath(path, ROOT) if not args.profile_dir else
                 f"{os.path.basename(path)} (measured on this machine, 1 thread)" for m, path in profiles.items()}
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    json.dump({"simulated": True, "network": network, "background": f"the foreground's model, a replica per rank at "
               f"batch {BACKGROUND_BATCH}", "columns": COLUMNS, "rows": rows, "commands": commands},
              open(args.out + ".json", "w"), indent=1)
    best = best_modes(rows)
    shown = lambda path: os.path.relpath(path, ROOT) if os.path.abspath(path).startswith(ROOT) else os.path.basename(path)
    variant = "".join([f" --models {args.models} --profile-dir {shown(args.profile_dir)}" if args.profile_dir else "",
                       f" --network {shown(args.network)}" if args.network else ""])
    lines = ["# Cluster throughput against data parallelism, SIMULATED", "",
             f"Command: `python3 perf/cluster_study.py{variant}` (models {', '.join(models)}; ranks {args.ranks}; global "
             f"batches {args.batches}). Network model: {network}. Every figure is predicted by `burstpool plan` and "
             "`burstpool simulate --background` from measured layer profiles; none is a measured run. The exact "
             "commands of every point are in the JSON beside this file.", "",
             "Profiles: " + "; ".join(f"{m}: {described[m]}" for m in models) + ".", "",
             "Checked so far: the simulator's step times against measured runs on 2 ranks (and 4 sharing 2 cores), "
             "over shared memory and on links shaped to 10, 3 and 1 Gbit/s per rank (perf/results/shaped_study.md, "
             "with the errors per point); nothing above 4 ranks, and the background's predicted samples/s there were "
             "far off (the CPU packing model), so the '+bg' figures are the least trustworthy.", "",
             f"Background: the foreground's model, a replica per rank at batch {BACKGROUND_BATCH}, no network. "
             f"Packing: CPU profiles use the model fitted to measured 2-rank runs ({CPU_PACKING}); the GPU profile "
             "has no measured packing yet, so its '+bg' figures give the background every idle moment and all the "
             "capacity that small kernels leave unused, at no cost to the foreground: **an upper bound**.", "",
             "## Best mode per point", "", "| model | global batch | " + " | ".join(f"{n} ranks" for n in ranks) + " |",
             "|---|---|" + "---|" * len(ranks)]
    for model in models:
        for batch in batches:
            cells = [f"{best[(model, batch, n)]['mode']} {best[(model, batch, n)]['cluster_throughput_vs_dp']:.2f}"
                     for n in ranks]
            lines.append(f"| {model} | {batch} | " + " | ".join(cells) + " |")
    lines += ["", "## Every point", ""] + table(rows)
    open(args.out + ".md", "w").write("\n".join(lines) + "\n")
    if not args.no_png:
        plot(rows, models, batches, args.out + ".png")
    print("\n".join(lines[:12 + len(models) * len(batches)]))


if __name__ == "__main__":
    main()

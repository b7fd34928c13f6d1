#!/usr/bin/env python3
"""Strong scaling on this machine: lenet5 and vgg_small at a fixed global
batch of 256, data parallel on 1 and 2 ranks (one thread per rank), against
PyTorch DistributedDataParallel (gloo, 2 processes, one thread each) on the
same model and batch; then one burst plan on 2 ranks with per-layer transfer
and allreduce times ([parallel] layer_timing, which reduces each layer's
gradients on its own so they can be attributed).

Rounds alternate the peers; tables report medians. Parallel efficiency =
samples/s on 2 ranks / (2 x samples/s on 1 rank).

With --baseline BUILD a second build runs beside the first in every round
(1 rank, 2 ranks, and the burst plan without per-layer timing), for
comparing two commits on a noisy machine; --skip-ddp leaves PyTorch out.

Usage: perf/strong_scaling.py [--build build] [--rounds 5] [--out perf/results/strong_scaling]
                              [--baseline BUILD [--baseline-label TEXT]] [--skip-ddp]
"""
import argparse
import json
import os
import statistics
import subprocess
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STEPS = {"lenet5": 150, "vgg_small": 12}
BATCH = 256
ENV = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", OMPI_ALLOW_RUN_AS_ROOT="1",
           OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMPI_MCA_mpi_yield_when_idle="1")


def job_file(tmp, model):
    path = os.path.join(tmp, f"{model}.ini")
    with open(path, "w") as f:
        f.write(f"[job]\nmodel = {ROOT}/jobs/models/{model}.ini\n[data]\nsource = synthetic\n"
                "synthetic_train_samples = 2048\nsynthetic_test_samples = 0\n"
                f"[train]\nbatch_size = {BATCH}\nlog_every = 100000\n[optimizer]\nlr = 0.01\n")
    return path


def burstpool(build, tmp, model, ranks, extra=()):
    metrics = os.path.join(tmp, "m.json")
    cmd = [f"{build}/burstpool", "train", job_file(tmp, model), "--steps", str(STEPS[model]), "--metrics", metrics,
           *extra]
    if ranks > 1:
        cmd = ["mpirun", "-np", str(ranks), "--oversubscribe", *cmd]
    subprocess.run(cmd, env=ENV, check=True, capture_output=True, text=True)
    return json.load(open(metrics))


def ddp(model, procs):
    out = subprocess.run(["/usr/bin/python3", f"{ROOT}/perf/torch_ddp.py", f"{ROOT}/jobs/models/{model}.ini",
                          "--procs", str(procs), "--global-batch", str(BATCH), "--steps", str(STEPS[model])],
                         env=ENV, check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])["samples_per_second"]


def burst_plan(build, tmp, model):
    """Convolutions data parallel on both ranks; the classifier head on rank 0 only."""
    path = os.path.join(tmp, "burst.json")
    subprocess.run([f"{build}/burstpool", "plan", "--data-parallel", f"{ROOT}/jobs/models/{model}.ini", "--ranks", "2",
                    "--global-batch", str(BATCH), "--out", path], env=ENV, check=True, capture_output=True)
    plan = json.load(open(path))
    head = False
    for layer in plan["layers"]:
        head = head or layer["name"].startswith("fc")
        if head:
            layer["ranks"] = [0]
    json.dump(plan, open(path, "w"))
    return path


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--out", default=os.path.join(ROOT, "perf/results/strong_scaling"))
    ap.add_argument("--baseline", help="another burstpool build folder, run beside --build each round")
    ap.add_argument("--baseline-label", default="baseline", help="what the baseline build is, for the report")
    ap.add_argument("--skip-ddp", action="store_true", help="leave PyTorch DDP out")
    ap.add_argument("--blas-autodetect", action="store_true",
                    help="unset OPENBLAS_CORETYPE/OPENBLAS_L2_SIZE for every command (see perf/README.md)")
    args = ap.parse_args()
    if args.blas_autodetect:
        ENV.pop("OPENBLAS_CORETYPE", None)
        ENV.pop("OPENBLAS_L2_SIZE", None)
    rows, layer_tables = [], {}
    with tempfile.TemporaryDirectory() as tmp:
        for model in STEPS:
            runs = {k: [] for k in ("one_rank", "two_ranks", "ddp", "burst", "base_one_rank", "base_two_ranks",
                                    "base_burst")}
            plan = burst_plan(args.build, tmp, model)
            for r in range(args.rounds):
                builds = [("", args.build)] + ([("base_", args.baseline)] if args.baseline else [])
                for prefix, build in builds[::1 if r % 2 == 0 else -1]:  # alternate which build goes first
                    runs[prefix + "one_rank"].append(burstpool(build, tmp, model, 1)["samples_per_second"])
                    runs[prefix + "two_ranks"].append(burstpool(build, tmp, model, 2)["samples_per_second"])
                    if args.baseline:
                        runs[prefix + "burst"].append(
                            burstpool(build, tmp, model, 2, ["--plan", plan])["samples_per_second"])
                if not args.skip_ddp:
                    runs["ddp"].append(ddp(model, 2))
                print(f"{model} round {r + 1}: " + ", ".join(f"{k} {v[-1]:.0f}/s" for k, v in runs.items() if v),
                      flush=True)
            med = {k: statistics.median(v) if v else float("nan") for k, v in runs.items()}
            row = {"model": model, "global_batch": BATCH, "one_rank": med["one_rank"], "two_ranks": med["two_ranks"],
                   "ddp_two_procs": med["ddp"], "runs": runs}
            row["efficiency"] = row["two_ranks"] / (2 * row["one_rank"])
            row["vs_ddp"] = row["two_ranks"] / row["ddp_two_procs"]
            if args.baseline:
                for k in ("one_rank", "two_ranks", "burst"):
                    row[f"baseline_{k}"] = med["base_" + k]
                    row[f"{k}_vs_baseline"] = statistics.median(
                        [a / b for a, b in zip(runs[k], runs["base_" + k])])  # per round: side by side
            rows.append(row)
            m = burstpool(args.build, tmp, model, 2, ["--plan", plan,
                                                       "--set", "parallel.layer_timing=true"])
            layer_tables[model] = {"samples_per_second": m["samples_per_second"], "layers": m["per_layer"],
                                   "per_rank": m["per_rank"]}
    kernel = "autodetected" if args.blas_autodetect else os.environ.get("OPENBLAS_CORETYPE", "autodetected")
    lines = [f"Strong scaling at global batch {BATCH}, synthetic data, one thread per rank, median of {args.rounds} "
             f"alternating rounds. OpenBLAS kernel: {kernel}.", "",
             "| model | 1 rank samples/s | 2 ranks samples/s | efficiency | DDP 2 procs samples/s | burstpool / DDP |",
             "|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['model']} | {r['one_rank']:.0f} | {r['two_ranks']:.0f} | {100 * r['efficiency']:.0f}% | "
                     f"{r['ddp_two_procs']:.0f} | {r['vs_ddp']:.2f} |")
    if args.baseline:
        lines += ["", f"Against the baseline ({args.baseline_label}), run beside it in every round (the build going "
                  "first alternating); 'ratio' is the median over rounds of this build's samples/s over the "
                  "baseline's in the same round:", "",
                  "| model | run | this build samples/s | baseline samples/s | ratio |", "|---|---|---|---|---|"]
        for r in rows:
            for k, what in (("one_rank", "1 rank"), ("two_ranks", "2 ranks, data parallel"),
                            ("burst", "2 ranks, burst plan")):
                mine = statistics.median(r["runs"][k])
                lines.append(f"| {r['model']} | {what} | {mine:.0f} | {r[f'baseline_{k}']:.0f} | "
                             f"{r[f'{k}_vs_baseline']:.3f} |")
    for model, t in layer_tables.items():
        lines += ["", f"Burst plan for {model} on 2 ranks (convolutions on both, classifier head on rank 0), "
                  f"{t['samples_per_second']:.0f} samples/s with per-layer reductions; milliseconds per step, "
                  "largest over ranks:", "", "| layer | ranks | transfer ms | allreduce ms |", "|---|---|---|---|"]
        for l in t["layers"]:
            if l["transfer_seconds_per_step"] > 1e-6 or l["allreduce_seconds_per_step"] > 1e-6:
                lines.append(f"| {l['layer']} | {l['ranks']} | {1e3 * l['transfer_seconds_per_step']:.3f} | "
                             f"{1e3 * l['allreduce_seconds_per_step']:.3f} |")
    text = "\n".join(lines) + "\n"
    print(text)
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    open(args.out + ".md", "w").write(text)
    json.dump({"rows": rows, "burst": layer_tables}, open(args.out + ".json", "w"), indent=2)


if __name__ == "__main__":
    main()

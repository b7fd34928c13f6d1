#!/usr/bin/env python3
"""Single-thread training throughput: burstpool against PyTorch (CPU), side by
side in one run.

For each model (mlp, lenet5, vgg_small) at batch 64 on synthetic data, both
peers train the same architecture with SGD+momentum for the same number of
steps, one thread each (OMP_NUM_THREADS=1, torch.set_num_threads(1)). Rounds
alternate burstpool and PyTorch so machine noise hits both; the table reports
medians over the rounds and the ratio of medians. burstpool's achieved GFLOP/s
(3 x forward FLOPs x samples/s) is compared with the single-thread SGEMM rate
of the same OpenBLAS (perf/sgemm_rate.cpp). Each process's peak resident
memory (wait4's ru_maxrss: the whole process, interpreter and libraries
included) is reported beside its rate.

--blas-autodetect unsets OPENBLAS_CORETYPE/OPENBLAS_L2_SIZE for every command
(both peers), letting OpenBLAS pick its kernel for this CPU; --blas-coretype
NAME sets it for both (SkylakeX, say: PyTorch's linear layers run on
OpenBLAS, so this is its strongest setting where OpenBLAS picks a weak kernel
by itself). The report names the kernel in use either way. In builds with
oneDNN, burstpool's GEMMs run on oneDNN's sgemm, and "% of SGEMM" is against
that library's rate (both rates are reported).

--baseline DIR adds a second burstpool build (a previous commit, say) to
every round, beside the first: the table gains the ratio of their medians,
for showing that a change costs nothing. --skip-pytorch leaves PyTorch out.

Usage: perf/single_thread.py [--build build] [--rounds 5] [--out perf/results/single_thread]
                             [--baseline OTHER_BUILD] [--skip-pytorch]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

from report import write_report

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STEPS = {"mlp": 600, "lenet5": 400, "vgg_small": 40}


def run(cmd, env):
    out = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True)
    return out.stdout


def run_peak(cmd, env):
    """stdout and peak resident memory (MiB) of one command, from wait4's rusage."""
    with tempfile.TemporaryFile("w+") as out:
        proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.DEVNULL, text=True)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode != 0:
            raise subprocess.CalledProcessError(proc.returncode, cmd)
        out.seek(0)
        return out.read(), usage.ru_maxrss / 1024.0


def burstpool_rate(build, model, steps, env, tmp):
    job = os.path.join(tmp, "job.ini")
    with open(job, "w") as f:
        f.write(f"[job]\nmodel = {ROOT}/jobs/models/{model}.ini\n[data]\nsource = synthetic\n"
                "synthetic_train_samples = 1024\nsynthetic_test_samples = 0\n"
                "[train]\nbatch_size = 64\nlog_every = 100000\n[optimizer]\nlr = 0.01\n")
    metrics = os.path.join(tmp, "m.json")
    _, peak = run_peak([f"{build}/burstpool", "train", job, "--steps", str(steps), "--metrics", metrics], env)
    m = json.load(open(metrics))
    return m["samples_per_second"], m["achieved_gflops"], peak


def torch_rate(model, steps, env):
    out, peak = run_peak(["/usr/bin/python3", f"{ROOT}/perf/torch_peer.py", f"{ROOT}/jobs/models/{model}.ini",
                          "--batch", "64", "--steps", str(steps), "--threads", "1"], env)
    return json.loads(out.strip().splitlines()[-1])["samples_per_second"], peak


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--blas-autodetect", action="store_true")
    ap.add_argument("--blas-coretype", default="", help="OPENBLAS_CORETYPE for every command (both peers)")
    ap.add_argument("--out", default=os.path.join(ROOT, "perf/results/single_thread"))
    ap.add_argument("--baseline", default="", help="another burstpool build folder, run beside --build each round")
    ap.add_argument("--baseline-label", default="", help="what the baseline build is, for the report")
    ap.add_argument("--skip-pytorch", action="store_true")
    args = ap.parse_args()
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    if args.blas_autodetect:
        env.pop("OPENBLAS_CORETYPE", None)
        env.pop("OPENBLAS_L2_SIZE", None)
    if args.blas_coretype:
        env["OPENBLAS_CORETYPE"] = args.blas_coretype
    kernel_env = dict(env, OPENBLAS_VERBOSE="2")
    sgemm_out = subprocess.run([f"{args.build}/bp_sgemm_rate"], env=kernel_env, capture_output=True, text=True)
    kernel = next((l.split(":", 1)[1].strip() for l in (sgemm_out.stdout + sgemm_out.stderr).splitlines()
                   if l.startswith("Core:")), "unknown")
    build_line = run([f"{args.build}/burstpool", "--version"], env).splitlines()[:2]
    sgemm_runs = [{k: float(v) for k, v in (line.split() for line in run([f"{args.build}/bp_sgemm_rate"], env).splitlines())}
                  for _ in range(3)]
    openblas_rate = statistics.median(r["sgemm_gflops"] for r in sgemm_runs)
    onednn_rate = statistics.median(r.get("onednn_sgemm_gflops", float("nan")) for r in sgemm_runs)
    # The rate of the library burstpool's GEMMs run on.
    gemm_on_onednn = "onednn_sgemm_gflops" in sgemm_runs[0]
    sgemm_rate = onednn_rate if gemm_on_onednn else openblas_rate
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for model, steps in STEPS.items():
            bp, torch, gflops, base, bp_peak, torch_peak = [], [], [], [], [], []
            for r in range(args.rounds):
                rate, gf, peak = burstpool_rate(args.build, model, steps, env, tmp)
                bp.append(rate)
                gflops.append(gf)
                bp_peak.append(peak)
                if args.baseline:
                    base.append(burstpool_rate(args.baseline, model, steps, env, tmp)[0])
                if not args.skip_pytorch:
                    torch_samples, peak = torch_rate(model, steps, env)
                    torch.append(torch_samples)
                    torch_peak.append(peak)
                print(f"{model} round {r + 1}: burstpool {bp[-1]:.0f}/s"
                      + (f", baseline {base[-1]:.0f}/s" if base else "")
                      + (f", pytorch {torch[-1]:.0f}/s" if torch else ""), flush=True)
            median = lambda runs: statistics.median(runs) if runs else float("nan")
            row = {"model": model, "steps": steps, "burstpool_samples_per_second": median(bp),
                   "pytorch_samples_per_second": median(torch), "baseline_samples_per_second": median(base),
                   "burstpool_gflops": median(gflops), "burstpool_runs": bp, "pytorch_runs": torch,
                   "burstpool_peak_rss_mib": median(bp_peak), "pytorch_peak_rss_mib": median(torch_peak),
                   "baseline_runs": base}
            row["ratio"] = row["burstpool_samples_per_second"] / row["pytorch_samples_per_second"]
            row["vs_baseline"] = row["burstpool_samples_per_second"] / row["baseline_samples_per_second"]
            rows.append(row)
    result = {"openblas_kernel": kernel, "sgemm_gflops_single_thread": sgemm_rate,
              "openblas_sgemm_gflops": openblas_rate, "onednn_sgemm_gflops": onednn_rate, "rounds": args.rounds,
              "batch": 64, "blas_autodetect": args.blas_autodetect,
              "blas_coretype": args.blas_coretype, "build": build_line, "baseline": args.baseline_label or args.baseline,
              "models": rows}
    lines = [f"Single-thread training, batch 64, synthetic data, median of {args.rounds} alternating rounds.",
             f"burstpool: {' / '.join(build_line)}.",
             f"OpenBLAS kernel: {kernel}; single-thread SGEMM (512^3): OpenBLAS {openblas_rate:.1f} GFLOP/s"
             + (f", oneDNN {onednn_rate:.1f} GFLOP/s (burstpool's GEMMs; % of SGEMM is against it)."
                if gemm_on_onednn else " (burstpool's GEMMs)."), "",
             "| model | steps | burstpool samples/s | PyTorch samples/s | ratio | burstpool GFLOP/s | % of SGEMM |"
             " peak RSS MiB burstpool | PyTorch |"
             + (" baseline samples/s | against baseline |" if args.baseline else ""),
             "|---|---|---|---|---|---|---|---|---|" + ("---|---|" if args.baseline else "")]
    for r in rows:
        lines.append(f"| {r['model']} | {r['steps']} | {r['burstpool_samples_per_second']:.0f} | "
                     f"{r['pytorch_samples_per_second']:.0f} | {r['ratio']:.2f} | {r['burstpool_gflops']:.1f} | "
                     f"{100 * r['burstpool_gflops'] / sgemm_rate:.0f}% | {r['burstpool_peak_rss_mib']:.0f} | "
                     f"{r['pytorch_peak_rss_mib']:.0f} |"
                     + (f" {r['baseline_samples_per_second']:.0f} | {r['vs_baseline']:.3f} |" if args.baseline else ""))
    if args.baseline:
        lines += ["", f"Baseline: {args.baseline_label or args.baseline}, run beside it in every round."]
    write_report(args.out, lines, result)


if __name__ == "__main__":
    main()

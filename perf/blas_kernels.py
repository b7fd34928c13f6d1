#!/usr/bin/env python3
"""Single-thread SGEMM (512^3) of OpenBLAS under each kernel choice, and of
oneDNN's sgemm, side by side: `bp_sgemm_rate` in alternating rounds with
OPENBLAS_CORETYPE unset (OpenBLAS's own detection), set to the empty string,
SkylakeX and Haswell. Reports the kernel OpenBLAS names (OPENBLAS_VERBOSE=2)
and median GFLOP/s of each.

Usage: perf/blas_kernels.py [--build build] [--rounds 5] [--out perf/results/blas_kernels]
"""
import argparse
import os
import statistics
import subprocess

from report import write_report

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SETTINGS = {"unset": None, "empty string": "", "SkylakeX": "SkylakeX", "Haswell": "Haswell"}


def measure(build, coretype):
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", OPENBLAS_VERBOSE="2")
    env.pop("OPENBLAS_CORETYPE", None)
    if coretype is not None:
        env["OPENBLAS_CORETYPE"] = coretype
    out = subprocess.run([f"{build}/bp_sgemm_rate"], env=env, capture_output=True, text=True, check=True)
    text = out.stdout + out.stderr
    kernel = next((l.split(":", 1)[1].strip() for l in text.splitlines() if l.startswith("Core:")), "unknown")
    rates = {l.split()[0]: float(l.split()[1]) for l in out.stdout.splitlines() if "gflops" in l}
    return kernel, rates


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--out", default=os.path.join(ROOT, "perf/results/blas_kernels"))
    args = ap.parse_args()
    runs = {name: [] for name in SETTINGS}
    onednn, kernels = [], {}
    for _ in range(args.rounds):
        for name, coretype in SETTINGS.items():
            kernel, rates = measure(args.build, coretype)
            kernels[name] = kernel
            runs[name].append(rates["sgemm_gflops"])
            if "onednn_sgemm_gflops" in rates:
                onednn.append(rates["onednn_sgemm_gflops"])
    lines = [f"Single-thread SGEMM, n = 512, median of {args.rounds} alternating rounds (`perf/blas_kernels.py`).", "",
             "| library, OPENBLAS_CORETYPE | kernel named | GFLOP/s (median) | all rounds |", "|---|---|---|---|"]
    for name in SETTINGS:
        lines.append(f"| OpenBLAS, {name} | {kernels[name]} | {statistics.median(runs[name]):.1f} | "
                     + ", ".join(f"{r:.0f}" for r in runs[name]) + " |")
    if onednn:
        lines.append(f"| oneDNN sgemm | (its JIT for this CPU) | {statistics.median(onednn):.1f} | "
                     + ", ".join(f"{r:.0f}" for r in onednn) + " |")
    write_report(args.out, lines, {"rounds": args.rounds, "kernels": kernels, "openblas": runs, "onednn": onednn})


if __name__ == "__main__":
    main()

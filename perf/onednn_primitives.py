#!/usr/bin/env python3
"""What burstpool and PyTorch ask oneDNN for in a training step: both train
the same model (batch 64, one thread, a few steps) with ONEDNN_VERBOSE=1, and
this sums the library's own per-primitive timings per step: convolutions by
direction, and the layout reorders around them. Both link the same oneDNN
(Debian's), so the kernels are the same; the count and time of reorders is
what the two frameworks' use of it adds.

Rounds alternate the two peers; each cell is the median over rounds.

Usage: perf/onednn_primitives.py [--build build] [--model vgg_small] [--steps 6] [--rounds 5]
                                 [--out perf/results/onednn_primitives]
"""
import argparse
import collections
import os
import statistics
import subprocess
import tempfile

from report import write_report

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def summarise(text, steps):
    """{(primitive, direction): [calls per step, ms per step]} from verbose lines."""
    out = collections.defaultdict(lambda: [0.0, 0.0])
    for line in text.splitlines():
        if not line.startswith("onednn_verbose,exec,cpu,"):
            continue
        fields = line.split(",")
        key = f"{fields[3]} {fields[5]}" if fields[5] != "undef" else fields[3]
        out[key][0] += 1 / steps
        out[key][1] += float(fields[-1]) / steps
    return dict(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--model", default="vgg_small")
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--out", default=os.path.join(ROOT, "perf/results/onednn_primitives"))
    args = ap.parse_args()
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", ONEDNN_VERBOSE="1")
    model = os.path.join(ROOT, "jobs/models", f"{args.model}.ini")
    rounds = {"burstpool": [], "PyTorch": []}
    with tempfile.TemporaryDirectory() as tmp:
        job = os.path.join(tmp, "job.ini")
        with open(job, "w") as f:
            f.write(f"[job]\nmodel = {model}\n[data]\nsource = synthetic\nsynthetic_train_samples = 1024\n"
                    "synthetic_test_samples = 0\n[train]\nbatch_size = 64\nlog_every = 100000\n[optimizer]\nlr = 0.01\n")
        for _ in range(args.rounds):
            bp = subprocess.run([f"{args.build}/burstpool", "train", job, "--steps", str(args.steps)], env=env,
                                capture_output=True, text=True, check=True).stdout
            pt = subprocess.run(["/usr/bin/python3", os.path.join(ROOT, "perf/torch_peer.py"), model, "--batch", "64",
                                 "--steps", str(args.steps), "--threads", "1"], env=env, capture_output=True,
                                text=True, check=True).stdout
            rounds["burstpool"].append(summarise(bp, args.steps))
            rounds["PyTorch"].append(summarise(pt, args.steps))
    peers = {name: {k: [statistics.median(r.get(k, [0, 0])[i] for r in runs) for i in (0, 1)]
                    for k in set().union(*runs)} for name, runs in rounds.items()}
    keys = sorted(set(peers["burstpool"]) | set(peers["PyTorch"]))
    lines = [f"oneDNN primitives per training step of {args.model}, batch 64, one thread, over {args.steps} steps "
             "(`perf/onednn_primitives.py`; the library's own timings, ONEDNN_VERBOSE=1), "
             f"medians of {args.rounds} alternating rounds.", "",
             "| primitive | burstpool calls | burstpool ms | PyTorch calls | PyTorch ms |", "|---|---|---|---|---|"]
    for k in keys:
        b, p = peers["burstpool"].get(k, [0, 0]), peers["PyTorch"].get(k, [0, 0])
        lines.append(f"| {k} | {b[0]:.0f} | {b[1]:.2f} | {p[0]:.0f} | {p[1]:.2f} |")
    write_report(args.out, lines, peers)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Memory per rank when training from an HDF5 file larger than a rank's share:
[data] read = whole (every rank holds every image) against read = batches
(each rank reads only the samples of its share of each batch).

Writes a synthetic float32 training file of --mb MiB (28x28 images, 10
classes, learnable: a template per class plus noise), trains the shipped MLP
on it data parallel on --ranks ranks for --steps steps in each mode, and
reports per rank the peak resident memory (the metrics' per_rank
peak_resident_bytes) and samples/s; then checks that both modes end with the
same checkpoint, bit for bit. --rounds alternates the modes and reports
medians.

Usage: data_memory.py [--mb 1024] [--ranks 2] [--steps 200] [--rounds 3]
                      [--binary build/burstpool] [--out perf/results/data_memory]
Needs h5py and numpy (Debian: python3-h5py) and mpirun.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHAPE = (1, 28, 28)


def write_data(path, mb, seed=1):
    """A float32 images dataset of about `mb` MiB, written in pieces."""
    import h5py
    import numpy as np
    rng = np.random.default_rng(seed)
    per = 4 * SHAPE[0] * SHAPE[1] * SHAPE[2]
    n = max(256, mb * (1 << 20) // per)
    templates = rng.normal(size=(10,) + SHAPE).astype("float32")
    with h5py.File(path, "w") as f:
        images = f.create_dataset("images", (n,) + SHAPE, dtype="float32")
        labels = rng.integers(0, 10, n)
        f["labels"] = labels.astype("int32")
        piece = 16384
        for start in range(0, n, piece):
            end = min(n, start + piece)
            noise = rng.normal(scale=1.0, size=(end - start,) + SHAPE).astype("float32")
            images[start:end] = templates[labels[start:end]] + noise
    return n


def train(args, folder, mode, tag):
    job = os.path.join(folder, f"{mode}.ini")
    with open(job, "w") as f:
        f.write(f"[job]\nmodel = {ROOT}/jobs/models/mlp.ini\nthreads = 1\n[data]\nsource = hdf5\n"
                f"train_file = {folder}/train.h5\nread = {mode}\n[train]\nbatch_size = {args.batch}\n"
                f"steps = {args.steps}\nlog_every = {max(1, args.steps // 4)}\n[optimizer]\nlr = 0.01\n")
    metrics, ckpt = os.path.join(folder, f"{mode}-{tag}.json"), os.path.join(folder, f"{mode}-{tag}.h5")
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_mpi_yield_when_idle="1", OMP_NUM_THREADS="1")
    cmd = ["mpirun", "-np", str(args.ranks), "--oversubscribe", args.binary, "train", job, "--metrics", metrics,
           "--checkpoint", ckpt]
    run = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if run.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{run.stdout[-2000:]}{run.stderr[-2000:]}")
    m = json.load(open(metrics))
    return {"samples_per_second": m["samples_per_second"],
            "peak_resident_mib": [r["peak_resident_bytes"] / (1 << 20) for r in m["per_rank"]], "checkpoint": ckpt}


def same_checkpoint(a, b):
    """Training state equal bit for bit (the run's record of seconds aside)."""
    return subprocess.run(["h5diff", "-d", "0", "--exclude-path", "/history", a, b],
                          capture_output=True).returncode == 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=int, default=1024)
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--binary", default=os.path.join(ROOT, "build", "burstpool"))
    ap.add_argument("--out", default="")
    ap.add_argument("--modes", default="whole,batches", help="comma-separated [data] read modes to run")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        n = write_data(os.path.join(folder, "train.h5"), args.mb)
        file_mib = os.path.getsize(os.path.join(folder, "train.h5")) / (1 << 20)
        modes = args.modes.split(",")
        runs = {mode: [] for mode in modes}
        for r in range(args.rounds):  # alternate, so that machine noise hits both
            for mode in modes:
                runs[mode].append(train(args, folder, mode, r))
        identical = all(same_checkpoint(runs[modes[0]][0]["checkpoint"], runs[m][0]["checkpoint"]) for m in modes)
    result = {"file_mib": file_mib, "samples": n, "ranks": args.ranks, "batch": args.batch, "steps": args.steps,
              "rounds": args.rounds, "identical_checkpoints": identical}
    lines = [f"MLP data parallel on {args.ranks} ranks, global batch {args.batch}, {args.steps} steps, training file "
             f"{file_mib:.0f} MiB ({n} float32 28x28 samples); medians of {args.rounds} alternating rounds.", "",
             "| read | peak resident MiB per rank | samples/s |", "|---|---|---|"]
    for mode, rs in runs.items():
        peaks = [statistics.median(r["peak_resident_mib"][k] for r in rs) for k in range(args.ranks)]
        rate = statistics.median(r["samples_per_second"] for r in rs)
        result[mode] = {"peak_resident_mib_per_rank": peaks, "samples_per_second": rate,
                        "samples_per_second_rounds": [r["samples_per_second"] for r in rs]}
        lines.append(f"| {mode} | {', '.join(f'{p:.0f}' for p in peaks)} | {rate:.0f} |")
    lines += ["", f"Checkpoints of both modes identical bit for bit: {'yes' if identical else 'NO'}."]
    text = "\n".join(lines) + "\n"
    print(text)
    print(json.dumps(result))
    if args.out:
        os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
        open(args.out + ".md", "w").write(text)
        json.dump(result, open(args.out + ".json", "w"), indent=2)
    sys.exit(0 if identical else 1)


if __name__ == "__main__":
    main()

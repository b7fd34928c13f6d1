#!/usr/bin/env python3
"""Where a training step's time goes, layer by layer: burstpool against
PyTorch (CPU), both at one thread, on the same model file and batch.

burstpool's side is `burstpool profile` (median forward and backward time of
each layer in isolation, the planner's own measurement). PyTorch's side times
each module of the same model (scripts/burstpool_torch.py) in isolation the
same way: forward on an input of the layer's shape, then backward of a random
output gradient (input gradient only where the input is not the data layer,
as burstpool's executor does). Rounds alternate the peers; each cell is
the median over rounds of the per-round medians.

--conv-algorithms runs burstpool once per listed conv2d `algorithm` (its
model file copied with the key set on every conv2d layer), each a column
pair of the table: `own,onednn` shows what oneDNN changes against
burstpool's own kernels, layer by layer. --before BUILD adds a column pair
for another burstpool build (an earlier commit) on the unchanged model file,
labelled "before".

Usage: perf/layer_profile.py [--build build] [--models lenet5,vgg_small]
                             [--batch 64] [--rounds 3] [--repeats 20]
                             [--conv-algorithms auto] [--before OTHER_BUILD]
                             [--out perf/results/layer_profile]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

# One thread for every pool PyTorch may use (OpenMP, and OpenBLAS's own,
# which torch.set_num_threads does not reach), set before torch loads them.
os.environ.update(OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
import torch  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
from burstpool_torch import IniModel  # noqa: E402
from report import write_report  # noqa: E402


def with_conv_algorithm(model, algorithm, tmp):
    """A copy of the model file with `algorithm` set on every conv2d layer."""
    lines = []
    for line in open(model):
        lines.append(line)
        if line.split("#")[0].replace(" ", "").strip() == "type=conv2d":
            lines.append(f"algorithm = {algorithm}\n")
    path = os.path.join(tmp, f"{algorithm}_{os.path.basename(model)}")
    with open(path, "w") as f:
        f.writelines(lines)
    return path


def burstpool_layers(build, model, batch, repeats, env, tmp):
    """{layer: (forward ms, backward ms)} from `burstpool profile`."""
    out = os.path.join(tmp, "profile.json")
    subprocess.run([f"{build}/burstpool", "profile", model, "--batches", str(batch), "--repeats", str(repeats),
                    "--out", out], env=env, check=True, capture_output=True)
    prof = json.load(open(out))
    return {l["name"]: (l["forward_ms"][0], l["backward_ms"][0]) for l in prof["layers"]}


def timed(fn, repeats):
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def torch_layers(model_path, batch, repeats):
    """{layer: (forward ms, backward ms)} for every module of the PyTorch model."""
    torch.set_num_threads(1)
    torch.manual_seed(1)
    model = IniModel(model_path)
    model.train()
    # Each layer's input shape, from one forward pass of the whole model.
    shapes, kinds = {}, model.kinds
    x = torch.randn(batch, *model.sample_shape)
    values = {}
    for name in model.order:
        ins = [values[i] for i in model.inputs[name]]
        if kinds[name] == "input":
            values[name] = x
        elif name in model.layers:
            inp = ins[0].flatten(1) if kinds[name] == "linear" else ins[0]
            shapes[name] = inp.shape
            values[name] = model.layers[name](inp)
        else:
            values[name] = ins[0] if ins else None
    result = {}
    for name, mod in model.layers.items():
        needs_dx = kinds[model.inputs[name][0]] != "input"
        inp = torch.randn(*shapes[name], requires_grad=needs_dx)
        for _ in range(3):  # warm-up
            y = mod(inp)
        fwd = timed(lambda: mod(inp), repeats)
        y = mod(inp)
        gy = torch.randn_like(y)
        bwd = timed(lambda: y.backward(gy, retain_graph=True), repeats)
        result[name] = (fwd, bwd)
    return result


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--models", default="lenet5,vgg_small")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--conv-algorithms", default="auto", help="burstpool conv2d algorithms, one column pair each")
    ap.add_argument("--before", default="", help="another burstpool build, run on the unchanged model file")
    ap.add_argument("--out", default=os.path.join(ROOT, "perf/results/layer_profile"))
    args = ap.parse_args()
    algorithms = (["before"] if args.before else []) + args.conv_algorithms.split(",")
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    report = {"batch": args.batch, "rounds": args.rounds, "repeats": args.repeats, "conv_algorithms": algorithms,
              "before_build": args.before, "models": {}}
    lines = [f"Per-layer forward + backward time, one thread, batch {args.batch}, each layer alone; "
             f"median of {args.rounds} alternating rounds of {args.repeats}-run medians. burstpool columns by "
             f"conv2d algorithm ({', '.join(algorithms)}); the ratio columns are PyTorch's time over each.", ""]
    with tempfile.TemporaryDirectory() as tmp:
        for model in args.models.split(","):
            path = os.path.join(ROOT, "jobs/models", f"{model}.ini")
            files = {a: path if a == "before" else with_conv_algorithm(path, a, tmp) for a in algorithms}
            bp_rounds, pt_rounds = {a: [] for a in algorithms}, []
            for r in range(args.rounds):
                for a in algorithms:
                    build = args.before if a == "before" else args.build
                    bp_rounds[a].append(burstpool_layers(build, files[a], args.batch, args.repeats, env, tmp))
                pt_rounds.append(torch_layers(path, args.batch, args.repeats))
                print(f"{model} round {r + 1} done", file=sys.stderr)
            rows = []
            for name in bp_rounds[algorithms[0]][0]:
                if name not in pt_rounds[0]:
                    continue  # no PyTorch module (input, loss): nothing to compare
                row = {"layer": name,
                       "pytorch_forward_ms": statistics.median(p[name][0] for p in pt_rounds),
                       "pytorch_backward_ms": statistics.median(p[name][1] for p in pt_rounds)}
                for a in algorithms:
                    row[f"{a}_forward_ms"] = statistics.median(b[name][0] for b in bp_rounds[a])
                    row[f"{a}_backward_ms"] = statistics.median(b[name][1] for b in bp_rounds[a])
                rows.append(row)
            report["models"][model] = rows
            head = "".join(f" {a} fwd ms | {a} bwd ms |" for a in algorithms)
            ratios = "".join(f" PyTorch / {a} |" for a in algorithms)
            lines += [f"## {model}", "", f"| layer |{head} PyTorch fwd ms | PyTorch bwd ms |{ratios}",
                      "|---" * (3 + 3 * len(algorithms)) + "|"]
            totals = {a: 0.0 for a in algorithms + ["pytorch"]}
            for row in rows:
                pt = row["pytorch_forward_ms"] + row["pytorch_backward_ms"]
                totals["pytorch"] += pt
                cells, ratio_cells = "", ""
                for a in algorithms:
                    t = row[f"{a}_forward_ms"] + row[f"{a}_backward_ms"]
                    totals[a] += t
                    cells += f" {row[f'{a}_forward_ms']:.3f} | {row[f'{a}_backward_ms']:.3f} |"
                    ratio_cells += f" {pt / t:.2f} |"
                lines.append(f"| {row['layer']} |{cells} {row['pytorch_forward_ms']:.3f} | "
                             f"{row['pytorch_backward_ms']:.3f} |{ratio_cells}")
            sums = "".join(f" | {totals[a]:.3f} |" for a in algorithms)
            sum_ratios = "".join(f" {totals['pytorch'] / totals[a]:.2f} |" for a in algorithms)
            lines += [f"| **sum (f+b)** |{sums} | {totals['pytorch']:.3f} |{sum_ratios}", ""]
    write_report(args.out, lines, report)


if __name__ == "__main__":
    main()

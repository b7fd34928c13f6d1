#!/usr/bin/env python3
"""Turns what perf/gpu_check.sh brought back from a lent GPU machine into
perf/results/gpu.md: the CUDA tests' outcome, vgg16 per layer and per step at
batch 32 against PyTorch on the same GPU (fp32 and TF32 stated), the
convolutions' TFLOP/s, whole training steps with and without CUDA graphs,
the planner's layer profile of vgg16 on the GPU, sma learners auto-tuned on
the GPU, and multiplexing on one GPU shared by 2 ranks. Missing or failed parts are
reported as such, never filled in.

Usage: perf/gpu_report.py OUTDIR [--out perf/results/gpu.md]
"""
import argparse
import json
import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        return {"error": f"{os.path.basename(path)}: {e}"}


def gpu_name(log):
    m = re.search(r"NVIDIA [A-Z][A-Za-z0-9 -]+?(?=\s{2,}|\|)", log)
    return m.group(0).strip() if m else "unknown GPU (no nvidia-smi output)"


def opening(title, result):
    """A section's heading, then "No result: ..." when `result` did not load."""
    lines = [f"## {title}", ""]
    return lines + [f"No result: {result['error']}.", ""] if "error" in result else lines


def tests_section(tests):
    if "error" in tests:
        return [f"CUDA tests: no result ({tests['error']})."]
    return [f"CUDA tests (`burstpool_cuda_tests`): {tests.get('tests', '?')} run, {tests.get('failures', '?')} failed, "
            f"{tests.get('disabled', 0)} disabled."]


def vgg16_section(layers, torch, steps):
    lines = ["## vgg16, batch 32, one GPU", ""]
    if "error" in layers:
        return lines + [f"No per-layer benchmark: {layers['error']}.", ""]
    lines += [f"burstpool's CUDA layers, {layers.get('math', 'fp32')}, sum of per-layer medians: forward "
              f"{layers['forward_ms']:.2f} ms, backward {layers['backward_ms']:.2f} ms, step {layers['step_ms']:.2f} ms; "
              f"convolutions {layers['conv_tflops']:.1f} TFLOP/s.", ""]
    train = steps.get("vgg16_graphs_false")
    if isinstance(train, dict):
        lines.append(f"Whole training step (input upload, forward, backward, SGD; median of {train['runs']} runs): "
                     f"{train['median_ms_per_step']:.2f} ms.")
    if "error" in torch or "fp32_step_ms" not in torch:
        lines += ["", f"PyTorch: no result ({torch.get('error', 'missing')})."]
    else:
        fp32, tf32 = torch["fp32_step_ms"], torch["tf32_conv_step_ms"]
        lines += ["", "| | ms per step (forward + backward) | burstpool / PyTorch |", "|---|---|---|",
                  f"| burstpool, fp32 (sum of layers) | {layers['step_ms']:.2f} | {layers['step_ms'] / fp32:.2f} |",
                  f"| PyTorch {torch.get('torch', '')}, fp32 (TF32 off) | {fp32:.2f} | 1 |",
                  *([f"| PyTorch, fp32, deterministic cuDNN algorithms only (as burstpool) | "
                     f"{torch['fp32_deterministic_step_ms']:.2f} | "
                     f"{layers['step_ms'] / torch['fp32_deterministic_step_ms']:.2f} |"]
                    if "fp32_deterministic_step_ms" in torch else []),
                  f"| PyTorch, TF32 convolutions (its default) | {tf32:.2f} | {layers['step_ms'] / tf32:.2f} |"]
        lines += ["", f"Target: within 1.2x of PyTorch per model step in the same (fp32) arithmetic: "
                  f"{'met' if layers['step_ms'] <= 1.2 * fp32 else 'not met'} ({layers['step_ms'] / fp32:.2f}x)."]
    slow = sorted(layers["layers"], key=lambda r: -(r["forward_ms"] + r["backward_ms"]))[:8]
    lines += ["", "Slowest layers:", "", "| layer | type | forward ms | backward ms | TFLOP/s |", "|---|---|---|---|---|"]
    for r in slow:
        tf = f"{r['tflops']:.1f}" if "tflops" in r else ""
        lines.append(f"| {r['layer']} | {r['type']} | {r['forward_ms']:.3f} | {r['backward_ms']:.3f} | {tf} |")
    return lines + [""]


def steps_section(steps):
    lines = opening("Training steps, eager and with CUDA graphs (one rank, batch 32, medians of 3 alternating runs)",
                    steps)
    if "error" in steps:
        return lines
    lines += ["| model | eager ms/step | graphs ms/step | graphs / eager |", "|---|---|---|---|"]
    for model in ("lenet5", "vgg16"):
        eager, graphs = steps.get(f"{model}_graphs_false"), steps.get(f"{model}_graphs_true")
        if not isinstance(eager, dict) or not isinstance(graphs, dict):
            lines.append(f"| {model} | {eager} | {graphs} | |")
            continue
        e, g = eager["median_ms_per_step"], graphs["median_ms_per_step"]
        lines.append(f"| {model} | {e:.3f} | {g:.3f} | {g / e:.2f} |")
    return lines + [""]


def profile_section(profile):
    lines = opening("Layer profile of vgg16 on the GPU (`burstpool profile --device cuda`, what the planner reads)",
                    profile)
    if "error" in profile:
        return lines
    lines += ["| batch | sum of layers, forward + backward ms | whole step ms | step / sum |", "|---|---|---|---|"]
    for k, b in enumerate(profile["batches"]):
        total = sum(l["forward_ms"][k] + l["backward_ms"][k] for l in profile["layers"])
        step = profile["step_ms"][k] if k < len(profile.get("step_ms", [])) else float("nan")
        lines.append(f"| {b} | {total:.3f} | {step:.3f} | {step / total:.2f} |")
    return lines + [""]


def learners_section(m):
    lines = opening("sma learners side by side on the GPU (vgg_small, batch 32 per learner, one rank, auto-tuned)",
                    m)
    if "error" in m:
        return lines
    lines += ["| learners | samples/s | per learner |", "|---|---|---|"]
    for t in m["learner_tuning"]:
        lines.append(f"| {t['learners']} | {t['samples_per_second']:.0f} | "
                     f"{t['samples_per_second'] / t['learners']:.0f} |")
    return lines + ["", f"The tuner kept {m['learners_per_rank']} learner(s); the whole run averaged "
                        f"{m['samples_per_second']:.0f} samples/s.", ""]


def multiplex_section(mux):
    lines = opening("Multiplexing on one GPU shared by 2 ranks (small-VGG foreground batch 32, small-VGG background "
                    "batch 64 on the least-priority stream)", mux)
    if "error" in mux:
        return lines
    lines += ["| foreground plan | fg alone samples/s | fg shared | slowdown (separate run) | slowdown (metrics) | "
              "bg samples/s | cluster throughput |", "|---|---|---|---|---|---|---|"]
    for plan, s in mux.items():
        if not isinstance(s, dict):
            lines.append(f"| {plan} | {s} | | | | | |")
            continue
        lines.append(f"| {plan} | {s['foreground_alone_samples_per_second']:.0f} | "
                     f"{s['foreground_shared_samples_per_second']:.0f} | {s['slowdown_vs_separate_run']:.3f} | "
                     f"{s['foreground_slowdown']:.3f} | {s['background_samples_per_second']:.0f} | "
                     f"{s['cluster_throughput']:.3f} |")
    return lines + [""]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("outdir")
    ap.add_argument("--out", default=os.path.join(ROOT, "perf/results/gpu.md"))
    args = ap.parse_args()
    d = args.outdir
    log = open(os.path.join(d, "log.txt")).read() if os.path.exists(os.path.join(d, "log.txt")) else ""
    lines = [f"GPU figures from `perf/gpu_check.sh` on one {gpu_name(log)} (perf/gpu_report.py).", ""]
    lines += tests_section(load(os.path.join(d, "cuda_tests.json"))) + [""]
    steps = load(os.path.join(d, "training_steps.json"))
    lines += vgg16_section(load(os.path.join(d, "vgg16_layers.json")), load(os.path.join(d, "torch_vgg16.json")),
                           steps if "error" not in steps else {})
    lines += steps_section(steps)
    lines += profile_section(load(os.path.join(d, "vgg16_profile_cuda.json")))
    lines += learners_section(load(os.path.join(d, "learners_cuda.json")))
    lines += multiplex_section(load(os.path.join(d, "multiplex.json")))
    text = "\n".join(lines)
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    open(args.out, "w").write(text)
    print(text)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Turns what perf/gpu_check.sh brought back from lent GPU machines into
perf/results/gpu.md. Each RUN folder holds one run's files (log.txt and the
JSON results of the sections it ran); several runs are reported side by side,
in the order given: the CUDA tests' outcome, the GPU-against-CPU comparisons
of tests/e2e/cuda_device.sh, vgg16 at batch 32 against PyTorch on the same GPU
(fp32 and TF32 stated) for each cuDNN algorithm choice, the convolutions'
TFLOP/s and algorithms, whole training steps with and without CUDA graphs,
the planner's layer profile of vgg16 on the GPU, sma learners auto-tuned on
the GPU, and multiplexing on one GPU. Missing or failed parts are reported as
such, never filled in.

A RUN folder from today's script holds summary.txt (one line per command:
passed, failed, timed out or skipped) and results.tar.gz (the log and every
JSON file), which is unpacked to read; older runs' folders hold the files
themselves.

Usage: perf/gpu_report.py RUN [RUN...] [--out perf/results/gpu.md]
"""
import argparse
import json
import os
import re
import statistics
import tarfile
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CHOICES = ("heuristic", "measured", "gemm")  # [job] cudnn_algorithms


class Run:
    """One run's folder: its name, log and JSON files (None where absent or unreadable)."""

    def __init__(self, folder):
        self.name = os.path.basename(os.path.normpath(folder))
        self.folder = folder
        summary = os.path.join(folder, "summary.txt")
        self.summary = open(summary).read() if os.path.exists(summary) else None
        packed = os.path.join(folder, "results.tar.gz")
        if os.path.exists(packed):
            self.unpacked = tempfile.TemporaryDirectory()
            with tarfile.open(packed) as tar:
                tar.extractall(self.unpacked.name, filter="data")
            self.folder = self.unpacked.name
        path = os.path.join(self.folder, "log.txt")
        self.log = open(path).read() if os.path.exists(path) else ""

    def status(self, command):
        """How a command of the run ended, from summary.txt (today's runs) or the log's "exit N" lines."""
        if self.summary is not None:
            found = re.findall(rf"^{re.escape(command)}: (.*)$", self.summary, re.M)
            return found[-1] if found else "not run"
        found = re.findall(rf"{re.escape(command)}: exit (\d+)", self.log)
        return ("passed" if found[-1] == "0" else f"failed (exit {found[-1]})") if found else "not run"

    def json(self, name):
        try:
            with open(os.path.join(self.folder, name)) as f:
                return json.load(f)
        except (OSError, ValueError):
            return None

    def layers(self, choice):
        """The vgg16 per-layer benchmark with cuDNN algorithm choice `choice`."""
        return self.json("vgg16_layers.json" if choice == "heuristic" else f"vgg16_layers_{choice}.json")

    def steps(self):
        """Training-step medians by variant (model_eager, model_graphs, model_graphs_measured)."""
        old = {"graphs_false": "eager", "graphs_true": "graphs"}  # the first script version's names
        steps = self.json("training_steps.json") or {}
        out = {}
        for key, value in steps.items():
            for before, after in old.items():
                key = key.replace(before, after)
            if isinstance(value, dict):
                out[key] = value
        return out


def gpu_name(runs):
    for run in runs:
        m = re.search(r"NVIDIA [A-Z][A-Za-z0-9 -]+?(?=\s{2,}|\|)", run.log)
        if m:
            return m.group(0).strip()
    return "unknown GPU (no nvidia-smi output)"


def ratio(a, b):
    return f"{a / b:.2f}" if a and b else ""


def tests_section(runs):
    lines = ["## CUDA tests (`burstpool_cuda_tests`) and tests/e2e/cuda_device.sh", "",
             "| run | CUDA tests | failed | e2e cuda_device |", "|---|---|---|---|"]
    for run in runs:
        tests = run.json("cuda_tests.json")
        e2e_text = run.status("e2e cuda_device")
        if tests is None:
            lines.append(f"| {run.name} | not run | | {e2e_text} |")
            continue
        failed = [f"{s['name']}.{t['name']}" for s in tests["testsuites"] for t in s["testsuite"] if t.get("failures")]
        lines.append(f"| {run.name} | {tests['tests']} | {', '.join(failed) or 'none'} | {e2e_text} |")
    lines += ["", "Largest weight difference after 20 steps of LeNet-5 (cuda_device.sh), GPU against CPU or "
              "2 GPU ranks against 1:", "", "| run | comparison | largest difference |", "|---|---|---|"]
    for run in runs:
        for what, value in re.findall(r"^(.*?(?:cuda|GPU).*?): largest weight difference (\S+)$", run.log, re.M):
            lines.append(f"| {run.name} | {what} | {value} |")
    return lines + [""]


def torch_figures(runs):
    """PyTorch's step times per run, and their medians over the runs."""
    per_run = [(run.name, t) for run in runs if (t := run.json("torch_vgg16.json")) and "fp32_step_ms" in t]
    keys = ("fp32_step_ms", "fp32_deterministic_step_ms", "tf32_conv_step_ms")
    medians = {k: statistics.median(t[k] for _, t in per_run) for k in keys} if per_run else {}
    return per_run, medians


def vgg16_section(runs):
    lines = ["## vgg16, batch 32, one GPU, against PyTorch", ""]
    per_run, torch = torch_figures(runs)
    if per_run:
        lines += ["PyTorch on the same GPU (`perf/torch_gpu_peer.py`: forward + backward, no optimizer step, "
                  "cudnn.benchmark on, median of 20 CUDA-event-timed repeats), ms per step:", "",
                  "| run | torch | fp32 (TF32 off) | fp32, deterministic algorithms | TF32 convolutions |",
                  "|---|---|---|---|---|"]
        for name, t in per_run:
            lines.append(f"| {name} | {t.get('torch', '')} | {t['fp32_step_ms']:.2f} | "
                         f"{t['fp32_deterministic_step_ms']:.2f} | {t['tf32_conv_step_ms']:.2f} |")
        lines += ["", f"Medians over the runs: fp32 {torch['fp32_step_ms']:.2f} ms, deterministic "
                      f"{torch['fp32_deterministic_step_ms']:.2f} ms, TF32 {torch['tf32_conv_step_ms']:.2f} ms.", ""]
    else:
        lines += ["PyTorch: no result.", ""]
    fp32 = torch.get("fp32_step_ms")
    lines += ["burstpool, fp32 throughout (cuBLAS pedantic math, cuDNN FMA math: no TF32), deterministic cuDNN "
              "algorithms chosen as `[job] cudnn_algorithms` says. Sum of per-layer medians (`bp_gpu_layers`, "
              "forward + backward, no optimizer step) and whole training steps (`burstpool train`: input upload, "
              "forward, backward, SGD; medians of 3 alternating runs):", "",
              "| run | algorithms | layers: forward + backward ms | / PyTorch fp32 | convolutions TFLOP/s | "
              "whole step ms (CUDA graphs) | / PyTorch fp32 |", "|---|---|---|---|---|---|---|"]
    for run in runs:
        steps = run.steps()
        for choice in CHOICES:
            layers = run.layers(choice)
            step = steps.get("vgg16_graphs" if choice == "heuristic" else f"vgg16_graphs_{choice}")
            if layers is None and step is None:
                continue
            ms = step["median_ms_per_step"] if step else None
            # The first benchmark version (no "cudnn_algorithms" key) also timed conv1_1's input gradient.
            older = " (with conv1_1's input gradient)" if layers and "cudnn_algorithms" not in layers else ""
            lines.append(f"| {run.name} | {choice}{older} | {layers['step_ms']:.2f} | {ratio(layers['step_ms'], fp32)} | "
                         f"{layers['conv_tflops']:.1f} | {f'{ms:.2f}' if ms else ''} | {ratio(ms, fp32)} |"
                         if layers else f"| {run.name} | {choice} | | | | {ms:.2f} | {ratio(ms, fp32)} |")
    return lines + [""]


def conv_section(runs):
    """The last run's per-layer figures of each algorithm choice, convolutions only."""
    latest = {}
    for run in runs:
        for choice in CHOICES:
            if (layers := run.layers(choice)) is not None:
                latest[choice] = (run.name, layers)
    if not latest:
        return []
    lines = ["### vgg16's convolutions by algorithm choice (forward + backward ms, TFLOP/s, cuDNN's algorithms)", "",
             "TFLOP/s count a direct convolution's multiply-adds; FFT and Winograd algorithms do fewer, so their "
             "figure can pass the H200's fp32 peak. The first convolution computes no input gradient.", "",
             "| layer | " + " | ".join(f"{c} ({latest[c][0]})" for c in latest) + " |",
             "|---|" + "---|" * len(latest)]
    names = [r["layer"] for r in next(iter(latest.values()))[1]["layers"] if r["type"] == "conv2d"]
    for name in names:
        cells = []
        for _, layers in latest.values():
            r = next(r for r in layers["layers"] if r["layer"] == name)
            cells.append(f"{r['forward_ms'] + r['backward_ms']:.2f} ms, {r.get('tflops', 0):.1f}: "
                         f"{r.get('algorithms', '?')}")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return lines + [""]


def steps_section(runs):
    lines = ["## Training steps, eager and with CUDA graphs (one rank, batch 32, medians of 3 alternating runs)", "",
             "Eager is data parallel as one device call per pass (`device_calls = whole_model`); per-layer is the "
             "executor's per-layer path (`device_calls = per_layer`), also eager.", "",
             "| run | model | eager ms/step | per-layer ms/step | per-layer / eager | graphs ms/step | graphs / eager |",
             "|---|---|---|---|---|---|---|"]
    for run in runs:
        steps = run.steps()
        for model in ("lenet5", "vgg16"):
            eager, graphs = steps.get(f"{model}_eager"), steps.get(f"{model}_graphs")
            layers = steps.get(f"{model}_per_layer")
            if eager and graphs:
                e, g = eager["median_ms_per_step"], graphs["median_ms_per_step"]
                p = f"{layers['median_ms_per_step']:.3f} | {layers['median_ms_per_step'] / e:.2f}" if layers else "- | -"
                lines.append(f"| {run.name} | {model} | {e:.3f} | {p} | {g:.3f} | {g / e:.2f} |")
    return lines + [""]


def latest_json(runs, name):
    for run in reversed(runs):
        if (data := run.json(name)) is not None:
            return run.name, data
    return None, None


def profile_section(runs):
    name, profile = latest_json(runs, "vgg16_profile_cuda.json")
    lines = ["## Layer profile of vgg16 on the GPU (`burstpool profile --device cuda`, what the planner reads)", ""]
    if profile is None:
        return lines + ["No result.", ""]
    lines += [f"From {name}.", "", "| batch | sum of layers, forward + backward ms | whole step ms | step / sum |",
              "|---|---|---|---|"]
    for k, b in enumerate(profile["batches"]):
        total = sum(l["forward_ms"][k] + l["backward_ms"][k] for l in profile["layers"])
        step = profile["step_ms"][k] if k < len(profile.get("step_ms", [])) else float("nan")
        lines.append(f"| {b} | {total:.3f} | {step:.3f} | {step / total:.2f} |")
    return lines + [""]


def learners_table(m):
    """One auto-tuned run's trials as table rows, and its closing sentence."""
    lines = ["| learners | samples/s | per learner |", "|---|---|---|"]
    for t in m["learner_tuning"]:
        lines.append(f"| {t['learners']} | {t['samples_per_second']:.0f} | "
                     f"{t['samples_per_second'] / t['learners']:.0f} |")
    chosen = m.get("learners_per_rank", m.get("chosen_learners"))
    return lines + ["", f"The tuner kept {chosen} learner(s) (it stops at the first gain under "
                        f"`[sync] autotune_threshold`, default 10%); the whole run averaged "
                        f"{m['samples_per_second']:.0f} samples/s.", ""]


def learners_section(runs):
    """Old runs: one auto-tuned run; newer ones: {"device|host batch B": run}, the
    average model on the device against sent up each step ([sync] sma_average)."""
    name, m = latest_json(runs, "learners_cuda.json")
    old = m is not None and "learner_tuning" in m
    lines = [f"## sma learners side by side on the GPU (vgg_small, {'batch 32 per learner, ' if old else ''}one rank, "
             "auto-tuned)", ""]
    if m is None:
        return lines + ["No result.", ""]
    lines += [f"From {name}.", ""]
    if old:
        return lines + learners_table(m)
    for key, run in m.items():
        where, batch = key.split(" batch ")
        lines += [f"### average model on the {where}, batch {batch} per learner", ""]
        lines += learners_table({"learner_tuning": run["trials"], "chosen_learners": run["chosen_learners"],
                                 "samples_per_second": run["samples_per_second"]})
    return lines


def multiplex_section(runs):
    lines = ["## Multiplexing on one GPU (small-VGG foreground batch 32, small-VGG background batch 64 on the "
             "least-priority stream)", "",
             "alternate and data_parallel: 2 ranks (2 processes) sharing the GPU; one_rank: both jobs in one "
             "process. The slowdown in the metrics compares with the foreground's own calibration steps in the same "
             "run; the separate run is the foreground alone, started before.", "",
             "Cluster throughput against data parallel = fg shared / the data-parallel foreground alone on the same "
             "ranks + bg shared / bg alone, every rate from the runs' metrics: the data-parallel foreground alone is "
             "the data_parallel run's own calibration steps (for one_rank and data_parallel, the row's own). Against "
             "the own plan it divides by the row's own calibration steps instead. Two ranks sharing one GPU are two "
             "processes that the GPU time-slices, so data parallel there is itself slow (it runs every layer twice "
             "at half the batch, in turns): the alternate plan's figure above 1 against it is that baseline's "
             "weakness, not the background's gain, which the figure against the own plan shows.", "",
             "| run | foreground | fg alone samples/s | fg shared | slowdown (separate run) | slowdown (metrics) | "
             "bg samples/s | cluster throughput vs data parallel | vs own plan |", "|---|---|---|---|---|---|---|---|---|"]
    for run in runs:
        summary = run.json("multiplex.json") or {}
        dp = summary.get("data_parallel")
        for plan, s in summary.items():
            if not isinstance(s, dict):
                lines.append(f"| {run.name} | {plan} | {s} | | | | | | |")
                continue
            own = s["background"]["foreground_alone_samples_per_second"]  # the calibration steps
            reference = dp["background"]["foreground_alone_samples_per_second"] \
                if plan == "alternate" and isinstance(dp, dict) else own
            bg_share = s["background_samples_per_second"] / s["background"]["alone_samples_per_second"]
            vs_dp = s["foreground_shared_samples_per_second"] / reference + bg_share
            vs_own = s["foreground_shared_samples_per_second"] / own + bg_share
            lines.append(f"| {run.name} | {plan} | {s['foreground_alone_samples_per_second']:.0f} | "
                         f"{s['foreground_shared_samples_per_second']:.0f} | {s['slowdown_vs_separate_run']:.3f} | "
                         f"{s['foreground_slowdown']:.3f} | {s['background_samples_per_second']:.0f} | "
                         f"{vs_dp:.3f} | {vs_own:.3f} |")
    return lines + [""]


def precision_section(runs):
    lines = ["## Training steps by precision, vgg16 at batch 32 (median ms per step)", "",
             "| run | figure | ms |", "|---|---|---|"]
    for run in runs:
        for key, value in (run.json("precision.json") or {}).items():
            lines.append(f"| {run.name} | {key} | {value['median']:.2f} |")
    return lines + [""] if len(lines) > 4 else []  # nothing but the header: no such runs


def mux1_section(runs):
    lines = ["## One process hosting both jobs: vgg16 foreground beside a small-VGG background", "",
             "| run | foreground batch | foreground slowdown | cluster throughput | GPU busy (fg alone) |",
             "|---|---|---|---|---|"]
    for run in runs:
        for p in (run.json("mux1.json") or {}).get("points", []):
            lines.append(f"| {run.name} | {p.get('foreground_batch')} | {p.get('foreground_slowdown')} | "
                         f"{p.get('cluster_throughput')} | {p.get('gpu_busy_fraction')} |")
    return lines + [""] if len(lines) > 4 else []  # nothing but the header: no such runs


def cudnn_cache_section(runs):
    lines = ["## cudnn_cache: measured algorithms reused", "",
             "| run | measured runs equal bit for bit | ms per step by run |", "|---|---|---|"]
    for run in runs:
        c = run.json("cudnn_cache.json")
        if c:
            ms = ", ".join(f"{k}: {v['ms_per_step']:.1f}" for k, v in c["runs"].items())
            lines.append(f"| {run.name} | {c['measured_runs_equal_bitwise']} | {ms} |")
    return lines + [""] if len(lines) > 4 else []  # nothing but the header: no such runs


def commands_section(runs):
    """Every command of today's runs and how it ended: skipped is not failed."""
    lines = ["## Commands and how they ended", ""]
    for run in runs:
        if run.summary is not None:
            lines += [f"{run.name}:", "", "```", run.summary.rstrip(), "```", ""]
    return lines


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("runs", nargs="+", help="one folder per lent-machine run, oldest first")
    ap.add_argument("--out", default=os.path.join(ROOT, "perf/results/gpu.md"))
    args = ap.parse_args()
    runs = [Run(folder) for folder in args.runs]
    lines = ["# GPU figures", "", f"From `perf/gpu_check.sh` on one {gpu_name(runs)}, runs "
             f"{', '.join(r.name for r in runs)} (written by perf/gpu_report.py).", ""]
    for section in (tests_section, vgg16_section, conv_section, steps_section, profile_section, learners_section,
                    multiplex_section, precision_section, mux1_section, cudnn_cache_section, commands_section):
        lines += section(runs)
    text = "\n".join(lines)
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    open(args.out, "w").write(text)
    print(text)


if __name__ == "__main__":
    main()

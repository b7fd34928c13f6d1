#!/usr/bin/env python3
"""PyTorch on the GPU, the peer of bp_gpu_layers (perf/gpu_layers.cpp): the
same model from a burstpool INI file (perf/torch_peer.py), forward + backward
of one step at a fixed batch on synthetic data, median of CUDA-event-timed
repeats after warm-up: in strict fp32 (TF32 off in cuDNN and matmul: the
same arithmetic as burstpool's CUDA layers), the same with deterministic cuDNN
algorithms only (burstpool's choice, so runs repeat bit for bit), and with
PyTorch's TF32 defaults for convolutions. cuDNN autotuning (benchmark mode)
is on throughout. Prints JSON.

With --step, whole training steps instead (forward, backward and an SGD step
with momentum 0.9, as burstpool's steps), at each precision a user can pick:
fp32 (TF32 off everywhere), tf32 (TF32 in convolutions and matmuls),
PyTorch's defaults (TF32 convolutions, fp32 matmuls) and bf16 autocast
(bf16 activations, fp32 weights), each with its peak GPU memory.

Usage: torch_gpu_peer.py MODEL.ini [--batch 32] [--repeats 20] [--step]
"""
import argparse
import json
import statistics

import torch
import torch.nn as nn

from torch_peer import IniModel


def step_ms(model, x, y, repeats):
    loss_fn = nn.CrossEntropyLoss()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for i in range(3 + repeats):
        start.record()
        model.zero_grad(set_to_none=True)
        loss_fn(model(x), y).backward()
        end.record()
        torch.cuda.synchronize()
        if i >= 3:
            times.append(start.elapsed_time(end))
    return statistics.median(times)


def train_step_ms(model, x, y, repeats, bf16=False):
    """Median ms of whole SGD steps, and the peak memory allocated meanwhile (MiB)."""
    loss_fn = nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.reset_peak_memory_stats()
    times = []
    for i in range(3 + repeats):
        start.record()
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=bf16):
            loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        end.record()
        torch.cuda.synchronize()
        if i >= 3:
            times.append(start.elapsed_time(end))
    return statistics.median(times), torch.cuda.max_memory_allocated() / 2**20


def whole_steps(model, x, y, repeats, out):
    for name, conv_tf32, matmul_tf32, bf16 in (("fp32", False, False, False), ("tf32", True, True, False),
                                               ("defaults", True, False, False), ("bf16", False, False, True)):
        torch.backends.cudnn.allow_tf32 = conv_tf32
        torch.backends.cuda.matmul.allow_tf32 = matmul_tf32
        ms, mib = train_step_ms(model, x, y, repeats, bf16)
        out[f"{name}_train_step_ms"] = ms
        out[f"{name}_peak_mib"] = mib


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--step", action="store_true", help="whole SGD steps at each precision")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print(json.dumps({"error": "PyTorch here has no CUDA device"}))
        return
    model = IniModel(args.model).cuda().train()
    x = torch.randn(args.batch, *model.sample_shape, device="cuda")
    classes = [m for m in model.modules() if isinstance(m, nn.Linear)][-1].out_features
    y = torch.randint(0, classes, (args.batch,), device="cuda")
    torch.backends.cudnn.benchmark = True
    out = {"model": args.model, "batch": args.batch, "torch": torch.__version__}
    if args.step:
        whole_steps(model, x, y, args.repeats, out)
        print(json.dumps(out))
        return
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    out["fp32_step_ms"] = step_ms(model, x, y, args.repeats)
    torch.backends.cudnn.deterministic = True
    out["fp32_deterministic_step_ms"] = step_ms(model, x, y, args.repeats)
    torch.backends.cudnn.deterministic = False
    torch.backends.cudnn.allow_tf32 = True  # PyTorch's default for convolutions
    out["tf32_conv_step_ms"] = step_ms(model, x, y, args.repeats)
    print(json.dumps(out))


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""PyTorch peer for burstpool benchmarks: builds the same model from a
burstpool INI model file and trains it on synthetic data with the same batch,
optimizer and step count, printing samples/s as JSON.

Usage: torch_peer.py MODEL.ini --batch 64 --steps 100 [--threads 1]
"""
import argparse
import json
import os
import sys
import time

import torch
import torch.nn as nn

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts"))
from burstpool_torch import IniModel  # noqa: E402  (the model, shared with scripts/h5_to_torch.py)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--samples", type=int, default=1024)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    model = IniModel(args.model)
    classes = 10
    for name in model.order:
        if isinstance(model.layers[name] if name in model.layers else None, nn.Linear):
            classes = model.layers[name].out_features
    images = torch.randn(args.samples, *model.sample_shape)
    labels = torch.randint(0, classes, (args.samples,))
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    model.train()
    steps_per_epoch = args.samples // args.batch
    start = time.perf_counter()
    for step in range(args.steps):
        b = step % steps_per_epoch
        x, y = images[b * args.batch:(b + 1) * args.batch], labels[b * args.batch:(b + 1) * args.batch]
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
    seconds = time.perf_counter() - start
    print(json.dumps({"samples_per_second": args.steps * args.batch / seconds, "seconds": seconds,
                      "final_loss": float(loss), "torch": torch.__version__, "threads": torch.get_num_threads()}))


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""PyTorch DistributedDataParallel peer (gloo, CPU): trains a burstpool INI
model on synthetic data with N processes of one thread each at a fixed global
batch, and prints samples/s as JSON (rank 0).

Usage: torch_ddp.py MODEL.ini --procs 2 --global-batch 256 --steps 50
"""
import argparse
import json
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_peer import IniModel  # noqa: E402


def worker(rank, args, port, queue):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=args.procs)
    torch.manual_seed(args.seed)
    model = IniModel(args.model)
    ddp = nn.parallel.DistributedDataParallel(model)
    local = args.global_batch // args.procs
    g = torch.Generator().manual_seed(args.seed + rank)
    images = torch.randn(8 * local, *model.sample_shape, generator=g)
    labels = torch.randint(0, 10, (8 * local,), generator=g)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()

    def step(i):
        b = i % 8
        x, y = images[b * local:(b + 1) * local], labels[b * local:(b + 1) * local]
        opt.zero_grad(set_to_none=True)
        loss_fn(ddp(x), y).backward()
        opt.step()

    for i in range(args.warmup):
        step(i)
    dist.barrier()
    start = time.perf_counter()
    for i in range(args.steps):
        step(i)
    dist.barrier()
    seconds = time.perf_counter() - start
    if rank == 0:
        queue.put({"samples_per_second": args.steps * args.global_batch / seconds, "seconds": seconds,
                   "procs": args.procs, "global_batch": args.global_batch, "torch": torch.__version__})
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--procs", type=int, default=2)
    ap.add_argument("--global-batch", type=int, default=256)
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--port", type=int, default=29533)
    args = ap.parse_args()
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    procs = [ctx.Process(target=worker, args=(r, args, args.port, queue)) for r in range(args.procs)]
    for p in procs:
        p.start()
    result = queue.get(timeout=600)
    for p in procs:
        p.join()
    print(json.dumps(result))


if __name__ == "__main__":
    main()

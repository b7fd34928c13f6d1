#!/usr/bin/env python3
"""PyTorch peer for burstpool benchmarks: builds the same model from a
burstpool INI model file and trains it on synthetic data with the same batch,
optimizer and step count, printing samples/s as JSON.

Usage: torch_peer.py MODEL.ini --batch 64 --steps 100 [--threads 1]
"""
import argparse
import configparser
import json
import time

import torch
import torch.nn as nn


def pair(text):
    parts = [int(p) for p in str(text).split(",")]
    return (parts[0], parts[0]) if len(parts) == 1 else (parts[0], parts[1])


class IniModel(nn.Module):
    """A DAG of torch modules mirroring a burstpool model file."""

    def __init__(self, path):
        super().__init__()
        cfg = configparser.ConfigParser(inline_comment_prefixes=(";",))
        cfg.optionxform = str
        cfg.read(path)
        self.order, self.inputs, self.kinds = [], {}, {}
        self.layers = nn.ModuleDict()
        shapes = {}
        pending = [s for s in cfg.sections() if s != "model"]
        while pending:  # topological order
            for name in list(pending):
                sec = cfg[name]
                ins = [i.strip() for i in sec.get("inputs", "").split(",") if i.strip()]
                if all(i in shapes for i in ins):
                    pending.remove(name)
                    shapes[name] = self._build(name, sec, [shapes[i] for i in ins])
                    self.order.append(name)
                    self.inputs[name] = ins
        self.sample_shape = shapes[self.order[0]]

    def _build(self, name, sec, in_shapes):
        t = sec["type"]
        self.kinds[name] = t
        s = in_shapes[0] if in_shapes else None
        mod = None
        if t == "input":
            dims = [int(d) for d in sec["shape"].split(",")] + [1, 1]
            return tuple(dims[:3])
        if t == "linear":
            feats = s[0] * s[1] * s[2]
            mod = nn.Linear(feats, int(sec["out_features"]), bias=sec.get("bias", "true") == "true")
            out = (int(sec["out_features"]), 1, 1)
        elif t == "conv2d":
            k, st, p = pair(sec["kernel"]), pair(sec.get("stride", 1)), pair(sec.get("padding", 0))
            mod = nn.Conv2d(s[0], int(sec["out_channels"]), k, st, p, bias=sec.get("bias", "true") == "true")
            out = (int(sec["out_channels"]), (s[1] + 2 * p[0] - k[0]) // st[0] + 1, (s[2] + 2 * p[1] - k[1]) // st[1] + 1)
        elif t in ("maxpool2d", "avgpool2d"):
            k = pair(sec["kernel"])
            st, p = pair(sec.get("stride", sec["kernel"])), pair(sec.get("padding", 0))
            mod = (nn.MaxPool2d if t == "maxpool2d" else nn.AvgPool2d)(k, st, p)
            out = (s[0], (s[1] + 2 * p[0] - k[0]) // st[0] + 1, (s[2] + 2 * p[1] - k[1]) // st[1] + 1)
        elif t == "relu":
            mod, out = nn.ReLU(), s
        elif t == "dropout":
            mod, out = nn.Dropout(float(sec.get("p", 0.5))), s
        elif t == "batchnorm2d":
            mod, out = nn.BatchNorm2d(s[0]), s
        elif t == "global_avgpool":
            mod, out = nn.AdaptiveAvgPool2d(1), (s[0], 1, 1)
        elif t == "flatten":
            mod, out = nn.Flatten(), (s[0] * s[1] * s[2], 1, 1)
        elif t == "add":
            out = s
        elif t == "concat":
            out = (sum(x[0] for x in in_shapes), s[1], s[2])
        elif t == "softmax_cross_entropy":
            out = None
        else:
            raise SystemExit(f"unsupported layer type {t}")
        if mod is not None:
            self.layers[name] = mod
        return out

    def forward(self, x):
        values = {}
        for name in self.order:
            t = self.kinds[name]
            ins = [values[i] for i in self.inputs[name]]
            if t == "input":
                values[name] = x
            elif t == "linear":
                values[name] = self.layers[name](ins[0].flatten(1))
            elif t == "add":
                v = ins[0]
                for other in ins[1:]:
                    v = v + other
                values[name] = v
            elif t == "concat":
                values[name] = torch.cat(ins, 1)
            elif t == "softmax_cross_entropy":
                return ins[0]
            else:
                values[name] = self.layers[name](ins[0])
        raise SystemExit("model has no loss layer")


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

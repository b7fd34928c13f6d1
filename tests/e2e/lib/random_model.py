#!/usr/bin/env python3
"""Writes a random small model (INI) and a random plan for it, for
tests/e2e/random_models.sh. From a seed: an input of 2-3 channels and 8-12
pixels, 4-10 layers drawn from conv2d (1x1 or 3x3, stride 1 or 2, with or
without bias), batchnorm2d, relu, dropout, max and average pooling, add and
concat of earlier outputs of matching shape; every output left unused is
pooled globally and concatenated into a linear classifier. The plan puts
every layer on a random non-empty set of the ranks.

Usage: random_model.py SEED RANKS MODEL.ini DATA_PARALLEL_PLAN.json PLAN.json
(the data-parallel plan comes from `burstpool plan --data-parallel`; run this
once without it to write the model.)
"""
import json
import random
import sys


def model(seed):
    rng = random.Random(seed)
    sections, shapes = [], {}

    def add(name, typ, inputs, dims, **keys):
        text = f"[{name}]\ntype = {typ}\n"
        if inputs:
            text += f"inputs = {', '.join(inputs)}\n"
        text += "".join(f"{k} = {v}\n" for k, v in keys.items())
        sections.append(text)
        shapes[name] = dims

    c, h = rng.choice([2, 3]), rng.choice([8, 9, 12])
    add("data", "input", [], (c, h, h), shape=f"{c},{h},{h}")
    unused = {"data"}
    for n in range(1, rng.randint(4, 10) + 1):
        src = rng.choice(sorted(shapes))
        c, h, w = shapes[src]
        op = rng.choice(["conv", "conv", "bn", "relu", "pool", "avg", "add", "cat", "drop"])
        name = f"l{n}_{op}"
        if op == "conv":
            k, s = rng.choice([1, 3]), rng.choice([1, 1, 2]) if h >= 4 else 1
            oc = rng.choice([2, 4, 8])
            add(name, "conv2d", [src], (oc, (h + 2 * (k // 2) - k) // s + 1, (w + 2 * (k // 2) - k) // s + 1),
                out_channels=oc, kernel=k, stride=s, padding=k // 2, bias=rng.choice(["true", "false"]))
        elif op in ("bn", "relu", "drop"):
            add(name, {"bn": "batchnorm2d", "relu": "relu", "drop": "dropout"}[op], [src], (c, h, w))
        elif op in ("pool", "avg"):
            if h < 2:
                continue
            add(name, "maxpool2d" if op == "pool" else "avgpool2d", [src], (c, h // 2, w // 2), kernel=2)
        else:  # add, cat: a second input of the right shape
            fits = [x for x in shapes if x != src and (shapes[x] == (c, h, w) if op == "add" else shapes[x][1:] == (h, w))]
            if not fits:
                continue
            other = rng.choice(sorted(fits))
            out = (c, h, w) if op == "add" else (c + shapes[other][0], h, w)
            add(name, "add" if op == "add" else "concat", [src, other], out)
            unused.discard(other)
        unused.discard(src)
        unused.add(name)
    pooled = []
    for u in sorted(unused):
        add(f"gap_{u}", "global_avgpool", [u], (shapes[u][0], 1, 1))
        pooled.append(f"gap_{u}")
    head = pooled[0]
    if len(pooled) > 1:
        add("head", "concat", pooled, (sum(shapes[p][0] for p in pooled), 1, 1))
        head = "head"
    add("fc", "linear", [head], (5, 1, 1), out_features=5)
    add("loss", "softmax_cross_entropy", ["fc"], (1, 1, 1))
    return f"[model]\nname = random_{seed}\n\n" + "\n".join(sections)


def main():
    seed, ranks, model_path = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    if len(sys.argv) == 4:
        open(model_path, "w").write(model(seed))
        return
    rng = random.Random(seed * 7 + 1)
    plan = json.load(open(sys.argv[4]))
    for layer in plan["layers"]:
        layer["ranks"] = sorted(rng.sample(range(ranks), rng.randint(1, ranks)))
    json.dump(plan, open(sys.argv[5], "w"))


if __name__ == "__main__":
    main()

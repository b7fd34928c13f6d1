#!/usr/bin/env python3
"""Mutation fuzzing of burstpool's inputs: model and job INI files, plan JSON,
HDF5 models, HDF5 data and checkpoints.

Each case copies the seed files of tests/fuzz/corpus (plus HDF5 seeds made
here with `burstpool convert`, `h5import` and a short training run) into a
fresh folder, mutates one of them, and runs `burstpool train` on it. The
contract every case must keep:

  - exit 0, or exit 1 with exactly one "burstpool: error:" line on stderr
    that names a file or a [section] key; other stderr lines only warnings;
  - never a signal, a timeout, an "out of memory" or an "internal error".

Cases come from one seeded generator, so a failure reproduces with
`fuzz.py BINARY --seed S --only N`; failing cases are kept under --keep.
Standard library only. Usage:
  fuzz.py BINARY [--cases 300] [--seed 1] [--jobs 4] [--timeout 30] [--keep DIR] [--no-memory-limit]
"""
import argparse
import concurrent.futures as futures
import json
import os
import random
import re
import resource
import shutil
import struct
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "corpus")

# Values a hostile or careless user writes; each lands on some key.
HOSTILE = ["", "-1", "0", "1", "0.5", "1e12", "-1e12", "1e400", "nan", "inf", "-inf", "4294967297",
           "9223372036854775808", "2147483648", "abc", "0x10", "1,2,3", "1,0,8", "0,0,0", "-3,8,8",
           "true", "none", "/dev/zero", "/dev/urandom", ".", "..", "x" * 5000, "1e-45", "3 # comment",
           "\"quoted\"", "[bracket]", "1e6", "100000000", "conv", "data", "relu"]
HOSTILE_NUMBERS = [0, -1, 1, 2, 3, 7, 8, 9, 2**31, 2**31 - 1, 2**32 + 1, 2**63, -2**63, 1e300, 0.5, -0.0, 1e-320]


def run(cmd, **kw):
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


def schema_keys(binary):
    """(section, key) of every job key, from `burstpool keys`."""
    out = run([binary, "keys"]).stdout
    return re.findall(r"^\| \[(\w+)\] \| `(\w+)` \|", out, re.M)


def make_seeds(binary, base):
    """The seed files, in `base`: the shipped corpus and HDF5 files made from it."""
    for name in os.listdir(CORPUS):
        shutil.copy(os.path.join(CORPUS, name), base)
    env = fuzz_env()
    r = run([binary, "convert", "model.ini", "model.h5", "--init-weights"], cwd=base, env=env)
    if r.returncode != 0:
        sys.exit(f"fuzz: cannot make the HDF5 model seed: {r.stderr.strip()}")
    rng = random.Random(0)
    samples = 32
    with open(os.path.join(base, "images.bin"), "wb") as f:
        f.write(bytes(rng.randrange(256) for _ in range(samples * 64)))
    with open(os.path.join(base, "labels.bin"), "wb") as f:
        f.write(struct.pack(f"<{samples}i", *[i % 3 for i in range(samples)]))
    with open(os.path.join(base, "images.conf"), "w") as f:
        f.write(f"PATH images\nINPUT-CLASS UIN\nINPUT-SIZE 8\nRANK 3\nDIMENSION-SIZES {samples} 8 8\n"
                "OUTPUT-CLASS UIN\nOUTPUT-SIZE 8\n")
    with open(os.path.join(base, "labels.conf"), "w") as f:
        f.write(f"PATH labels\nINPUT-CLASS IN\nINPUT-SIZE 32\nRANK 1\nDIMENSION-SIZES {samples}\n"
                "OUTPUT-CLASS IN\nOUTPUT-SIZE 32\nOUTPUT-BYTE-ORDER LE\n")
    r = run(["h5import", "images.bin", "-c", "images.conf", "labels.bin", "-c", "labels.conf", "-o", "data.h5"],
            cwd=base)
    if r.returncode != 0:
        sys.exit(f"fuzz: h5import (hdf5-tools) cannot make the HDF5 data seed: {r.stderr.strip()}")
    r = run([binary, "train", "job.ini", "--steps", "2", "--checkpoint", "ckpt.h5"], cwd=base, env=env)
    if r.returncode != 0:
        sys.exit(f"fuzz: the seed job does not train: {r.stderr.strip()}")
    for name in ("images.bin", "labels.bin", "images.conf", "labels.conf", "m.json"):
        if os.path.exists(os.path.join(base, name)):
            os.remove(os.path.join(base, name))


# --- mutators: each takes (rng, bytes or text, keys) and returns the mutated content ---

def ini_mutation(rng, text, keys):
    lines = text.split("\n")
    kind = rng.randrange(9)
    if kind == 0:  # a value replaced
        idx = [i for i, l in enumerate(lines) if "=" in l]
        i = rng.choice(idx)
        lines[i] = lines[i].split("=")[0] + "= " + rng.choice(HOSTILE)
    elif kind == 1:  # a line dropped
        del lines[rng.randrange(len(lines))]
    elif kind == 2:  # a line repeated
        i = rng.randrange(len(lines))
        lines.insert(i, lines[i])
    elif kind == 3:  # two lines swapped
        i, j = rng.randrange(len(lines)), rng.randrange(len(lines))
        lines[i], lines[j] = lines[j], lines[i]
    elif kind == 4:  # any documented key with a hostile value, in its own section
        section, key = rng.choice(keys)
        lines += [f"[{section}]", f"{key} = {rng.choice(HOSTILE)}"]
    elif kind == 5:  # cut short
        return text[: rng.randrange(len(text))]
    elif kind == 6:  # bytes flipped
        return flip_text(rng, text)
    elif kind == 7:  # an '=' lost or a section header broken
        i = rng.randrange(len(lines))
        lines[i] = lines[i].replace("=", " ", 1) if "=" in lines[i] else lines[i].replace("]", "", 1)
    else:  # a layer's inputs pointed elsewhere
        idx = [i for i, l in enumerate(lines) if l.startswith("inputs")]
        if idx:
            lines[rng.choice(idx)] = "inputs = " + rng.choice(["loss", "nowhere", "data,data", "", "fc", "conv"])
    return "\n".join(lines)


def flip_text(rng, text):
    data = bytearray(text.encode())
    for _ in range(rng.randrange(1, 6)):
        data[rng.randrange(len(data))] = rng.randrange(256)
    return data.decode("latin-1")


def json_mutation(rng, text, _keys):
    kind = rng.randrange(6)
    if kind == 0:
        return text[: rng.randrange(len(text))]
    if kind == 1:
        return text + rng.choice([" {}", "x", "\n[1]", " 0"])
    if kind == 2:
        return flip_text(rng, text)
    if kind == 3:  # a duplicate key
        return text.replace('"ranks": 1', '"ranks": 1, "ranks": 2', 1)
    plan = json.loads(text)
    if kind == 4:  # a number somewhere replaced
        target = rng.choice(["global_batch", "ranks", "layer_rank", "layer_name"])
        if target in ("global_batch", "ranks"):
            plan[target] = rng.choice(HOSTILE_NUMBERS + ["8", None, [], {}])
        elif target == "layer_rank":
            rng.choice(plan["layers"])["ranks"] = rng.choice([[], [0, 0], [1], [-1], [2**32], [0.5], "0", None])
        else:
            rng.choice(plan["layers"])["name"] = rng.choice(["", "nope", 7, None, "conv"])
    else:  # a layer dropped, repeated or its entry broken
        layers = plan["layers"]
        op = rng.randrange(3)
        if op == 0:
            del layers[rng.randrange(len(layers))]
        elif op == 1:
            layers.append(rng.choice(layers))
        else:
            layers[rng.randrange(len(layers))] = rng.choice([{}, [], 3, {"name": "conv"}])
    return json.dumps(plan)


def binary_mutation(rng, data, _keys):
    data = bytearray(data)
    kind = rng.randrange(4)
    if kind == 0:  # a few bytes flipped anywhere
        for _ in range(rng.randrange(1, 9)):
            data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
    elif kind == 1:  # cut short
        del data[rng.randrange(len(data)):]
    elif kind == 2:  # a block zeroed
        start = rng.randrange(len(data))
        data[start:start + rng.randrange(1, 256)] = bytes(min(len(data) - start, 255))
    else:  # bytes flipped past the header, in the data and metadata blocks
        for _ in range(rng.randrange(1, 33)):
            data[rng.randrange(min(len(data) - 1, 512), len(data))] = rng.randrange(256)
    return bytes(data)


# (name, file mutated, mutator, command after `burstpool train`, weight)
TARGETS = [
    ("model-ini", "model.ini", ini_mutation, ["job.ini"], 28),
    ("job-ini", "job.ini", ini_mutation, ["job.ini"], 28),
    ("plan-json", "plan.json", json_mutation, ["job.ini", "--plan", "plan.json"], 16),
    ("hdf5-model", "model.h5", binary_mutation, ["job_h5model.ini"], 10),
    ("hdf5-data", "data.h5", binary_mutation, ["job_h5data.ini"], 10),
    ("checkpoint", "ckpt.h5", binary_mutation, ["job.ini", "--checkpoint", "ckpt.h5", "--resume"], 8),
]


def fuzz_env(tmp=None):
    """One rank (an MPI singleton), one thread. Each case gets its own TMPDIR:
    Open MPI singletons started together otherwise race on one session folder."""
    env = dict(os.environ, OMP_NUM_THREADS="1", OMPI_MCA_ess_singleton_isolated="1",
               OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    if tmp:
        env["TMPDIR"] = tmp
    return env


def plan_case(seed, index):
    """The target and mutation seed of case `index`: the same for the same (seed, index)."""
    rng = random.Random(f"{seed}:{index}")
    target = rng.choices(TARGETS, weights=[t[4] for t in TARGETS])[0]
    return target, rng


def limit_memory():
    # Far above what a refused or tiny run needs; a run that allocates past it
    # gets bad_alloc ("out of memory"), which the contract counts as a failure.
    resource.setrlimit(resource.RLIMIT_AS, (8 << 30, 8 << 30))


def verdict(rc, stderr):
    """'' when the run kept the contract, else why not."""
    lines = [l for l in stderr.splitlines() if l.strip()]
    errors = [l for l in lines if l.startswith("burstpool: error")]
    if rc == 0:
        return "" if not errors else "exit 0 after an error line"
    if rc != 1:
        return f"exit status {rc}" if rc >= 0 else f"killed by signal {-rc}"
    if len(errors) != 1:
        return f"{len(errors)} error lines"
    others = [l for l in lines if not l.startswith("burstpool: ")]
    if others:
        return "stderr lines besides burstpool's: " + others[0][:120]
    line = errors[0]
    if "out of memory" in line or "internal error" in line:
        return "not a clear error: " + line[:200]
    if not re.search(r"\.(ini|json|h5|gz)\b|-ubyte\b|\[\w+\]|--\w+", line):
        return "the error names no file or key: " + line[:200]
    return ""


def run_case(binary, base, seed, index, keys, timeout, keep, memory_limit=True):
    target, rng = plan_case(seed, index)
    name, path, mutate, args, _ = target
    with tempfile.TemporaryDirectory(prefix="bpfuzz.") as work:
        for f in os.listdir(base):
            shutil.copy(os.path.join(base, f), work)
        full = os.path.join(work, path)
        if mutate is binary_mutation:
            with open(full, "rb") as f:
                content = mutate(rng, f.read(), keys)
            with open(full, "wb") as f:
                f.write(content)
        else:
            with open(full, encoding="latin-1") as f:
                content = mutate(rng, f.read(), keys)
            with open(full, "w", encoding="latin-1") as f:
                f.write(content)
        cmd = [binary, "train"] + args + ["--steps", "3", "--set", "job.memory_limit_gb=2"]
        tmp = os.path.join(work, ".tmp")
        os.mkdir(tmp)
        start = time.monotonic()
        try:
            r = subprocess.run(cmd, cwd=work, env=fuzz_env(tmp), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, errors="replace", timeout=timeout,
                               preexec_fn=limit_memory if memory_limit else None)
            why = verdict(r.returncode, r.stderr)
            stderr = r.stderr
        except subprocess.TimeoutExpired as e:
            why, stderr = f"no exit within {timeout} s", (e.stderr or b"").decode(errors="replace")
        seconds = time.monotonic() - start
        if why and keep:
            dest = os.path.join(keep, f"case{index}-{name}")
            shutil.copytree(work, dest, dirs_exist_ok=True)
            with open(os.path.join(dest, "stderr.txt"), "w") as f:
                f.write(stderr)
        return index, name, why, stderr.strip().splitlines()[-1:] if stderr.strip() else [], seconds


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("binary")
    ap.add_argument("--cases", type=int, default=300)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--jobs", type=int, default=4)
    ap.add_argument("--timeout", type=float, default=30)
    ap.add_argument("--only", type=int, help="run case N alone (to reproduce one)")
    ap.add_argument("--keep", help="copy each failing case's files here")
    ap.add_argument("--verbose", action="store_true", help="print every case's last stderr line")
    ap.add_argument("--no-memory-limit", action="store_true",
                    help="no address-space limit (a sanitized binary reserves terabytes of shadow memory)")
    a = ap.parse_args()
    binary = os.path.abspath(a.binary)
    keys = schema_keys(binary)
    if not keys:
        sys.exit(f"fuzz: `{binary} keys` printed no key table")
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="bpfuzz-seeds.") as base:
        make_seeds(binary, base)
        cases = [a.only] if a.only is not None else range(a.cases)
        failures, counts, slowest = [], {}, 0.0
        with futures.ThreadPoolExecutor(a.jobs) as pool:
            jobs = [pool.submit(run_case, binary, base, a.seed, i, keys, a.timeout, a.keep,
                                not a.no_memory_limit) for i in cases]
            for job in futures.as_completed(jobs):
                index, name, why, last, seconds = job.result()
                slowest = max(slowest, seconds)
                ok = counts.setdefault(name, [0, 0])
                ok[0] += 1
                if why:
                    ok[1] += 1
                    failures.append((index, name, why, last))
                elif a.verbose:
                    print(f"ok   case {index} ({name}): {last[0] if last else 'exit 0'}")
    for index, name, why, last in sorted(failures):
        print(f"FAIL case {index} ({name}): {why}" + (f"\n     {last[0][:300]}" if last else ""))
    summary = ", ".join(f"{n} {c[0]}" for n, c in sorted(counts.items()))
    print(f"fuzz: {sum(c[0] for c in counts.values())} cases ({summary}) in {time.monotonic() - start:.0f} s, "
          f"slowest {slowest:.1f} s: {len(failures)} broke the contract"
          + (f" (reproduce: fuzz.py BINARY --seed {a.seed} --only N)" if failures else ""))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()

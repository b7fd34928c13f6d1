#!/usr/bin/env python3
"""Does Open MPI's yield at every idle poll (OMPI_MCA_mpi_yield_when_idle=1, scripts/shaped-net.sh's
default) hand the foreground's core to its idle-priority background thread? vgg16_cifar's --plan auto plan
on 2 ranks over shaped links, alone and beside shaped_study.py's background, with and without the yield,
side by side in alternating order; prints each run and the medians (as root).

Usage: perf/shaped_yield.py GBIT GLOBAL_BATCH STEPS ROUNDS   (e.g. 1 32 24 2)
"""
import json, os, statistics, sys, tempfile
import shaped_study as s
build = os.path.join(s.ROOT, "build")
tmp = tempfile.mkdtemp()
gbit, batch, steps, rounds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
fg, bg = s.write_jobs(tmp, "vgg16_cifar", batch, steps)
cache = os.path.join(tmp, f"cache-{gbit}-{batch}"); os.makedirs(cache, exist_ok=True)
def train(mode, yield_):
    metrics = os.path.join(tmp, f"{mode}.json")
    cmd = [f"{build}/burstpool", "train", fg, "--metrics", metrics, "--set", f"parallel.profile_cache={cache}",
           "--plan", "auto"]
    if mode == "burst":
        cmd += ["--set", "background.job=none"]
    env = dict(s.ENV, OMPI_MCA_mpi_yield_when_idle=yield_)
    s.run([s.LAUNCHER, "--quiet", "--gbit", gbit, "--nodes", "2", "--", "mpirun", "-np", "2"] + cmd, env)
    m = json.load(open(metrics))
    fgr = m["foreground_samples_per_second"] if mode == "burst_bg" else m["samples_per_second"]
    extra = {k: m.get(k) for k in ("background_samples_per_second", "foreground_slowdown")} if mode == "burst_bg" else {}
    return fgr, s.time_shares(m), extra
res = {}
for r in range(rounds):
    order = [("burst", "1"), ("burst_bg", "1"), ("burst", "0"), ("burst_bg", "0")]
    if r % 2: order.reverse()
    for mode, y in order:
        fgr, sh, extra = train(mode, y)
        res.setdefault((mode, y), []).append(fgr)
        print(f"round {r+1} {mode} yield={y}: fg {fgr:.1f} samples/s, shares " +
              ", ".join(f"{k} {v:.2f}" for k, v in sh.items()), extra, flush=True)
for y in ("1", "0"):
    a, b = statistics.median(res[("burst", y)]), statistics.median(res[("burst_bg", y)])
    print(f"yield_when_idle={y}: burst alone {a:.1f}, beside bg {b:.1f} samples/s: slowdown {a/b:.3f}")

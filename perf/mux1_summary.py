#!/usr/bin/env python3
"""Summarises perf/gpu_check.sh's mux1 section: one process hosting a
foreground and a background job on one GPU.

Reads the metrics JSON files the section wrote to MUXDIR:
  cause_<name>.json           small-VGG at batch 32 beside the background, one
                              setting changed at a time (binding, thread
                              priority, CUDA waits);
  b<B>_alone_<R>.json,        vgg16 at foreground batch B alone and beside the
  b<B>_shared_<R>.json        background, round R.
Writes OUT.json: {"device", "causes": {name: figures}, "points": [one per
foreground batch: "device", "foreground_batch", "rounds",
"foreground_slowdown", "cluster_throughput", "foreground_alone_samples_per_second",
"foreground_shared_samples_per_second", "background_alone_samples_per_second",
"background_shared_samples_per_second", "gpu_busy_fraction"]}.

Per batch, the medians over rounds of: foreground slowdown = fg alone (its own
run) / fg shared; cluster throughput = fg shared / fg alone + bg shared / bg
alone (the background's rate alone from the shared run's calibration; the
foreground is data parallel on one GPU, so its own alone run is the
data-parallel reference). gpu_busy_fraction: how much of the GPU the
foreground alone keeps busy at batch B, taking the largest batch as full:
(B / Bmax) x step time at Bmax / step time at B; 1 minus it is what the
foreground leaves idle for a background to pack into. A missing run is
reported as missing, never filled in.

Usage: perf/mux1_summary.py MUXDIR OUT.json
"""
import glob
import json
import os
import re
import statistics
import sys


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def cause_figures(m):
    b = m["background"]
    return {"foreground_samples_per_second": m["foreground_samples_per_second"],
            "foreground_slowdown": m["foreground_slowdown"],
            "background_alone_samples_per_second": b["alone_samples_per_second"],
            "background_shared_samples_per_second": m["background_samples_per_second"],
            "cluster_throughput": m["cluster_throughput_vs_data_parallel"],
            "thread_priority": b["priority"], "gate_wait_seconds": b["gate_wait_seconds"]}


def point(batch, pairs):
    """Medians over the rounds' (alone, shared) metrics of one foreground batch."""
    rows = []
    for alone, shared in pairs:
        fg_alone, fg = alone["samples_per_second"], shared["foreground_samples_per_second"]
        bg_alone, bg = shared["background"]["alone_samples_per_second"], shared["background_samples_per_second"]
        rows.append({"foreground_alone_samples_per_second": fg_alone,
                     "foreground_shared_samples_per_second": fg,
                     "background_alone_samples_per_second": bg_alone,
                     "background_shared_samples_per_second": bg,
                     "foreground_slowdown": fg_alone / fg,
                     "cluster_throughput": fg / fg_alone + bg / bg_alone})
    out = {k: statistics.median(r[k] for r in rows) for k in rows[0]}
    out.update({"foreground_batch": batch, "rounds": len(rows)})
    return out


def summarise(muxdir):
    runs = {os.path.basename(p)[:-5]: load(p) for p in glob.glob(os.path.join(muxdir, "*.json"))}
    device = next((m["run"]["device"] for m in runs.values() if m and "run" in m and m["run"].get("device")), "unknown")
    causes = {name[len("cause_"):]: cause_figures(m) if m else "missing or unreadable"
              for name, m in sorted(runs.items()) if name.startswith("cause_")}
    batches = sorted({int(re.match(r"b(\d+)_", n).group(1)) for n in runs if re.match(r"b\d+_(alone|shared)_\d+$", n)})
    points, missing = [], []
    for b in batches:
        rounds = sorted({n.rsplit("_", 1)[1] for n in runs if n.startswith(f"b{b}_")})
        pairs = [(runs.get(f"b{b}_alone_{r}"), runs.get(f"b{b}_shared_{r}")) for r in rounds]
        complete = [p for p in pairs if p[0] and p[1]]
        missing += [f"batch {b} round {r}" for r, p in zip(rounds, pairs) if not (p[0] and p[1])]
        if complete:
            points.append(dict(point(b, complete), device=device))
    if points:
        full = max(points, key=lambda p: p["foreground_batch"])
        step_full = full["foreground_batch"] / full["foreground_alone_samples_per_second"]
        for p in points:
            step = p["foreground_batch"] / p["foreground_alone_samples_per_second"]
            p["gpu_busy_fraction"] = p["foreground_batch"] / full["foreground_batch"] * step_full / step
    return {"device": device, "causes": causes, "points": points, "missing": missing}


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    summary = summarise(sys.argv[1])
    with open(sys.argv[2], "w") as f:
        json.dump(summary, f, indent=1)
    for name, c in summary["causes"].items():
        print(f"cause {name}: {c}")
    for p in summary["points"]:
        print(f"foreground batch {p['foreground_batch']}: slowdown {p['foreground_slowdown']:.3f}, cluster throughput "
              f"{p['cluster_throughput']:.3f}, GPU busy {p['gpu_busy_fraction']:.2f} ({p['rounds']} rounds)")
    for m in summary["missing"]:
        print(f"missing: {m}")


if __name__ == "__main__":
    main()

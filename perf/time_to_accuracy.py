#!/usr/bin/env python3
"""Time to accuracy on real Fashion-MNIST, LeNet-5, 2 ranks x 1 thread:
synchronous SGD at global batches 32 to 1024 against small-batch learners
(sma with an auto-tuned learner count, local-sgd, and shadow with each of
its three rules) at learner batches 8, 16 and 32, to 0.89 test accuracy.

Each strategy and batch gets a small learning-rate grid; every run stops at
the target (stop_at_target) or at its epoch budget. The table reports, per
strategy and batch, the run that reached the target in the least training
time (evaluation excluded; wall time including loading and evaluation
alongside), with its speed-up against the best ssgd setting of the whole
grid and against large-batch ssgd; every run is in the JSON. The logs
([output] log) of the best run of each strategy, and of large-batch ssgd,
are drawn by scripts/plot_run.py into <out>.png: training loss and test
accuracy against wall seconds and epochs.

--plot-best reruns only each strategy's best setting from an earlier
<out>.json and draws the PNG from those runs, leaving the table alone.

--tuned-grid runs a grid sized for one point of the network with repeats:
the learning rate and the schedule length (the cosine's epochs, which also
bound the run) tuned together for ssgd at global batch 128 and for local-sgd
and shadow average at batch 16; ssgd at 32 and 512 over the learning rate;
sma and shadow's other rules at one setting. The report marks a best setting
whose value lies on its grid's edge. With --model vgg_small, a reduced grid:
ssgd at 32 and 128, local-sgd averaging every 8 iterations and shadow
average, over three or four learning rates each with a 3- or 4-epoch
cosine, and the cosine's length at the rate that was best at 3 Gbit/s
(ssgd at 128: 1, 2 and 4 epochs; the learners: 1 to 4); sma and
shadow's other rules at one setting, last.

--slow-link-grid runs a grid for a link so slow that synchronous SGD at
global batch 128 waits on it most of its step: ssgd at larger batches (512
tuned in learning rate and schedule length; 128, 256 and 1024 beside it) and
local-sgd with its averaging period tuned; shadow and sma as --tuned-grid.
With --model vgg_small, whose runs take minutes, a reduced grid: ssgd at 512
and 1024, local-sgd averaging every 512 iterations and shadow average, over
three learning rates each (ssgd at 512 four).

--ranks-grid (small VGG only) tunes its 2-rank bests on a slow link again
for more ranks (--ranks 4): ssgd at 512 over three learning rates and
three schedules, at 128, 256 and 1024 beside it, shadow average over four
learning rates and three schedules, local-sgd averaging every 128
iterations, shadow's elastic rule at its 2-rank best.

--clock-grid (small VGG only) tunes again, at the point it runs on, the
strategies whose learning follows clocks: shadow average and shadow's elastic
rule over four and three learning rates around the 3 Gbit/s grid's best, with
that grid's best ssgd (global batch 128) beside them as the reference. ssgd's
and local-sgd's runs are the same bits on any link, so their grid carries over.

--sma-grid (small VGG only) tunes sma, run at one setting in the other
small-VGG grids: three learning rates at a 3-epoch cosine, and 2- and 1-epoch
cosines at the middle one, with the 3 Gbit/s grid's best ssgd beside it as
the reference; --block-momentum-grid likewise tunes shadow's block-momentum
rule over four learning rates (0.005-0.04), and for LeNet-5 over three
(0.005-0.02) at 5- and 8-epoch cosines, beside the best ssgd over shared
memory (global batch 512).

--repeats N runs every setting N times (job seeds 1..N, so data order,
initial weights and dropout differ) and reports the median training time and
its spread (slowest and fastest run); a setting counts as reaching the target
only if every repeat does; --interleave runs them in rounds (every setting
once per seed), so that a machine whose rate drifts slows all alike. --gbit
G runs every job inside scripts/shaped-net.sh, each rank on an emulated node
whose link is shaped to G Gbit/s (as root), and each run reports where the
ranks' time went (computing; waiting on transfers, gradient sums or other
ranks). --ranks N runs N ranks instead of 2; with more ranks than cores they
share the cores (oversubscribed: Open MPI's waiting ranks yield), and the
report says so. --bests-of runs earlier studies' best settings again, and with
--neighbours, for the strategies named, each best one step either side in
learning rate and schedule length too: a best found on a grid's edge checked
from inside a grid, side by side with the others' bests (--neighbour-keys
batch: ssgd at half and twice its global batch, the learning rate scaled
with it, the batch's edges checked likewise).

Usage: perf/time_to_accuracy.py [--build build] [--out perf/results/time_to_accuracy] [--plot-best]
                                [--small-grid | --tuned-grid | --slow-link-grid | --ranks-grid |
                                 --clock-grid | --sma-grid | --block-momentum-grid |
                                 --bests-of STUDY.json... [--top K]
                                 [--neighbours PREFIX... [--neighbour-keys lr|epochs|batch...]]]
                                [--repeats N [--interleave]] [--gbit G [--steady-link]] [--ranks N]
                                [--only PREFIX...] [--resume]
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import tempfile

import shaped_study  # one home for launching under a shaped network and for time shares

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ENV = dict(os.environ, OMP_NUM_THREADS="1", OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           OMPI_MCA_mpi_yield_when_idle="1")
MODEL, TARGET = "lenet5", 0.89  # --model, --target
MODEL_NAMES = {"lenet5": "LeNet-5", "vgg_small": "small VGG"}


def base_job():
    return f"""[job]
model = {ROOT}/jobs/models/{MODEL}.ini
seed = 1
[data]
source = fashion-mnist
normalize_mean = 0.2860
normalize_std = 0.3530
[train]
target_accuracy = {TARGET}
stop_at_target = true
log_every = 1000000
[optimizer]
momentum = 0.9
weight_decay = 0.0001
[schedule]
type = cosine
"""


SAMPLES, RANKS = 60000, 2


def quarter_epoch(batch_per_step):
    """Steps (or learner iterations) in a quarter of an epoch: the evaluation interval."""
    return max(1, SAMPLES // batch_per_step // 4)


def ssgd(batch, lr, epochs):
    warmup = SAMPLES // batch if batch >= 512 else 0  # one epoch of warm-up for the large batch
    return {"sync.strategy": "ssgd", "train.batch_size": batch, "train.epochs": epochs,
            "train.eval_every": quarter_epoch(batch), "optimizer.lr": lr, "optimizer.nesterov": "true",
            "schedule.warmup_steps": warmup}


def ssgd_label(batch):
    """The grids' label for ssgd at a global batch."""
    return f"ssgd, global batch {batch}"


def learners(strategy, batch, lr, epochs=5, **extra):
    # No evaluation interval here: the grids are built before --ranks is read, and a quarter epoch is
    # RANKS x batch samples an iteration; run() sets it for the ranks it runs on.
    return {"sync.strategy": strategy, "train.learner_batch_size": batch, "train.epochs": epochs,
            "optimizer.lr": lr, **extra}


# strategy label -> list of settings; batch is per learner except for ssgd (global). ssgd's
# learning rates are 0.25, 0.5, 1 and 2 x 0.02 x sqrt(B / 32) (the square-root rule), with a
# longer cosine schedule for the larger batches, which need more epochs; the learners' grids
# reach as low (0.005), so that no strategy's best sits on its grid's edge unseen.
SSGD_BATCHES = (32, 64, 128, 256, 1024)
LEARNER_BATCHES = (8, 16, 32)
GRID = {ssgd_label(b): [ssgd(b, round(0.02 * (b / 32) ** 0.5 * f, 4), 20 if b >= 512 else 8)
                                    for f in (0.25, 0.5, 1, 2)] for b in SSGD_BATCHES}
GRID.update({
    f"sma, batch {b} per learner, auto-tuned learners": [learners("sma", b, lr, **{"sync.alpha": 0.1})
                                                          for lr in (0.005, 0.01, 0.02, 0.05)] for b in LEARNER_BATCHES})
GRID.update({
    f"local-sgd, batch {b}, average every 8": [learners("local-sgd", b, lr, **{"sync.local_steps": 8})
                                               for lr in (0.005, 0.01, 0.02, 0.05)] for b in LEARNER_BATCHES})
GRID.update({
    f"shadow {rule}, batch {b}": [learners("shadow", b, lr, **{"sync.shadow_rule": rule})
                                  for lr in (0.005, 0.01, 0.02)]
    for rule in ("average", "elastic", "block-momentum") for b in LEARNER_BATCHES})
LARGE = ssgd_label(1024)
# --small-grid (a slower second model): ssgd at three batches and each learner strategy at batch 16, one
# learning rate each, the centre of the full grid's.
SMALL_GRID = {ssgd_label(b): [ssgd(b, round(0.02 * (b / 32) ** 0.5, 4), 20 if b >= 512 else 8)]
              for b in (32, 128, 1024)}
SMALL_GRID.update({
    "sma, batch 16 per learner, auto-tuned learners": [learners("sma", 16, 0.02, **{"sync.alpha": 0.1})],
    "local-sgd, batch 16, average every 8": [learners("local-sgd", 16, 0.02, **{"sync.local_steps": 8})],
    "shadow average, batch 16": [learners("shadow", 16, 0.02, **{"sync.shadow_rule": "average"})]})
# --tuned-grid (a point of the shaped network, with repeats): the learning rate and the schedule length (the
# cosine's epochs, which also bound the run) tuned together where the contest is: ssgd at global batch 128 (the
# best batch of earlier grids) and the two background-synchronised strategies, local-sgd and shadow average, at
# batch 16; ssgd at 32 and 512 over the learning rate with the longer schedule; sma and the other shadow rules at
# their best setting of the full grid.
SCHEDULE_GRID = {ssgd_label(128): [ssgd(128, round(0.04 * f, 4), e) for f in (0.25, 0.5, 1, 2)
                                    for e in (4, 8, 12)]}
# ssgd 32's best (0.01) and 512's (0.16) lay on their grids' edges without shaping, and ssgd 32's (0.005) and
# local-sgd's (0.005) at 3 Gbit/s: each grid reaches one step past them
SCHEDULE_GRID.update({ssgd_label(b): [ssgd(b, round(0.02 * (b / 32) ** 0.5 * f, 4), 8) for f in factors]
                      for b, factors in ((32, (0.125, 0.25, 0.5, 1, 2)), (512, (0.5, 1, 2, 4)))})
SCHEDULE_GRID.update({
    "local-sgd, batch 16, average every 8": [learners("local-sgd", 16, lr, e, **{"sync.local_steps": 8})
                                             for lr in (0.0025, 0.005, 0.01, 0.02, 0.05) for e in (3, 5, 8)],
    "shadow average, batch 16": [learners("shadow", 16, lr, e, **{"sync.shadow_rule": "average"})
                                 for lr in (0.005, 0.01, 0.02, 0.05) for e in (3, 5, 8)],
    "sma, batch 16 per learner, auto-tuned learners": [learners("sma", 16, 0.02, 5, **{"sync.alpha": 0.1})]})
SCHEDULE_GRID.update({f"shadow {rule}, batch 16": [learners("shadow", 16, 0.02, 5, **{"sync.shadow_rule": rule})]
                      for rule in ("elastic", "block-momentum")})
# --slow-link-grid (a link slow enough that ssgd at global batch 128 waits most of its step): ssgd moves to larger
# batches, which hide the gradient sum behind a longer backward pass, so global batch 512 gets the learning rate and
# schedule length tuned, with 256 and 1024 over the learning rate; local-sgd tunes how often it averages (every 8
# steps waits on the link most of the time) with the learning rate; shadow average as in --tuned-grid. On 4 ranks
# the bests lay on edges (ssgd 512's lowest learning rate; local-sgd's shortest period, longer ones not reaching
# 0.89 in every repeat within 5 epochs), so the grid goes one step past them: ssgd 512 at lr 0.04, local-sgd every
# 4 iterations, an 8-epoch cosine for averaging every 32 and 128, and then, its best schedule being the longest, a
# 12-epoch one for averaging every 128.
SLOW_LINK_GRID = {ssgd_label(512): [ssgd(512, round(0.16 * f, 4), e) for f in (0.5, 1, 2) for e in (3, 4, 8, 12)] +
                  [ssgd(512, 0.04, e) for e in (8, 12)]}
SLOW_LINK_GRID.update({ssgd_label(128): [ssgd(128, 0.02, 8)],
                       ssgd_label(256): [ssgd(256, round(0.08 * f, 4), 8) for f in (0.5, 1, 2)],
                       ssgd_label(1024): [ssgd(1024, round(0.2263 * f, 4), 12) for f in (0.5, 1, 2)]})
SLOW_LINK_GRID.update({
    "local-sgd, batch 16": [learners("local-sgd", 16, lr, 5, **{"sync.local_steps": k})
                            for k in (8, 32, 128, 512, 2048) for lr in (0.005, 0.01, 0.02, 0.04)] +
                           [learners("local-sgd", 16, 0.02, 5, **{"sync.local_steps": 4})] +
                           [learners("local-sgd", 16, lr, 8, **{"sync.local_steps": k})
                            for k in (32, 128) for lr in (0.01, 0.02)] +
                           [learners("local-sgd", 16, 0.01, 12, **{"sync.local_steps": 128})],
    "shadow average, batch 16": [learners("shadow", 16, lr, e, **{"sync.shadow_rule": "average"})
                                 for lr in (0.005, 0.01, 0.02) for e in (3, 5, 8)],
    "sma, batch 16 per learner, auto-tuned learners": [learners("sma", 16, 0.02, 8, **{"sync.alpha": 0.1})]})
SLOW_LINK_GRID.update({f"shadow {rule}, batch 16": [learners("shadow", 16, 0.02, 5, **{"sync.shadow_rule": rule})]
                       for rule in ("elastic", "block-momentum")})
# The learners run with [sync] agreement_lag at its default (32); shadow's best setting of the first 50 Mbit/s
# study once more without the lag, side by side, shows what the lag changes.
SLOW_LINK_GRID["shadow average, batch 16, agreement lag 0"] = [
    learners("shadow", 16, 0.01, 5, **{"sync.shadow_rule": "average", "sync.agreement_lag": 0})]

# --slow-link-grid with --model vgg_small (runs of minutes: a reduced grid): ssgd at global batches 512, where LeNet-5's
# best was on the slow link, and 1024, local-sgd averaging every 512 iterations and shadow average, over three
# learning rates each, every schedule 3-4 epochs (the unshaped study reached 0.90 in 1.5-2.7); ssgd at 512 also one
# learning rate lower, where its best lay on a link of 1 Gbit/s held to its rate.
# The learners come before ssgd at 1024 so that a study cut short keeps the comparison.
SLOW_LINK_GRID_VGG = {ssgd_label(512): [ssgd(512, lr, 4) for lr in (0.04, 0.08, 0.16, 0.32)],
                      "local-sgd, batch 16": [learners("local-sgd", 16, lr, 3, **{"sync.local_steps": 512})
                                              for lr in (0.005, 0.01, 0.02)],
                      "shadow average, batch 16": [learners("shadow", 16, lr, 3, **{"sync.shadow_rule": "average"})
                                                   for lr in (0.005, 0.01, 0.02)],
                      ssgd_label(1024): [ssgd(1024, lr, 4) for lr in (0.08, 0.16, 0.32)]}


# --tuned-grid with --model vgg_small (a link of gigabits, runs of minutes: a reduced grid): ssgd at global batches
# 32 (the best batch without shaping) and 128, local-sgd averaging every 8 iterations and shadow average, over three
# learning rates each around the unshaped grid's 0.02 (shadow's one step lower, where the 50 Mbit/s grid found it),
# every schedule 3-4 epochs (the unshaped study reached 0.90 in 1.5-2.7); ssgd at 128, the best at 1 Gbit/s (its
# lr 0.02 first on the grid's lower edge), one learning rate lower and a 2-epoch cosine too; ssgd at 32 and shadow
# one learning rate past the edge their first bests lay on. Both ssgd batches first
# (on a slow link the best may move from 32 to 128), so that a study cut short keeps the baseline whole; shadow last.
TUNED_GRID_VGG = {ssgd_label(32): [ssgd(32, lr, 4) for lr in (0.005, 0.01, 0.02, 0.04)],
                  ssgd_label(128): [ssgd(128, lr, 4) for lr in (0.01, 0.02, 0.04, 0.08)] +
                                   [ssgd(128, lr, 2) for lr in (0.02, 0.04)],
                  "local-sgd, batch 16, average every 8": [learners("local-sgd", 16, lr, 3, **{"sync.local_steps": 8})
                                                           for lr in (0.01, 0.02, 0.04)],
                  "shadow average, batch 16": [learners("shadow", 16, lr, 3, **{"sync.shadow_rule": "average"})
                                               for lr in (0.005, 0.01, 0.02, 0.04)]}
# sma and shadow's other two rules at one setting each, as in LeNet-5's grid: shadow average's best at 1 Gbit/s
# (lr 0.02, a 3-epoch cosine), sma with LeNet-5's alpha.
TUNED_GRID_VGG.update({"sma, batch 16 per learner, auto-tuned learners": [learners("sma", 16, 0.02, 3,
                                                                                    **{"sync.alpha": 0.1})]})
TUNED_GRID_VGG.update({f"shadow {rule}, batch 16": [learners("shadow", 16, 0.02, 3, **{"sync.shadow_rule": rule})]
                       for rule in ("elastic", "block-momentum")})
# At 3 Gbit/s the first 39 runs (ssgd at 128, local-sgd, shadow average) put ssgd's best on its shortest cosine (lr
# 0.02, 2 epochs) and tuned the learners' rate at one schedule only (3 epochs), so the schedule goes one step either
# side at the bests' rates: ssgd at 128 also with a 1-epoch cosine (which ended short of 0.90), the learners with 2-
# and 4-epoch ones, and then, their bests moving to 2 epochs, with 1-epoch ones too.
TUNED_GRID_VGG[ssgd_label(128)].append(ssgd(128, 0.02, 1))
TUNED_GRID_VGG["local-sgd, batch 16, average every 8"] += [learners("local-sgd", 16, 0.02, e, **{"sync.local_steps": 8})
                                                           for e in (2, 4, 1)]
TUNED_GRID_VGG["shadow average, batch 16"] += [learners("shadow", 16, 0.02, e, **{"sync.shadow_rule": "average"})
                                               for e in (2, 4, 1)]

# --ranks-grid with --model vgg_small (3-4 ranks over the cores, a link where ssgd waits: 1 Gbit/s held to its rate
# put ssgd at global batch 512 at 32% waiting on 4 ranks): the 2-rank bests at 1 Gbit/s tuned again for more ranks.
# ssgd at 512 (the 2-rank best, lr 0.08) one learning rate either side; at 1024, which sums half as often, at the
# 50 Mbit/s grid's best rate (0.16) and the one above it; shadow average (the 2-rank best, lr 0.02) one rate either side; local-sgd
# averaging every 128 iterations, between the 2-rank bests on fast (8) and slow (512) links; shadow's elastic rule
# at its 2-rank best (which diverged on 4 ranks with the fixed shadow_alpha of 0.5 then, as it did one rate lower:
# the centre's pull was unstable for 4 models; now 1/N). Learners before ssgd at 1024, so that a study cut short
# keeps the comparison. After the first 30 runs, the schedule one epoch shorter for the two bests (ssgd at 512, lr
# 0.08; shadow average, lr 0.01), and shadow one rate lower, its best lying on the grid's lower edge; then, both
# shorter schedules being slower, a longer one for each (6 and 5 epochs); and ssgd at the smaller global batches,
# which need fewer epochs but sum more often: 128 at its 2-rank best at 1 Gbit/s (lr 0.02, a 2-epoch cosine), 256
# between it and 512 (lr 0.04, 4 epochs).
RANKS_GRID_VGG = {ssgd_label(512): [ssgd(512, lr, 4) for lr in (0.04, 0.08, 0.16)] +
                                   [ssgd(512, 0.08, e) for e in (3, 6)],
                  "shadow average, batch 16": [learners("shadow", 16, lr, e, **{"sync.shadow_rule": "average"})
                                               for lr, e in ((0.01, 3), (0.02, 3), (0.04, 3), (0.005, 3),
                                                             (0.01, 2), (0.01, 5))],
                  "local-sgd, batch 16": [learners("local-sgd", 16, 0.02, 3, **{"sync.local_steps": 128})],
                  "shadow elastic, batch 16": [learners("shadow", 16, 0.02, 3, **{"sync.shadow_rule": "elastic"})],
                  ssgd_label(1024): [ssgd(1024, lr, 4) for lr in (0.16, 0.32)],
                  ssgd_label(128): [ssgd(128, 0.02, 2)],
                  ssgd_label(256): [ssgd(256, 0.04, 4)]}

# --clock-grid (small VGG only; a point of the network where the 3 Gbit/s grid's bests are known): shadow's learning
# rate tuned again at the point itself, since its learners average on a clock (a background thread's rounds), so how
# it learns moves with the link, where ssgd's and local-sgd's does not (tests/e2e/shaped_net.sh: the same bits on any
# link). Shadow average at its 3 Gbit/s best schedule (2 epochs) and the elastic rule at its (3 epochs), each one
# learning rate either side of their 3 Gbit/s best (0.02); ssgd at global batch 128 at its 3 Gbit/s best beside them
# (first, so that a study cut short keeps the baseline), the reference every speed-up is taken against. At 10
# Gbit/s shadow average's best lay on the grid's upper edge (0.04), so the grid goes one rate past it (0.08).
# The 3 Gbit/s grid's best ssgd (global batch 128, lr 0.02, a 2-epoch cosine): the reference beside the small-VGG
# grids below, first in each, so that a study cut short keeps it.
BEST_SSGD_3GBIT_VGG = {ssgd_label(128): [ssgd(128, 0.02, 2)]}
CLOCK_GRID_VGG = {**BEST_SSGD_3GBIT_VGG,
                  "shadow average, batch 16": [learners("shadow", 16, lr, 2, **{"sync.shadow_rule": "average"})
                                               for lr in (0.01, 0.02, 0.04, 0.08)],
                  "shadow elastic, batch 16": [learners("shadow", 16, lr, 3, **{"sync.shadow_rule": "elastic"})
                                               for lr in (0.01, 0.02, 0.04)]}

# --sma-grid (small VGG only): sma, which every small-VGG study so far ran at one setting (lr 0.02, a 3-epoch cosine,
# LeNet-5's alpha), tuned: one learning rate either side of that at its 3-epoch cosine, and a 2-epoch cosine at 0.02
# (it reached 0.90 at 2.00 epochs at 3 Gbit/s, where the other learners' bests moved to 2-epoch cosines).
# Over shared memory the 2-epoch cosine was best, on the schedule's short edge: then a 1-epoch cosine too.
SMA_GRID_VGG = {**BEST_SSGD_3GBIT_VGG,
                "sma, batch 16 per learner, auto-tuned learners": [learners("sma", 16, lr, e, **{"sync.alpha": 0.1})
                                                                   for lr, e in ((0.02, 3), (0.01, 3), (0.04, 3),
                                                                                 (0.02, 2), (0.02, 1))]}

# --block-momentum-grid (small VGG only): shadow's block-momentum rule, which every small-VGG study so far ran at one
# setting (lr 0.02, a 3-epoch cosine), over learning rates either side at that cosine.
# Over shared memory the lowest (0.01) was best, on the grid's edge: then 0.005 too.
BLOCK_MOMENTUM_GRID_VGG = {**BEST_SSGD_3GBIT_VGG,
                           "shadow block-momentum, batch 16": [
                               learners("shadow", 16, lr, 3, **{"sync.shadow_rule": "block-momentum"})
                               for lr in (0.01, 0.02, 0.04, 0.005)]}

# --block-momentum-grid for LeNet-5: the rule, which every LeNet-5 study ran at one setting (lr 0.02, a 5-epoch
# cosine) and which reached 0.89 in none of them, over three learning rates at that cosine and an 8-epoch one, beside
# the best ssgd over shared memory (global batch 512 at lr 0.16, an 8-epoch cosine, inside its learning-rate grid).
BLOCK_MOMENTUM_GRID = {ssgd_label(512): [ssgd(512, 0.16, 8)],
                       "shadow block-momentum, batch 16": [
                           learners("shadow", 16, lr, e, **{"sync.shadow_rule": "block-momentum"})
                           for e in (5, 8) for lr in (0.005, 0.01, 0.02)]}

# The grid flags, in the order a study's report names them: the grid each names for LeNet-5 and for small VGG, whose
# runs take minutes and get reduced twins (None: the flag has no grid for that model).
NAMED_GRIDS = {"small_grid": (SMALL_GRID, SMALL_GRID), "tuned_grid": (SCHEDULE_GRID, TUNED_GRID_VGG),
               "slow_link_grid": (SLOW_LINK_GRID, SLOW_LINK_GRID_VGG), "ranks_grid": (None, RANKS_GRID_VGG),
               "clock_grid": (None, CLOCK_GRID_VGG), "sma_grid": (None, SMA_GRID_VGG),
               "block_momentum_grid": (BLOCK_MOMENTUM_GRID, BLOCK_MOMENTUM_GRID_VGG)}

GBIT = "none"  # --gbit
FLAGS = []  # the grid, repeats and network flags the study ran with, for its report


def run(build, tmp, settings, log):
    if "train.eval_every" not in settings:  # the learners: a quarter epoch of every rank's learner
        settings = {**settings, "train.eval_every": quarter_epoch(RANKS * settings["train.learner_batch_size"])}
    # Progress records for the plot: about 12 per epoch (58 ssgd steps, ~1875 learner iterations an epoch).
    settings = {"train.log_every": max(1, settings["train.eval_every"] // 3), **settings}
    if settings["sync.strategy"] != "ssgd" and "train.batch_size" in settings:  # results written before the key
        settings["train.learner_batch_size"] = settings.pop("train.batch_size")
    job = os.path.join(tmp, "job.ini")
    open(job, "w").write(base_job())
    metrics = os.path.join(tmp, "m.json")
    cmd = [f"{build}/burstpool", "train", job, "--metrics", metrics, "--set", f"output.log={log}"]
    for k, v in settings.items():
        cmd += ["--set", f"{k}={v}"]
    try:
        if GBIT == "none" and RANKS == 2:
            shaped_study.run(["mpirun", "-np", "2"] + cmd, ENV)
        else:  # shaped, or more ranks than cores (oversubscribed: Open MPI's ranks yield while they wait)
            shaped_study.launch({"ranks": RANKS, "gbit": GBIT}, cmd)
    except RuntimeError as failed:
        if "non-finite" not in str(failed):
            raise
        # Diverged (too high a learning rate): a run of the grid that never reaches the target.
        return {"settings": settings, "log": log, "diverged": True, "time_to_target_seconds": None, "shares": None,
                "wall_to_target_seconds": None, "epochs_to_target": None, "best_accuracy": None, "epochs_run": None,
                "samples_per_second": None, "learners_per_rank": None, "learner_tuning": []}
    m = json.load(open(metrics))
    shares = shaped_study.time_shares(m) if m.get("per_rank") else None
    return {"settings": settings, "log": log, "time_to_target_seconds": m["time_to_target_seconds"], "shares": shares,
            "wall_to_target_seconds": m["wall_to_target_seconds"], "epochs_to_target": m["epochs_to_target"],
            "best_accuracy": max(e["test_accuracy"] for e in m["evaluations"]), "epochs_run": m["epochs"],
            "samples_per_second": m["samples_per_second"], "learners_per_rank": m["learners_per_rank"],
            "learner_tuning": m["learner_tuning"]}


def run_key(label, settings, seed):
    """A run's key in <out>.partial.json: its strategy label and its settings with the seed."""
    return label + json.dumps({**settings, "job.seed": seed}, sort_keys=True)


def run_order(labels, grid, repeats, interleave):
    """The runs as (label's place, label, setting's number, settings, seed): each setting's repeats one after
    another, or with `interleave` in rounds, every setting once per seed, so that a machine whose rate drifts
    during the study slows every setting alike."""
    settings = [(place, label, number, s)
                for place, label in enumerate(labels, 1) for number, s in enumerate(grid[label])]
    seeds = range(1, repeats + 1)
    if interleave:
        return [(*one, seed) for seed in seeds for one in settings]
    return [(*one, seed) for one in settings for seed in seeds]


def chosen_by(prefixes, label):
    """--only's and --neighbours' rule: `label` starts with one of `prefixes`; a prefix ending in $ must be the
    whole label."""
    return any(label == prefix[:-1] if prefix.endswith("$") else label.startswith(prefix) for prefix in prefixes)


def named_grids(args):
    """The grid flags given, as (flag, the grid it names for MODEL, or None), in NAMED_GRIDS' order."""
    return [(f"--{name.replace('_', '-')}", grids[MODEL == "vgg_small"])
            for name, grids in NAMED_GRIDS.items() if getattr(args, name)]


def grid_for(args):
    """The grid the flags name: the bests of earlier studies, the first grid flag given, or the full grid."""
    if args.bests_of:
        grid = bests_grid(args.bests_of, args.top)
        chosen = {label: neighbourhoods(settings, args.neighbour_keys) if neighboured(args, label) else settings
                  for label, settings in grid.items()}
        if "batch" in args.neighbour_keys:
            for label, bests in grid.items():
                if neighboured(args, label):
                    for settings in batch_neighbours(bests):
                        add_once(chosen, ssgd_label(settings["train.batch_size"]), settings)
        return chosen
    named = named_grids(args)
    return named[0][1] if named else GRID


NEIGHBOUR_KEYS = ("lr", "epochs")  # the keys --neighbours steps by default: learning rate, schedule length
# and, named only, "batch": ssgd's global batch (batch_neighbours)


def neighboured(args, label):
    """Whether --neighbours names `label`."""
    return chosen_by(args.neighbours or [], label)


def neighbourhoods(bests, keys=NEIGHBOUR_KEYS):
    """Each best setting and its neighbours in `keys`: "lr", the learning rate halved and doubled at its schedule;
    "epochs", the schedule a quarter of its length shorter (if any is left) and longer at its rate, at least one
    epoch (so 1 around 2-5 epochs, 3 around 12: one epoch either side of a long cosine changes little). A setting
    reached from two bests runs once."""
    grid = []
    for best in bests:
        lr, epochs = best["optimizer.lr"], best["train.epochs"]
        step = max(1, round(epochs / 4))
        rates = [{**best, "optimizer.lr": lr * f} for f in (0.5, 2)] if "lr" in keys else []
        lengths = [{**best, "train.epochs": e} for e in (epochs - step, epochs + step) if e >= 1] if "epochs" in keys else []
        for settings in [best] + rates + lengths:
            if settings not in grid:
                grid.append(settings)
    return grid


def batch_neighbours(bests):
    """ssgd's bests at half and twice their global batch, the learning rate scaled with it (the linear rule),
    the schedule's epochs kept, and the evaluation interval and warm-up those of the new batch (ssgd()): the
    batch's edges checked side by side. Settings of other strategies have no neighbours here."""
    return [ssgd(best["train.batch_size"] * f // 2, round(best["optimizer.lr"] * f / 2, 4), best["train.epochs"])
            for best in bests if best["sync.strategy"] == "ssgd" for f in (1, 4)]


def add_once(grid, label, settings):
    """Adds `settings` to `grid`'s list under `label` unless it is there: a setting reached twice runs once."""
    known = grid.setdefault(label, [])
    if settings not in known:
        known.append(settings)


def bests_grid(studies, top):
    """Each strategy's `top` fastest settings that reached the target in each of earlier studies' JSONs, to run
    them again side by side elsewhere (another network); a setting found in several studies runs once, and
    strategies that never reached it are left out. The learners' evaluation interval is dropped, for run() to set
    it for the ranks it runs on."""
    def kept(settings):
        drop = {"job.seed", "train.log_every"} | ({"train.eval_every"} if settings["sync.strategy"] != "ssgd" else set())
        return {k: v for k, v in settings.items() if k not in drop}

    grid = {}
    for study in studies:
        for label, runs in json.load(open(study))["runs"].items():
            reached = sorted((r for r in runs if r["time_to_target_seconds"] is not None),
                             key=lambda r: r["time_to_target_seconds"])
            for settings in (kept(r["settings"]) for r in reached[:top]):
                add_once(grid, label, settings)
    return grid


def main():
    global MODEL, TARGET, GBIT, RANKS
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--out", default=os.path.join(ROOT, "perf", "results", "time_to_accuracy"))
    ap.add_argument("--plot-best", action="store_true")
    ap.add_argument("--model", default=MODEL, choices=sorted(MODEL_NAMES))
    ap.add_argument("--target", type=float, default=TARGET)
    ap.add_argument("--small-grid", action="store_true", help="one learning rate per setting, fewer batches")
    ap.add_argument("--tuned-grid", action="store_true",
                    help="three ssgd batches and the learners at batch 16, schedule length tuned for each")
    ap.add_argument("--slow-link-grid", action="store_true",
                    help="ssgd at 512 tuned with 128, 256 and 1024 beside it, local-sgd's averaging period tuned")
    ap.add_argument("--ranks-grid", action="store_true",
                    help="small VGG only: its 2-rank bests on a slow link, tuned again for more ranks")
    ap.add_argument("--clock-grid", action="store_true",
                    help="small VGG only: shadow's learning rate tuned again at this point, the 3 Gbit/s grid's "
                         "best ssgd beside it")
    ap.add_argument("--sma-grid", action="store_true",
                    help="small VGG only: sma's learning rate and schedule length tuned, the 3 Gbit/s grid's best "
                         "ssgd beside it")
    ap.add_argument("--block-momentum-grid", action="store_true",
                    help="shadow block momentum's learning rate tuned (LeNet-5: and its schedule), beside the best "
                         "ssgd (small VGG: the 3 Gbit/s grid's; LeNet-5: over shared memory)")
    ap.add_argument("--repeats", type=int, default=1, help="runs per setting (job seeds 1..N)")
    ap.add_argument("--gbit", default="none", help="links shaped to this many Gbit/s per rank (as root)")
    ap.add_argument("--ranks", type=int, default=RANKS,
                    help="ranks (more than this machine's cores: oversubscribed, waits yield; labelled so)")
    ap.add_argument("--resume", action="store_true", help="reuse the runs kept in <out>.partial.json")
    ap.add_argument("--interleave", action="store_true",
                    help="run in rounds, every setting once per seed, instead of each setting's repeats in a row")
    ap.add_argument("--bests-of", metavar="STUDY.json", nargs="+",
                    help="instead of a grid: each strategy's --top fastest settings in each of these studies' JSONs")
    ap.add_argument("--top", type=int, default=2, help="with --bests-of: settings per strategy (default 2)")
    ap.add_argument("--neighbours", nargs="+", metavar="PREFIX",
                    help="with --bests-of: for the strategies whose labels start with one of these (as --only), "
                         "each best also one step either side (learning rate halved and doubled, schedule shorter "
                         "and longer by a quarter of its length, at least an epoch), so that its edges are checked")
    ap.add_argument("--neighbour-keys", nargs="+", choices=NEIGHBOUR_KEYS + ("batch",), default=list(NEIGHBOUR_KEYS),
                    help="with --neighbours: step only these keys (default lr and epochs), e.g. epochs to check a "
                         "schedule edge without the learning rates again; batch: ssgd at half and twice its "
                         "global batch, the learning rate scaled with it")
    ap.add_argument("--steady-link", action="store_true",
                    help="shape with scripts/shaped-net.sh --steady (bursts held to the rate too)")
    ap.add_argument("--only", nargs="+", metavar="PREFIX",
                    help="run only the grid's strategies whose labels start with one of these (e.g. shadow "
                         "'ssgd, global batch 32'; ending in $, the whole label), to remeasure part of the table side "
                         "by side")
    args = ap.parse_args()
    MODEL, TARGET, GBIT, RANKS = args.model, args.target, args.gbit, args.ranks
    shaped_study.STEADY_LINK = args.steady_link
    if RANKS < 2:
        ap.error("--ranks: at least 2")
    if args.neighbours and not args.bests_of:
        ap.error("--neighbours: only with --bests-of")
    for flag, grid in named_grids(args):
        if grid is None:
            ap.error(f"{flag}: a grid of --model vgg_small")
    FLAGS[:] = ([flag for flag, _ in named_grids(args)] +
                ([f"--repeats {args.repeats}"] if args.repeats > 1 else []) +
                ([f"--gbit {args.gbit}"] if args.gbit != "none" else []) +
                ([f"--ranks {args.ranks}"] if args.ranks != 2 else []) +
                ([f"--only {' '.join(repr(o) for o in args.only)}"] if args.only else []) +
                (["--interleave"] if args.interleave else []) +
                ([f"--bests-of {' '.join(os.path.relpath(b, ROOT) for b in args.bests_of)} --top {args.top}"]
                 if args.bests_of else []) +
                ([f"--neighbours {' '.join(repr(n) for n in args.neighbours)}"] if args.neighbours else []) +
                ([f"--neighbour-keys {' '.join(args.neighbour_keys)}"]
                 if args.neighbours and args.neighbour_keys != list(NEIGHBOUR_KEYS) else []) +
                (["--steady-link"] if args.steady_link else []))
    tmp = tempfile.mkdtemp()
    if args.plot_best:
        plot_best(args, tmp)
        return
    chosen = grid_for(args)
    # Every finished run is kept in <out>.partial.json at once; --resume takes those runs back (their
    # logs stay where that study wrote them), so that a study stopped half way loses nothing.
    partial = args.out + ".partial.json"
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    done = json.load(open(partial)) if args.resume and os.path.exists(partial) else {}
    labels = [label for label in chosen if not args.only or chosen_by(args.only, label)]
    for place, label, number, settings, seed in run_order(labels, chosen, args.repeats, args.interleave):
        key = run_key(label, settings, seed)
        if key not in done:
            done[key] = run(args.build, tmp, {**settings, "job.seed": seed},
                            os.path.join(tmp, f"{place}-{number}-{seed}.jsonl"))
            json.dump(done, open(partial, "w"))
        print(label, json.dumps(done[key]), flush=True)
    results = {label: [summarise_repeats([done[run_key(label, settings, seed)] for seed in range(1, args.repeats + 1)])
                       for settings in chosen[label]] for label in labels}
    best = {label: best_of(runs) for label, runs in results.items()}
    for label, r in best.items():
        if r is not None and (not args.bests_of or neighboured(args, label)):  # bests alone are no grid
            r["edges"] = grid_edges(r["settings"], chosen[label])
    lines = table(best)
    text = "\n".join(lines) + "\n"
    open(args.out + ".md", "w").write(text)
    # The JSON names each run's log by its file name alone; the plot below still reads them where they are.
    saved = {label: [dict(r, log=os.path.basename(r["log"])) for r in runs] for label, runs in results.items()}
    json.dump({"model": MODEL, "target": TARGET, "runs": saved}, open(args.out + ".json", "w"), indent=1)
    print(text)
    plot(families(best), tmp, args.out + ".png")
    shutil.rmtree(tmp)
    os.remove(partial)


def families(best):
    """For the plot: the best run of each strategy over its batches, and large-batch ssgd."""
    chosen = {}
    for family in ("ssgd", "sma", "local-sgd", "shadow"):
        runs = [(label, r) for label, r in best.items() if label.startswith(family) and r is not None]
        if runs:
            label, r = min(runs, key=lambda lr: lr[1]["time_to_target_seconds"])
            chosen[label] = r
    if best.get(LARGE) is not None:
        chosen[LARGE] = best[LARGE]
    return chosen


def setting_text(s):
    """A setting as the tables name it: its learning rate, schedule and averaging period."""
    text = f"lr {s['optimizer.lr']}, {s['train.epochs']}-epoch cosine"
    if "sync.local_steps" in s:
        text += f", average every {s['sync.local_steps']}"
    return text


def table(best):
    """Each strategy's best run, with its speed-up against the best ssgd setting and against large-batch ssgd."""
    reached = {label: r for label, r in best.items() if r is not None}
    ssgd_best = min((r for label, r in reached.items() if label.startswith("ssgd")),
                    key=lambda r: r["time_to_target_seconds"], default=None)
    large = reached.get(LARGE)
    command = "python3 perf/time_to_accuracy.py" + ("" if MODEL == "lenet5" else f" --model {MODEL} --target {TARGET}")
    command += "".join(f" {flag}" for flag in FLAGS)
    network = "shared memory" if GBIT == "none" else (
        f"links shaped to {GBIT} Gbit/s per rank (scripts/shaped-net.sh{' --steady' if shaped_study.STEADY_LINK else ''})")
    cores = os.cpu_count()
    placement = f" on {cores} cores, oversubscribed (waiting ranks yield)" if RANKS > cores else ""
    lines = [f"# Time to {TARGET} test accuracy, {MODEL_NAMES[MODEL]} on Fashion-MNIST, {RANKS} ranks x 1 thread"
             f"{placement}, {network}", "",
             f"Command: `{command}`. Per strategy and batch the best of its learning-rate grid (every run in "
             "the JSON); with repeats, medians, and a setting reaches the target only if every repeat does. "
             "Training seconds exclude evaluations (every quarter epoch); wall seconds include loading and "
             "evaluations. Speed-ups are in training seconds, against the best ssgd setting of the whole grid and "
             "against large-batch ssgd. Time shares are the ranks' mean over training time: computing (the "
             "learners' steps), waiting (gradient sums, the learners' synchronisation on the training thread, "
             "other ranks), and background (shadow's averaging thread waiting for its allreduce, beside the steps). Edge: a tuned setting "
             "whose best value is the lowest or highest of its grid.", "",
             "| strategy | best setting | epochs to target | training s | repeats' s | wall s | samples/s | "
             "computing, waiting, background | learners per rank | vs best ssgd | vs ssgd at 1024 |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for label, r in best.items():
        if r is None:
            lines.append(f"| {label} | none reached {TARGET} | | | | | | | | | |")
            continue
        setting = setting_text(r["settings"])
        if r.get("edges"):
            setting += f" (edge: {', '.join(r['edges'])})"
        vs = lambda base: f"{base['time_to_target_seconds'] / r['time_to_target_seconds']:.2f}x" if base else "n/a"
        spread = ", ".join(f"{t:.1f}" for t in r.get("repeat_seconds", []) if t is not None)
        sh = r.get("shares")
        waiting = f"{sh['compute']:.0%}, {sh['waiting']:.0%}, {sh.get('background_sync', 0):.0%}" if sh else ""
        lines.append(f"| {label} | {setting} | {r['epochs_to_target']:.2f} | {r['time_to_target_seconds']:.1f} | "
                     f"{spread} | {r['wall_to_target_seconds']:.1f} | {r['samples_per_second']:.0f} | {waiting} | "
                     f"{r['learners_per_rank']} | {vs(ssgd_best)} | {vs(large)} |")
    for label, r in reached.items():
        if label.startswith("sma"):
            lines += ["", f"Auto-tuner trials, {label} (learners per rank: samples/s): " +
                      ", ".join(f"{t['learners']}: {t['samples_per_second']:.0f}" for t in r["learner_tuning"])]
    return lines


def grid_edges(settings, grid):
    """The tuned keys (learning rate, schedule length) whose best value sits on the edge of its grid, where a
    better value may lie outside it; a key the grid does not vary is not tuned and never an edge."""
    edges = []
    for key, name in (("optimizer.lr", "lr"), ("train.epochs", "epochs"), ("sync.local_steps", "averaging period")):
        values = sorted({g[key] for g in grid if key in g})
        if len(values) > 1 and settings[key] in (values[0], values[-1]):
            edges.append(f"{name} {'lowest' if settings[key] == values[0] else 'highest'}")
    return edges


def summarise_repeats(repeats):
    """One record for a setting's repeats: the median run's figures, with every repeat's time kept."""
    times = [r["time_to_target_seconds"] for r in repeats]
    if len(repeats) == 1:
        return {**repeats[0], "repeat_seconds": times}
    reached = [r for r in repeats if r["time_to_target_seconds"] is not None]
    median = dict(sorted(reached, key=lambda r: r["time_to_target_seconds"])[len(reached) // 2] if reached else repeats[0])
    median["repeat_seconds"] = times
    median["repeat_epochs"] = [r["epochs_to_target"] for r in repeats]
    if len(reached) < len(repeats):  # a setting that misses the target in any repeat has not reached it
        median["time_to_target_seconds"] = None
        return median
    for key in ("time_to_target_seconds", "wall_to_target_seconds", "epochs_to_target", "samples_per_second"):
        median[key] = statistics.median(r[key] for r in repeats)
    if all(r["shares"] for r in repeats):
        median["shares"] = {k: statistics.median(r["shares"][k] for r in repeats) for k in repeats[0]["shares"]}
    return median


def best_of(runs):
    reached = [r for r in runs if r["time_to_target_seconds"] is not None]
    return min(reached, key=lambda r: r["time_to_target_seconds"]) if reached else None


def plot_best(args, tmp):
    """Each strategy's best setting of the last full study, run again, then drawn."""
    earlier = json.load(open(args.out + ".json"))["runs"]
    best = {}
    for number, (label, runs) in enumerate(earlier.items()):
        chosen = best_of(runs)
        if chosen is not None:
            best[label] = chosen
    best = families(best)
    for number, label in enumerate(best):
        best[label] = run(args.build, tmp, best[label]["settings"], os.path.join(tmp, f"best-{number}.jsonl"))
        print(label, json.dumps(best[label]), flush=True)
    plot(best, tmp, args.out + ".png")
    shutil.rmtree(tmp)


def plot(best, tmp, png):
    """The best run of each strategy, through scripts/plot_run.py (a Python with matplotlib)."""
    logs, labels = [], []
    for label, r in best.items():
        if r is None:
            continue
        log = os.path.join(tmp, r["log"])
        if not os.path.exists(log):  # a run --resume took back from a study that had finished and removed its logs
            print(f"{label}: the best run's log {log} is gone: left out of the plot")
            continue
        logs.append(log)
        labels += ["--label", label]
    if not logs:
        print(f"no best run to draw (none reached {TARGET}, or their logs are gone): no plot")
        return
    python = next((p for p in ("python3", "/usr/bin/python3")
                   if subprocess.run([p, "-c", "import matplotlib"], capture_output=True).returncode == 0), None)
    if python is None:
        print("no Python with matplotlib: no plot")
        return
    subprocess.run([python, os.path.join(ROOT, "scripts", "plot_run.py"), *logs, "--out", png, *labels,
                    "--title", f"Time to {TARGET} test accuracy: the best run of each strategy"], check=True)


if __name__ == "__main__":
    main()

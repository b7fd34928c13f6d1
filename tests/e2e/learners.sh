#!/usr/bin/env bash
# Small-batch learners end to end ([sync] strategy = sma, local-sgd, shadow):
# N ranks against 1 rank with the same learners in all (2 ranks x 1 learner
# equals 1 rank x 2 learners, bit for bit), losses fall, auto-tuning and the
# time-to-target metrics are reported, and bad settings are refused.
# Usage: learners.sh BURSTPOOL_BINARY SOURCE_DIR
set -u
source "$(dirname "$0")/lib/harness.sh" "$@"
command -v mpirun >/dev/null || { echo "mpirun missing"; exit 1; }

cat >"$work/job.ini" <<JOB
[job]
model = $src/jobs/models/lenet5.ini
seed = 5
[data]
source = synthetic
synthetic_train_samples = 1024
synthetic_test_samples = 256
[train]
batch_size = 8
epochs = 2
eval_every = 16
log_every = 16
[optimizer]
lr = 0.01
momentum = 0.9
[sync]
strategy = sma
learners = 1
alpha = 0.2
JOB
train() {  # train NAME RANKS [args]: output in $work/NAME.*
  local name=$1 ranks=$2
  shift 2
  timeout 300 mpirun -np "$ranks" --oversubscribe "$bin" train "$work/job.ini" --checkpoint "$work/$name.h5" \
    --metrics "$work/$name.json" "$@" >"$work/$name.out" 2>"$work/$name.err" || fail "$name: exit $?: $(tail -3 "$work/$name.err")"
}
metric() { python3 -c "import json,sys; m=json.load(open('$work/$1.json')); print(eval(sys.argv[1]))" "$2"; }

# 1. N ranks against 1 rank: learner j of rank r takes learner batch r*k + j of
#    each iteration, so 2 ranks x 1 learner and 1 rank x 2 learners see the
#    same batches; the average model must come out the same.
for strategy in sma local-sgd; do
  train "$strategy-1x2" 1 --set sync.strategy=$strategy --set sync.learners=2 --set sync.local_steps=4
  BURSTPOOL_TEST_CHECK_AVERAGE=1 \
    train "$strategy-2x1" 2 --set sync.strategy=$strategy --set sync.learners=1 --set sync.local_steps=4
  h5same "$work/$strategy-1x2.h5" "$work/$strategy-2x1.h5" ||
    fail "$strategy: 2 ranks x 1 learner differ from 1 rank x 2 learners"
done

# 1b. With batch norm: evaluation and the checkpoint use the average of every
#     replica's statistics, so those of 2x1 and 1x2 agree too.
bn=(--set "job.model=$src/jobs/models/vgg_small.ini" --set train.epochs=1)
train bn-1x2 1 "${bn[@]}" --set sync.learners=2
train bn-2x1 2 "${bn[@]}" --set sync.learners=1
if h5same "$work/bn-1x2.h5" "$work/bn-2x1.h5" &&
  diff <(grep "^eval" "$work/bn-1x2.out") <(grep "^eval" "$work/bn-2x1.out") >/dev/null; then
  echo "ok   batch norm: 2 ranks x 1 learner and 1 rank x 2 learners give the same evaluations and checkpoint"
else
  fail "batch norm: 2x1 and 1x2 differ: $(diff <(grep "^eval" "$work/bn-1x2.out") <(grep "^eval" "$work/bn-2x1.out") | head -4)"
fi

# 1c. The device path (twin device), 2 learners per rank on 2 ranks: with
#     the average model kept on each learner's device or sent up every step,
#     the same checkpoint as the CPU's, bit for bit.
twin=(--set job.device=twin --set sync.learners=2 --set train.epochs=1)
train twin-cpu 2 --set sync.learners=2 --set train.epochs=1
train twin-resident 2 "${twin[@]}" --set sync.sma_average=device
train twin-host 2 "${twin[@]}" --set sync.sma_average=host
if h5same "$work/twin-cpu.h5" "$work/twin-resident.h5" && h5same "$work/twin-cpu.h5" "$work/twin-host.h5"; then
  echo "ok   twin device: z on the device, z sent up each step and the CPU give the same checkpoint"
else
  fail "twin device: sma_average = device or host differs from the CPU"
fi

# 2. Every strategy learns; shadow averages in the background.
train shadow 2 --set sync.strategy=shadow --set sync.learners=1
for run in sma-2x1 local-sgd-2x1 shadow; do
  python3 - "$work/$run.json" "$run" <<'PY' || fail "$run: did not learn"
import json, sys
m = json.load(open(sys.argv[1]))
ev = m["evaluations"]
print(sys.argv[2], "test accuracy", ev[0]["test_accuracy"], "->", ev[-1]["test_accuracy"], "loss", m["final_loss"])
sys.exit(0 if ev[-1]["test_accuracy"] > 0.9 and ev[-1]["test_loss"] < 0.5 * ev[0]["test_loss"] else 1)
PY
done
[[ $(metric shadow 'm["shadow_rounds"] > 0') == True ]] || fail "shadow: no averaging rounds"
# Where each rank's time went: the learners' steps, the loop's synchronisation
# (sma and local-sgd average there; shadow does not), the rest idle, summing
# to the training seconds; shadow's thread synchronises beside the steps.
for run in sma-2x1 local-sgd-2x1 shadow; do
  python3 - "$work/$run.json" "$run" <<'PY' || fail "$run: per-rank time split wrong"
import json, sys
m, run = json.load(open(sys.argv[1])), sys.argv[2]
ranks = m["per_rank"]
assert len(ranks) == 2, ranks
assert ranks[0]["train_seconds"] == m["train_seconds"], (ranks[0], m["train_seconds"])
for r in ranks:
    parts = r["compute_seconds"] + r["transfer_seconds"] + r["allreduce_seconds"] + r["idle_seconds"]
    assert r["compute_seconds"] > 0 and r["transfer_seconds"] == 0, r
    # Each rank's own training seconds: the ranks' differ by the waits outside their steps.
    assert abs(parts - r["train_seconds"]) <= 0.05 * r["train_seconds"] + 0.01, (parts, r["train_seconds"])
    assert r["train_seconds"] > 0 and r["train_seconds"] <= m["wall_seconds"], (r["train_seconds"], m["wall_seconds"])
    # shadow's loop calls an after_iteration that does nothing: microseconds
    assert (r["allreduce_seconds"] > 0.001 * m["train_seconds"]) == (run != "shadow"), r
    assert (r["background_sync_seconds"] > 0) == (run == "shadow"), r
print(f"ok   {run}: rank 0 computed {ranks[0]['compute_seconds']:.2f} s, synchronised {ranks[0]['allreduce_seconds']:.3f} s "
      f"(background {ranks[0]['background_sync_seconds']:.3f} s) of {m['train_seconds']:.2f} s")
PY
done
# sma's average model z was compared across ranks after every synchronisation (BURSTPOOL_TEST_CHECK_AVERAGE).
grep -q "average model identical on every rank after each of 128 synchronisations" "$work/sma-2x1.out" ||
  fail "sma: average model not checked on every rank: $(grep average "$work/sma-2x1.out")"

# 3. Auto-tuning (learners = 0) reports its trials and the count it kept;
#    target accuracy gives time and epochs to it, and stop_at_target ends early.
train tuned 2 --set sync.learners=0 --set sync.autotune_steps=5 --set train.target_accuracy=0.9 \
  --set train.stop_at_target=true --set train.epochs=6
python3 - "$work/tuned.json" "$work/tuned.out" <<'PY' || fail "tuned: metrics wrong"
import json, sys
m = json.load(open(sys.argv[1]))
out = open(sys.argv[2]).read()
t = m["learner_tuning"]
checks = {
    "trials recorded": len(t) >= 2 and t[0]["learners"] == 1 and all(x["samples_per_second"] > 0 for x in t),
    "count kept": 1 <= m["learners_per_rank"] <= 8 and f"learners {m['learners_per_rank']}" in out,
    "target reached": m["time_to_target_seconds"] is not None and 0 < m["epochs_to_target"] < 6,
    "stopped at target": m["epochs"] < 6 and abs(m["evaluations"][-1]["epoch"] - m["epochs_to_target"]) < 1e-9,
}
for name, ok in checks.items():
    print(("ok   " if ok else "FAIL ") + name)
sys.exit(0 if all(checks.values()) else 1)
PY

# 3b. shadow with 2 learners per rank on 2 ranks: four trainers, each stepping
#     on its own thread, averaged in the background; the loss falls. Again
#     with the replicas on the twin device (the thread's hand-overs there).
train shadow-2x2 2 --set sync.strategy=shadow --set sync.learners=2 --set train.epochs=1
train shadow-twin 2 --set sync.strategy=shadow --set sync.learners=2 --set train.epochs=1 --set job.device=twin
for run in shadow-2x2 shadow-twin; do
  python3 - "$work/$run.json" <<'PY' && echo "ok   $run: shadow with 2 learners per rank trains" || fail "$run: metrics wrong"
import json, sys
m = json.load(open(sys.argv[1]))
assert m["learners_per_rank"] == 2, m["learners_per_rank"]
assert m["shadow_rounds"] >= 1, m
losses = [e["test_loss"] for e in m["evaluations"]]
assert losses[-1] < losses[0], losses
PY
done

# 4. Refused settings name the key.
expect() {  # expect NAME PATTERN ARGS...
  local name=$1 pattern=$2
  shift 2
  "$bin" train "$work/job.ini" "$@" >/dev/null 2>"$work/bad.err" && { fail "$name accepted"; return; }
  grep -Eq -- "$pattern" "$work/bad.err" || fail "$name: $(cat "$work/bad.err")"
}
expect "sma with nesterov" "\[optimizer\] nesterov: sma uses plain momentum" --set optimizer.nesterov=true
expect "unknown strategy" "\[sync\] strategy: 'easgd' is not one of" --set sync.strategy=easgd

finish learners

#!/usr/bin/env bash
# Random models under random burst plans: for each seed a small random model
# (tests/e2e/lib/random_model.py: convolutions, batch norm, pooling, residual
# adds, concats, dropout) trains 3 steps on 3 ranks with every layer on a
# random set of ranks. Its weights must match 1 rank training the same global
# batch within 1e-3, its evaluation lines must equal 1 rank's, and the device
# code path (the twin device) must give the CPU's weights bit for bit.
# Usage: random_models.sh BURSTPOOL_BINARY SOURCE_DIR
set -u
source "$(dirname "$0")/lib/harness.sh" "$@"

for seed in $(seq 1 12); do
  python3 "$src/tests/e2e/lib/random_model.py" "$seed" 3 "$work/m.ini" || { fail "seed $seed: no model"; continue; }
  cat >"$work/job.ini" <<JOB
[job]
model = $work/m.ini
seed = $seed
[data]
source = synthetic
synthetic_train_samples = 48
synthetic_test_samples = 10
[train]
batch_size = 12
steps = 3
log_every = 3
eval_every = 3
[optimizer]
lr = 0.01
JOB
  "$bin" plan --data-parallel "$work/m.ini" --ranks 3 --global-batch 12 --out "$work/dp.json" >/dev/null ||
    { fail "seed $seed: no data-parallel plan"; continue; }
  python3 "$src/tests/e2e/lib/random_model.py" "$seed" 3 "$work/m.ini" "$work/dp.json" "$work/plan.json" ||
    { fail "seed $seed: no plan"; continue; }
  "$bin" train "$work/job.ini" --checkpoint "$work/one.h5" >"$work/one.out" 2>&1 ||
    { fail "seed $seed: 1 rank failed: $(tail -1 "$work/one.out")"; continue; }
  three=(timeout 120 mpirun -np 3 --oversubscribe "$bin" train "$work/job.ini" --plan "$work/plan.json")
  "${three[@]}" --checkpoint "$work/three.h5" >"$work/three.out" 2>&1 ||
    { fail "seed $seed: 3 ranks failed: $(grep -m1 error "$work/three.out")"; continue; }
  "${three[@]}" --set job.device=twin --checkpoint "$work/twin.h5" >"$work/twin.out" 2>&1 ||
    { fail "seed $seed: 3 ranks on the twin failed: $(grep -m1 error "$work/twin.out")"; continue; }
  h5diff -d 1e-3 "$work/one.h5" "$work/three.h5" /weights /weights >"$work/diff.txt" ||
    fail "seed $seed: 3 ranks differ from 1 by more than 1e-3: $(head -3 "$work/diff.txt")"
  h5diff "$work/three.h5" "$work/twin.h5" /weights /weights >/dev/null || fail "seed $seed: the twin differs from the CPU"
  [[ "$(grep eval "$work/one.out")" == "$(grep eval "$work/three.out")" ]] ||
    fail "seed $seed: evaluation differs: $(grep eval "$work/one.out") | $(grep eval "$work/three.out")"
done
finish random_models

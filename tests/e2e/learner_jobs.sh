#!/usr/bin/env bash
# The shipped learner jobs (jobs/fashion_mnist_lenet_{sma,local_sgd,shadow}.ini)
# run as shipped, on 2 ranks as their comments say, on real Fashion-MNIST, and
# each reaches its [train] target_accuracy within its schedule. Their seconds
# are not checked here (perf/time_to_accuracy.py measures those); a test
# machine's load changes them, not whether the settings reach the target.
# Usage: learner_jobs.sh BURSTPOOL_BINARY SOURCE_DIR
set -u
source "$(dirname "$0")/lib/harness.sh" "$@"
command -v mpirun >/dev/null || { echo "FAIL: mpirun missing"; exit 1; }
[[ -f /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ]] ||
  { echo "FAIL: Fashion-MNIST missing (scripts/install-deps.sh installs dataset-fashion-mnist)"; exit 1; }

for name in sma local_sgd shadow; do
  job="$src/jobs/fashion_mnist_lenet_$name.ini"
  if ! timeout 600 mpirun -np 2 --oversubscribe "$bin" train "$job" --metrics "$work/$name.json" \
    >"$work/$name.out" 2>&1; then
    fail "$name: exit $?: $(tail -3 "$work/$name.out")"
    continue
  fi
  python3 - "$work/$name.json" "$name" <<'PY' || fail "$name: did not reach its target: $(grep '^eval' "$work/$name.out" | tail -2)"
import json, sys
m, name = json.load(open(sys.argv[1])), sys.argv[2]
best = max(e["test_accuracy"] for e in m["evaluations"])
assert m["target_accuracy"] > 0, "the shipped job names no target"
assert m["epochs_to_target"] is not None, (best, m["target_accuracy"])
print(f"ok   {name}: reached {m['target_accuracy']:.4g} at epoch {m['epochs_to_target']:.2f} of {m['epochs']:.2f} "
      f"(best {best:.4f}), {m['time_to_target_seconds']:.1f} training seconds here")
PY
done
finish learner_jobs

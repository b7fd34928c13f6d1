#!/usr/bin/env bash
# The executable end to end: train a small job with metrics and a checkpoint,
# check both files, resume-free restart from the checkpoint as a model file,
# and convert models between INI and HDF5 on the command line.
# Usage: train_convert.sh BURSTPOOL_BINARY SOURCE_DIR
set -euo pipefail
source "$(dirname "$0")/lib/harness.sh" "$@"

cat >"$work/job.ini" <<JOB
[job]
model = $src/jobs/models/lenet5.ini
seed = 3
[data]
source = synthetic
synthetic_train_samples = 512
synthetic_test_samples = 256
[train]
batch_size = 32
epochs = 2
log_every = 8
[optimizer]
lr = 0.02
JOB

"$bin" train "$work/job.ini" --metrics "$work/m.json" --checkpoint "$work/ckpt.h5" | tee "$work/log"
grep -q "^step 32/32 | epoch 2.00 | loss" "$work/log"
grep -q "^eval @ step 16 (epoch 1.00): test accuracy" "$work/log"

python3 - "$work/m.json" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
for key in ["samples_per_second", "final_loss", "test_accuracy", "steps", "wall_seconds", "ranks"]:
    assert key in m, f"metrics lack {key}"
assert m["steps"] == 32 and m["ranks"] == 1, m
assert m["samples_per_second"] > 0 and m["wall_seconds"] > 0
# Synthetic classes are separable: two epochs must beat chance (0.1) by far.
assert m["test_accuracy"] > 0.5, f"test accuracy {m['test_accuracy']}"
assert len(m["evaluations"]) == 2
print("metrics ok:", {k: m[k] for k in ["test_accuracy", "final_loss", "samples_per_second"]})
PY

# The checkpoint holds every parameter at /weights/<layer>/<param>, as float32.
h5ls -r "$work/ckpt.h5" >"$work/ls"
for p in conv1/weight conv1/bias conv2/weight fc1/weight fc3/bias; do
  grep -q "^/weights/$p " "$work/ls" || { echo "checkpoint lacks /weights/$p"; exit 1; }
done
grep -q "^/optimizer/velocity/fc3/weight " "$work/ls"
h5dump -H -d /weights/conv1/weight "$work/ckpt.h5" | grep -q "H5T_IEEE_F32LE"
h5dump -H -d /weights/conv1/weight "$work/ckpt.h5" | grep -q "( 6, 1, 5, 5 )"

# A checkpoint is a model file with weights: training from it starts where the
# first run ended, so its first loss is far below a fresh model's.
"$bin" train "$work/job.ini" --set job.model="$work/ckpt.h5" --steps 4 --set train.log_every=1 >"$work/resumed"
"$bin" train "$work/job.ini" --steps 4 --set train.log_every=1 >"$work/fresh"
python3 - "$work/resumed" "$work/fresh" <<'PY'
import re, sys
first = lambda f: float(re.search(r"^step 1/4 .*\| loss ([0-9.]+)", open(f).read(), re.M).group(1))
resumed, fresh = first(sys.argv[1]), first(sys.argv[2])
assert resumed < 0.5 * fresh, (resumed, fresh)
print(f"first loss from checkpoint {resumed:.4f} vs fresh {fresh:.4f}")
PY

# convert: INI -> HDF5 -> INI keeps the architecture; weights travel HDF5 -> HDF5.
"$bin" convert "$src/jobs/models/resnet20.ini" "$work/r.h5"
"$bin" convert "$work/r.h5" "$work/r.ini"
"$bin" convert "$work/r.ini" "$work/r2.h5"
"$bin" convert "$work/r2.h5" "$work/r2.ini"
cmp "$work/r.ini" "$work/r2.ini"
"$bin" convert "$work/ckpt.h5" "$work/copy.h5"
h5diff -d 0 "$work/ckpt.h5" "$work/copy.h5" /weights/fc1/weight /weights/fc1/weight
echo "train_convert: all checks passed"

#!/usr/bin/env bash
# scripts/h5_to_torch.py: a checkpoint of a model with every layer type that
# has weights or statistics (convolutions with and without bias, batch norm
# with its own eps and momentum, linear) and the merges and pools between
# them becomes a PyTorch state_dict; PyTorch's forward pass on burstpool's test
# set, with those weights, gives burstpool's own evaluation of it (loss and
# accuracy). A transposed weight of the right size is refused.
# Skipped, with a message, where no Python has torch and h5py.
# Usage: torch_export.sh BURSTPOOL_BINARY SOURCE_DIR
set -u
source "$(dirname "$0")/lib/harness.sh" "$@"

python=$(python_with torch h5py)
[[ -n $python ]] || { echo "skip: no Python with torch and h5py here (Debian: python3-torch python3-h5py)"; exit 0; }

cat >"$work/model.ini" <<'INI'
[model]
name = export
[data]
type = input
shape = 3,12,12
[conv1]
type = conv2d
inputs = data
out_channels = 8
kernel = 3
padding = 1
[bn1]
type = batchnorm2d
inputs = conv1
eps = 0.001
momentum = 0.2
[relu1]
type = relu
inputs = bn1
[conv2]
type = conv2d
inputs = relu1
out_channels = 8
kernel = 3
padding = 1
bias = false
[sum]
type = add
inputs = relu1, conv2
[conv3]
type = conv2d
inputs = relu1
out_channels = 4
kernel = 1
[cat]
type = concat
inputs = sum, conv3
[pool]
type = avgpool2d
inputs = cat
kernel = 3
stride = 2
padding = 1
[mpool]
type = maxpool2d
inputs = pool
kernel = 2
[drop]
type = dropout
inputs = mpool
p = 0.3
[flat]
type = flatten
inputs = drop
[fc1]
type = linear
inputs = flat
out_features = 16
[relu2]
type = relu
inputs = fc1
[fc2]
type = linear
inputs = relu2
out_features = 5
[gap]
type = global_avgpool
inputs = mpool
[fcg]
type = linear
inputs = gap
out_features = 5
[logits]
type = add
inputs = fc2, fcg
[loss]
type = softmax_cross_entropy
inputs = logits
INI

# Data: learnable float images (a template per class plus noise), 96 to train, 40 to test.
"$python" - "$work" <<'PY' || fail "writing the data"
import sys, h5py, numpy as np
rng = np.random.default_rng(3)
templates = rng.normal(size=(5, 3, 12, 12)).astype("float32")
for name, n in (("train", 96), ("test", 40)):
    labels = rng.integers(0, 5, n)
    images = templates[labels] + rng.normal(scale=1.5, size=(n, 3, 12, 12)).astype("float32")
    with h5py.File(f"{sys.argv[1]}/{name}.h5", "w") as f:
        f["images"], f["labels"] = images.astype("float32"), labels.astype("int64")
PY
cat >"$work/job.ini" <<'INI'
[job]
model = model.ini
[data]
source = hdf5
train_file = train.h5
test_file = test.h5
[train]
batch_size = 16
steps = 12
[optimizer]
lr = 0.05
INI
"$bin" train "$work/job.ini" --checkpoint "$work/c.h5" --metrics "$work/m.json" >"$work/out" 2>&1 ||
  fail "training: $(tail -3 "$work/out")"

"$python" "$src/scripts/h5_to_torch.py" "$work/c.h5" "$work/model.ini" "$work/c.pt" >"$work/export" 2>&1 ||
  fail "h5_to_torch.py: $(cat "$work/export")"
if out=$("$python" - "$work" "$src/scripts" <<'PY' 2>&1
import json, sys
import h5py, torch
folder = sys.argv[1]
sys.path.insert(0, sys.argv[2])
from burstpool_torch import IniModel
from h5_to_torch import load_module
state = torch.load(f"{folder}/c.pt")
model = IniModel(f"{folder}/model.ini")
model.load_state_dict(state)  # strict: every key, every shape
model.eval()
assert state["layers.conv1.weight"].shape == (8, 3, 3, 3) and state["layers.fc1.weight"].shape == (16, 108)
with h5py.File(f"{folder}/c.h5") as c:  # the statistics travelled, and they are not the initial ones
    assert torch.equal(state["layers.bn1.running_var"], torch.from_numpy(c["/weights/bn1/running_var"][()]))
assert not torch.allclose(state["layers.bn1.running_var"], torch.ones(8)), "running_var never updated?"
assert model.layers["bn1"].eps == 1e-3 and model.layers["bn1"].momentum == 0.2
with h5py.File(f"{folder}/test.h5") as t:
    images, labels = torch.from_numpy(t["images"][()]), torch.from_numpy(t["labels"][()])
with torch.no_grad():
    logits = model(images)
    again = load_module(f"{folder}/c.h5", f"{folder}/model.ini")(images)
assert torch.equal(logits, again), "load_module differs from the saved state_dict"
loss = torch.nn.functional.cross_entropy(logits, labels).item()
accuracy = (logits.argmax(1) == labels).double().mean().item()
final = json.load(open(f"{folder}/m.json"))["evaluations"][-1]
assert final["step"] == 12, final
print(f"test loss burstpool {final['test_loss']:.7f} PyTorch {loss:.7f}, "
      f"accuracy {final['test_accuracy']:.4f} and {accuracy:.4f}")
assert abs(loss - final["test_loss"]) <= 1e-5 * max(1.0, abs(loss)), "loss differs"
assert accuracy == final["test_accuracy"], "accuracy differs"
PY
); then echo "ok   $out"; else fail "PyTorch's forward pass against burstpool's evaluation: $out"; fi

# A transposed weight of the right size: refused by the exporter, naming the dataset and both shapes.
cp "$work/c.h5" "$work/t.h5"
"$python" - "$work/t.h5" <<'PY' || fail "transposing"
import sys, h5py
with h5py.File(sys.argv[1], "a") as f:
    w = f["/weights/fc1/weight"][()]
    del f["/weights/fc1/weight"]
    f["/weights/fc1/weight"] = w.T.copy()
PY
if ! "$python" "$src/scripts/h5_to_torch.py" "$work/t.h5" "$work/model.ini" "$work/t.pt" >"$work/t.out" 2>&1 &&
  grep -q "/weights/fc1/weight has shape (108, 16), the model expects (16, 108)" "$work/t.out" && [[ ! -e $work/t.pt ]]; then
  echo "ok   transposed weight refused: $(tail -1 "$work/t.out")"
else
  fail "transposed weight: $(cat "$work/t.out")"
fi
finish torch_export

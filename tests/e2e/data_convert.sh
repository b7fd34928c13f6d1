#!/usr/bin/env bash
# scripts/to_hdf5.py, a user's data into burstpool's HDF5 layout: a generated
# image folder (3 classes of 8x8 PNGs, each class its own colour), NumPy
# arrays (channels last) and CIFAR-10's binary records each convert to the
# layout the reader expects (uint8 (N,C,H,W) images chunked by samples, int32
# labels, the class names); 2 ranks train on the converted folder, reading
# per rank ([data] read = batches), and learn it; bad inputs are refused in
# one line naming the file. Skipped, with a message, where no Python has
# numpy, h5py and Pillow.
# Usage: data_convert.sh BURSTPOOL_BINARY SOURCE_DIR
set -u
source "$(dirname "$0")/lib/harness.sh" "$@"

python=$(python_with numpy h5py PIL)
[[ -n $python ]] || { echo "skip: no Python with numpy, h5py and Pillow here (Debian: python3-h5py python3-pil)"; exit 0; }
convert=("$python" "$src/scripts/to_hdf5.py")

"$python" - "$work" <<'PY' || fail "making the inputs"
import os, sys
import numpy as np
from PIL import Image
work = sys.argv[1]
rng = np.random.default_rng(1)
colours = {"blue": (0, 0, 200), "green": (0, 200, 0), "red": (200, 0, 0)}
for name, colour in colours.items():
    os.makedirs(f"{work}/images/{name}")
    for i in range(40):
        pixels = np.clip(np.array(colour) + rng.integers(-40, 40, (8, 8, 3)), 0, 255).astype(np.uint8)
        Image.fromarray(pixels).save(f"{work}/images/{name}/{i:03d}.png")
np.save(f"{work}/x.npy", rng.integers(0, 256, (10, 6, 5, 3), dtype=np.uint8))  # (N,H,W,C)
np.save(f"{work}/y.npy", np.arange(10) % 4)
np.save(f"{work}/y7.npy", np.arange(7))
os.makedirs(f"{work}/cifar")
for name, n in [(f"data_batch_{i}.bin", 20) for i in range(1, 6)] + [("test_batch.bin", 10)]:
    records = rng.integers(0, 256, (n, 1 + 3072), dtype=np.uint8)
    records[:, 0] %= 10
    records.tofile(f"{work}/cifar/{name}")
PY
"${convert[@]}" folder "$work/images" "$work/images.h5" >"$work/folder.out" 2>&1 || fail "folder: $(cat "$work/folder.out")"
"${convert[@]}" npy "$work/x.npy" "$work/y.npy" "$work/npy.h5" --channels-last >/dev/null 2>&1 || fail "npy"
"${convert[@]}" cifar10 "$work/cifar" "$work/c_train.h5" "$work/c_test.h5" >/dev/null 2>&1 || fail "cifar10"
"$python" - "$work" <<'PY' || fail "layout"
import sys
import h5py, numpy as np
work = sys.argv[1]
def check(path, shape, classes=None):
    with h5py.File(f"{work}/{path}") as f:
        im, lb = f["images"], f["labels"]
        assert im.shape == shape and im.dtype == np.uint8, (path, im.shape, im.dtype)
        assert im.chunks is not None and im.chunks[0] >= 1 and im.chunks[1:] == shape[1:], (path, im.chunks)
        assert lb.shape == (shape[0],) and lb.dtype == np.int32, (path, lb.shape, lb.dtype)
        if classes:
            assert [c.decode() if isinstance(c, bytes) else c for c in lb.attrs["classes"]] == classes, lb.attrs["classes"]
        return im[...], lb[...]
im, lb = check("images.h5", (120, 3, 8, 8), ["blue", "green", "red"])
assert (lb == np.repeat([0, 1, 2], 40)).all() and im[0, 2].mean() > 150 and im[80, 0].mean() > 150, "class order"
im, lb = check("npy.h5", (10, 3, 6, 5))
x = np.load(f"{work}/x.npy")
assert (im == x.transpose(0, 3, 1, 2)).all() and (lb == np.arange(10) % 4).all(), "npy values"
im, lb = check("c_train.h5", (100, 3, 32, 32), None)
raw = np.fromfile(f"{work}/cifar/data_batch_1.bin", dtype=np.uint8).reshape(-1, 3073)
assert (im[:20].reshape(20, -1) == raw[:, 1:]).all() and (lb[:20] == raw[:, 0]).all(), "cifar values"
check("c_test.h5", (10, 3, 32, 32))
print("layout: ok")
PY

# Two ranks train on the converted folder, each reading only its samples.
cat >"$work/tiny.ini" <<'MODEL'
[model]
name = tiny
[data]
type = input
shape = 3,8,8
[flat]
type = flatten
inputs = data
[fc]
type = linear
inputs = flat
out_features = 3
[loss]
type = softmax_cross_entropy
inputs = fc
MODEL
cat >"$work/job.ini" <<JOB
[job]
model = tiny.ini
[data]
source = hdf5
train_file = images.h5
test_file = images.h5
read = batches
[train]
batch_size = 24
epochs = 4
[optimizer]
lr = 0.05
JOB
timeout 120 mpirun -np 2 "$bin" train "$work/job.ini" --metrics "$work/m.json" >"$work/train.out" 2>&1 ||
  fail "2 ranks on the converted folder: $(tail -3 "$work/train.out")"
"$python" -c "
import json, sys
m = json.load(open('$work/m.json'))
assert m['test_accuracy'] >= 0.9, m['test_accuracy']
print('2 ranks on the converted image folder: accuracy', m['test_accuracy'])
" || fail "did not learn the colours: $(grep -i accuracy "$work/train.out" | tail -2)"

# The shipped GPU jobs (jobs/gpu/) read the converted CIFAR-10 files as
# shipped: each trains a few steps, on the CPU here (device = cuda changed
# to cpu in copies; data and everything else as shipped).
mkdir -p "$work/gpu/cifar10"
cp "$work/c_train.h5" "$work/gpu/cifar10/train.h5"
cp "$work/c_test.h5" "$work/gpu/cifar10/test.h5"
for job in "$src"/jobs/gpu/*.ini; do
  sed -e 's/^device = cuda$/device = cpu/' -e "s|^model = ../models/|model = $src/jobs/models/|" "$job" \
    >"$work/gpu/$(basename "$job")"
done
small=(--set train.batch_size=4 --set train.log_every=1)
for job in cifar10_resnet20 cifar10_vgg16 cifar10_resnet20_sma; do
  [[ $job == *sma ]] && small=(--set train.learner_batch_size=4 --set sync.max_learners=2 --set train.log_every=1)
  timeout 300 "$bin" train "$work/gpu/$job.ini" --steps 2 "${small[@]}" >"$work/$job.out" 2>&1 ||
    fail "jobs/gpu/$job.ini: $(tail -3 "$work/$job.out")"
done
timeout 300 "$bin" train "$work/gpu/cifar10_vgg16_with_background.ini" --steps 6 --set train.batch_size=4 \
  --set background.calibrate_steps=2 >"$work/bg.out" 2>&1 ||
  fail "jobs/gpu/cifar10_vgg16_with_background.ini: $(tail -3 "$work/bg.out")"

# Refusals: one line, naming the file.
mkdir -p "$work/bad/a" "$work/bad/b"
cp "$work/images/red/000.png" "$work/bad/a/"
echo "not an image" >"$work/bad/b/notes.png"
refused() {  # refused WHAT EXPECTED ARGS...
  local what=$1 expected=$2
  shift 2
  "${convert[@]}" "$@" >"$work/r.out" 2>"$work/r.err" && fail "$what: accepted"
  grep -q "$expected" "$work/r.err" && [[ $(wc -l <"$work/r.err") == 1 ]] || fail "$what: $(cat "$work/r.err")"
}
refused "a file that is no image" "to_hdf5.py: $work/bad/b/notes.png: not an image Pillow can read" \
  folder "$work/bad" "$work/bad.h5"
"$python" -c "
from PIL import Image; Image.new('RGB', (9, 8)).save('$work/bad/b/notes.png')"
refused "images of two sizes" "$work/bad/b/notes.png: 8x9, the images before it are 8x8 (--size HxW resizes them all)" \
  folder "$work/bad" "$work/bad.h5"
"${convert[@]}" folder "$work/bad" "$work/bad.h5" --size 8x8 >/dev/null 2>&1 || fail "--size did not resize"
refused "labels of another length" "$work/y7.npy: labels of shape (7,) for the 10 images of $work/x.npy" \
  npy "$work/x.npy" "$work/y7.npy" "$work/n.h5"
cp -r "$work/cifar" "$work/cut" && head -c 100 "$work/cifar/test_batch.bin" >"$work/cut/test_batch.bin"
refused "a truncated CIFAR-10 batch" "$work/cut/test_batch.bin: 100 bytes, not a whole number of 3073-byte" \
  cifar10 "$work/cut" "$work/t1.h5" "$work/t2.h5"
[[ ! -e $work/bad.h5.part ]] || fail "a .part file left behind"
finish data_convert

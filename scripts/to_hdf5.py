#!/usr/bin/env python3
"""Writes a data set in burstpool's HDF5 layout ([data] source = hdf5):

  images  uint8 (N, C, H, W), or float32 when the input is float; chunked by
          samples (about 1 MiB a chunk) so that [data] read = batches reads
          each rank's samples without reading the whole file
  labels  int32 (N), class indices from 0
  classes (attribute of labels, when known) the class names, index order

From three kinds of input:

  npy IMAGES.npy LABELS.npy OUT.h5
      NumPy arrays: images (N,H,W), (N,C,H,W) or, with --channels-last,
      (N,H,W,C); uint8 or float; labels (N) integers.
  folder DIR OUT.h5 [--size HxW] [--gray]
      An image folder: one subfolder per class (classes in name order), any
      format Pillow reads. Images must share one size unless --size resizes
      them; --gray makes one channel, else RGB.
  cifar10 DIR TRAIN.h5 TEST.h5
      CIFAR-10's binary version (data_batch_1.bin ... data_batch_5.bin and
      test_batch.bin: a label byte and 3x32x32 bytes per record).

Every error is one line naming the file at fault. Needs numpy and h5py
(Debian: python3-numpy, python3-h5py) and, for folders, Pillow (python3-pil).

Usage: scripts/to_hdf5.py {npy,folder,cifar10} ... (see above)
"""
import argparse
import os
import sys

import h5py
import numpy as np

CHUNK_BYTES = 1 << 20


class Refused(Exception):
    """An input this converter will not write: its message names the file."""


def write(path, images, labels, classes=None):
    """The layout above; returns the number of samples written."""
    images, labels = np.asarray(images), np.asarray(labels)
    if images.ndim == 3:
        images = images[:, None]
    if images.ndim != 4:
        raise Refused(f"{path}: images must be (N,H,W) or (N,C,H,W), got shape {images.shape}")
    if labels.ndim != 1 or len(labels) != len(images):
        raise Refused(f"{path}: {len(images)} images but labels of shape {labels.shape}")
    if images.dtype != np.uint8:
        images = images.astype(np.float32)
        if not np.isfinite(images).all():
            raise Refused(f"{path}: images hold NaN or infinite values")
    if not np.issubdtype(labels.dtype, np.integer) or (len(labels) and labels.min() < 0):
        raise Refused(f"{path}: labels must be integers from 0, got {labels.dtype} from {labels.min(initial=0)}")
    per_sample = images[0].nbytes if len(images) else 1
    chunk = max(1, min(len(images), CHUNK_BYTES // per_sample))
    with h5py.File(path + ".part", "w") as f:
        f.create_dataset("images", data=images, chunks=(chunk,) + images.shape[1:])
        d = f.create_dataset("labels", data=labels.astype(np.int32))
        if classes is not None:
            d.attrs["classes"] = [c.encode() for c in classes]
    os.replace(path + ".part", path)  # never a half-written file under the name asked for
    return len(images)


def from_npy(args):
    arrays = []
    for path in (args.images, args.labels):
        try:
            arrays.append(np.load(path, allow_pickle=False))
        except (OSError, ValueError) as e:
            raise Refused(f"{path}: not a NumPy .npy array ({e})")
    images, labels = arrays
    if labels.ndim != 1 or len(labels) != len(images):
        raise Refused(f"{args.labels}: labels of shape {labels.shape} for the {len(images)} images of {args.images}")
    if args.channels_last:
        if images.ndim != 4:
            raise Refused(f"{args.images}: --channels-last needs (N,H,W,C), got shape {images.shape}")
        images = images.transpose(0, 3, 1, 2)
    return {args.out: write(args.out, images, labels)}


def from_folder(args):
    from PIL import Image, UnidentifiedImageError

    classes = sorted(d for d in os.listdir(args.dir) if os.path.isdir(os.path.join(args.dir, d)))
    if not classes:
        raise Refused(f"{args.dir}: no class subfolders")
    size = None
    if args.size:
        h, _, w = args.size.partition("x")
        if not (h.isdigit() and w.isdigit() and int(h) > 0 and int(w) > 0):
            raise Refused(f"--size {args.size}: expected HxW, for instance 32x32")
        size = (int(h), int(w))
    images, labels = [], []
    for index, name in enumerate(classes):
        folder = os.path.join(args.dir, name)
        files = sorted(f for f in os.listdir(folder) if not f.startswith("."))
        if not files:
            raise Refused(f"{folder}: an empty class folder")
        for file in files:
            path = os.path.join(folder, file)
            try:
                with Image.open(path) as im:
                    im = im.convert("L" if args.gray else "RGB")
                    if size:
                        im = im.resize((size[1], size[0]))
                    a = np.asarray(im, dtype=np.uint8)
            except (UnidentifiedImageError, OSError) as e:
                raise Refused(f"{path}: not an image Pillow can read ({e})")
            a = a[None] if a.ndim == 2 else a.transpose(2, 0, 1)
            if images and a.shape != images[0].shape:
                raise Refused(f"{path}: {a.shape[1]}x{a.shape[2]}, the images before it are "
                              f"{images[0].shape[1]}x{images[0].shape[2]} (--size HxW resizes them all)")
            images.append(a)
            labels.append(index)
    return {args.out: write(args.out, np.stack(images), np.array(labels), classes)}


CIFAR10_CLASSES = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]


def read_cifar10(path):
    record = 1 + 3 * 32 * 32
    try:
        raw = np.fromfile(path, dtype=np.uint8)
    except OSError as e:
        raise Refused(f"{path}: cannot be read ({e})")
    if raw.size == 0 or raw.size % record:
        raise Refused(f"{path}: {raw.size} bytes, not a whole number of {record}-byte CIFAR-10 records")
    raw = raw.reshape(-1, record)
    if raw[:, 0].max() > 9:
        raise Refused(f"{path}: a label byte of {raw[:, 0].max()}: not CIFAR-10's binary version (labels 0-9)")
    return raw[:, 1:].reshape(-1, 3, 32, 32), raw[:, 0]


def from_cifar10(args):
    parts = {args.train: [f"data_batch_{i}.bin" for i in range(1, 6)], args.test: ["test_batch.bin"]}
    written = {}
    for out, names in parts.items():
        read = [read_cifar10(os.path.join(args.dir, n)) for n in names]
        written[out] = write(out, np.concatenate([r[0] for r in read]), np.concatenate([r[1] for r in read]),
                             CIFAR10_CLASSES)
    return written


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="kind", required=True)
    npy = sub.add_parser("npy", help="NumPy arrays")
    npy.add_argument("images")
    npy.add_argument("labels")
    npy.add_argument("out")
    npy.add_argument("--channels-last", action="store_true", help="images are (N,H,W,C)")
    folder = sub.add_parser("folder", help="an image folder, one subfolder per class")
    folder.add_argument("dir")
    folder.add_argument("out")
    folder.add_argument("--size", help="resize every image to HxW")
    folder.add_argument("--gray", action="store_true", help="one channel instead of RGB")
    cifar = sub.add_parser("cifar10", help="CIFAR-10's binary version")
    cifar.add_argument("dir")
    cifar.add_argument("train")
    cifar.add_argument("test")
    args = ap.parse_args()
    try:
        written = {"npy": from_npy, "folder": from_folder, "cifar10": from_cifar10}[args.kind](args)
    except Refused as e:
        sys.exit(f"to_hdf5.py: {e}")
    for path, n in written.items():
        print(f"{path}: {n} samples")


if __name__ == "__main__":
    main()

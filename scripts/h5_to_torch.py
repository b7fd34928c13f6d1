#!/usr/bin/env python3
"""Turns a burstpool HDF5 checkpoint into a PyTorch state_dict.

Usage: h5_to_torch.py CHECKPOINT.h5 MODEL.ini OUT.pt

OUT.pt is a state_dict (torch.save) for the module that MODEL.ini describes,
with keys "layers.<layer>.<param>" in PyTorch's layouts (convolution weights
(out, in, kh, kw), linear weights (out, in)). To use it:

    import sys; sys.path.insert(0, "<burstpool>/scripts")
    from burstpool_torch import IniModel
    model = IniModel("MODEL.ini")
    model.load_state_dict(torch.load("OUT.pt"))
    model.eval()
    logits = model(images)   # (N, C, H, W) float32, normalised as burstpool saw them

or, in one call, load_module(CHECKPOINT, MODEL) below. Needs torch and h5py
(Debian: python3-torch, python3-h5py).
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

try:
    import torch
    from burstpool_torch import IniModel, checkpoint_state_dict
except ImportError as e:  # torch or h5py missing
    sys.exit(f"h5_to_torch.py needs torch and h5py (Debian: python3-torch, python3-h5py): {e}")


def load_module(checkpoint, model_file):
    """The nn.Module of model_file with the checkpoint's weights, in eval mode."""
    model = IniModel(model_file)
    model.load_state_dict(checkpoint_state_dict(checkpoint, model))
    return model.eval()


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__.strip().splitlines()[2])
    checkpoint, model_file, out = sys.argv[1:]
    model = IniModel(model_file)
    state = checkpoint_state_dict(checkpoint, model)
    torch.save(state, out)
    count = sum(t.numel() for k, t in state.items() if not k.endswith("num_batches_tracked"))
    print(f"{out}: {len(state)} tensors, {count} values, for {model_file}")


if __name__ == "__main__":
    main()

"""burstpool models in PyTorch: IniModel builds the torch.nn.Module that a
burstpool INI model file describes (the same layers, keys and defaults as
burstpool's layers/ read them), and checkpoint_state_dict turns a burstpool
HDF5 checkpoint into that module's state_dict.

Used by scripts/h5_to_torch.py and by the PyTorch peers in perf/.
Needs torch; checkpoint_state_dict also needs h5py.
"""
import configparser

import torch
import torch.nn as nn


def pair(text):
    """burstpool's "k" or "kh,kw" key as a (height, width) pair."""
    parts = [int(p) for p in str(text).split(",")]
    return (parts[0], parts[0]) if len(parts) == 1 else (parts[0], parts[1])


def boolean(section, key, fallback):
    """A boolean key as burstpool reads it (true/1/yes, false/0/no)."""
    text = section.get(key)
    if text is None:
        return fallback
    if text in ("true", "1", "yes"):
        return True
    if text in ("false", "0", "no"):
        return False
    raise SystemExit(f"[{section.name}] {key}: '{text}' is not a boolean (true/false)")


def pooled(size, k, s, p):
    return (size + 2 * p - k) // s + 1


class IniModel(nn.Module):
    """A DAG of torch modules mirroring a burstpool model file. Parameters
    live in self.layers[<layer name>], so state_dict keys are
    "layers.<layer>.<param>", and their shapes are burstpool's."""

    def __init__(self, path):
        super().__init__()
        cfg = configparser.ConfigParser(inline_comment_prefixes=(";", "#"), interpolation=None)
        cfg.optionxform = str
        if not cfg.read(path):
            raise SystemExit(f"{path}: cannot read the model file")
        self.order, self.inputs, self.kinds = [], {}, {}
        self.layers = nn.ModuleDict()
        shapes = {}
        pending = [s for s in cfg.sections() if s != "model"]
        while pending:  # topological order
            ready = [n for n in pending if all(i in shapes for i in self._inputs(cfg[n]))]
            if not ready:
                raise SystemExit(f"{path}: layers {pending} wait on inputs that never come (unknown name or cycle)")
            for name in ready:
                pending.remove(name)
                ins = self._inputs(cfg[name])
                shapes[name] = self._build(name, cfg[name], [shapes[i] for i in ins])
                self.order.append(name)
                self.inputs[name] = ins
        self.sample_shape = shapes[self.order[0]]

    @staticmethod
    def _inputs(section):
        return [i.strip() for i in section.get("inputs", "").split(",") if i.strip()]

    def _build(self, name, sec, in_shapes):
        t = sec["type"]
        self.kinds[name] = t
        s = in_shapes[0] if in_shapes else None
        mod = None
        if t == "input":
            dims = [int(d) for d in sec["shape"].split(",")] + [1, 1]
            return tuple(dims[:3])
        if t == "linear":
            feats = s[0] * s[1] * s[2]
            mod = nn.Linear(feats, int(sec["out_features"]), bias=boolean(sec, "bias", True))
            out = (int(sec["out_features"]), 1, 1)
        elif t == "conv2d":
            k, st, p = pair(sec["kernel"]), pair(sec.get("stride", 1)), pair(sec.get("padding", 0))
            mod = nn.Conv2d(s[0], int(sec["out_channels"]), k, st, p, bias=boolean(sec, "bias", True))
            out = (int(sec["out_channels"]), pooled(s[1], k[0], st[0], p[0]), pooled(s[2], k[1], st[1], p[1]))
        elif t in ("maxpool2d", "avgpool2d"):
            k = pair(sec["kernel"])
            st, p = pair(sec.get("stride", sec["kernel"])), pair(sec.get("padding", 0))
            # burstpool's average pooling counts padded cells (count_include_pad=True, PyTorch's default).
            mod = (nn.MaxPool2d if t == "maxpool2d" else nn.AvgPool2d)(k, st, p)
            out = (s[0], pooled(s[1], k[0], st[0], p[0]), pooled(s[2], k[1], st[1], p[1]))
        elif t == "relu":
            mod, out = nn.ReLU(), s
        elif t == "dropout":
            mod, out = nn.Dropout(float(sec.get("p", 0.5))), s
        elif t == "batchnorm2d":
            mod = nn.BatchNorm2d(s[0], eps=float(sec.get("eps", 1e-5)), momentum=float(sec.get("momentum", 0.1)))
            out = s
        elif t == "global_avgpool":
            mod, out = nn.AdaptiveAvgPool2d(1), (s[0], 1, 1)
        elif t == "flatten":
            mod, out = nn.Flatten(), (s[0] * s[1] * s[2], 1, 1)
        elif t == "add":
            out = s
        elif t == "concat":
            out = (sum(x[0] for x in in_shapes), s[1], s[2])
        elif t == "softmax_cross_entropy":
            out = None
        else:
            raise SystemExit(f"[{name}] type: layer type '{t}' has no PyTorch equivalent here")
        if mod is not None:
            self.layers[name] = mod
        return out

    def forward(self, x):
        """The logits: the input of the loss layer."""
        values = {}
        for name in self.order:
            t = self.kinds[name]
            ins = [values[i] for i in self.inputs[name]]
            if t == "input":
                values[name] = x
            elif t == "linear":
                values[name] = self.layers[name](ins[0].flatten(1))
            elif t == "add":
                v = ins[0]
                for other in ins[1:]:
                    v = v + other
                values[name] = v
            elif t == "concat":
                values[name] = torch.cat(ins, 1)
            elif t == "softmax_cross_entropy":
                return ins[0]
            else:
                values[name] = self.layers[name](ins[0])
        raise SystemExit("model has no loss layer")


def squeezed(shape):
    """A shape without its trailing 1s: burstpool stores (C,1,1,1) as (C)."""
    shape = list(shape)
    while len(shape) > 1 and shape[-1] == 1:
        shape.pop()
    return tuple(shape)


def checkpoint_state_dict(checkpoint, model):
    """model's state_dict filled from a burstpool checkpoint (/weights/<layer>/<param>).
    Every parameter and batch-norm statistic must be there with the module's
    shape (trailing 1s aside); anything else is refused with one line naming
    the dataset, its shape and the shape expected."""
    import h5py
    state = model.state_dict()
    out = {}
    with h5py.File(checkpoint, "r") as f:
        if "weights" not in f:
            raise SystemExit(f"{checkpoint}: no /weights group: not a burstpool checkpoint")
        for key, tensor in state.items():
            _, layer, param = key.split(".")
            if param == "num_batches_tracked":  # PyTorch's own counter; burstpool has none
                out[key] = torch.zeros_like(tensor)
                continue
            path = f"/weights/{layer}/{param}"
            if path not in f:
                raise SystemExit(f"{checkpoint}: {path} is missing (the model file {layer} has '{param}')")
            data = f[path][()]
            if squeezed(data.shape) != squeezed(tensor.shape):
                raise SystemExit(f"{checkpoint}: {path} has shape {tuple(data.shape)}, "
                                 f"the model expects {tuple(tensor.shape)}")
            out[key] = torch.from_numpy(data.astype("float32")).reshape(tensor.shape)
        extra = [f"/weights/{layer}/{p}" for layer in f["weights"] for p in f["weights"][layer]
                 if f"layers.{layer}.{p}" not in state]
        if extra:
            raise SystemExit(f"{checkpoint}: {extra[0]} has no place in the model file's module")
    return out

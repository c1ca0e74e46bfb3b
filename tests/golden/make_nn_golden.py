"""Writes tests/golden/nn.json: PyTorch's results for ringlet's nn modules, replayed by
tests/nn/test_nn_golden.cpp (which never needs PyTorch). Regenerate with Debian's PyTorch 1.13:
    cd <repo root> && /usr/bin/python3 tests/golden/make_nn_golden.py
A new case's name also goes into kExpectedCases in test_nn_golden.cpp.

Contents:
- "cases": one PyTorch module per case with its state dict (all tensors stored), an input, an
  upstream gradient, and the output, the input's gradient, every parameter's gradient and the
  state after the call (BatchNorm's running statistics in training mode).
- "fmnist_cnn": train_fmnist.py's model on a batch of 4 (forward, cross-entropy, backward).
  Its 421,834 weights would not fit the 1 MB budget as decimals, so they come from a
  deterministic integer hash (splitmix64, below) that the C++ test reproduces bit for bit;
  the JSON lists every state-dict key (PyTorch's names, shapes, how to fill it), and the C++
  side loads them through load_state_dict with those names. Gradients of tensors larger than
  SAMPLE_ABOVE elements are stored as a sample of entries plus their sum, sum of |g| and L2.
- "models": parameter counts and state-dict keys/shapes of fmnist_cnn, the CIFAR ResNet-18
  and ResNet-20 (option-B projections), built with torchvision's layout and names.
Output is deterministic (fixed seeds, fixed key order).
"""
import json
import os
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
OUT_PATH = os.path.join(HERE, "nn.json")

sys.path.insert(0, HERE)
from make_golden import f32_values, tensor_json  # noqa: E402  (exact f32 decimals)
SAMPLE_ABOVE = 4096  # gradients with more elements are stored as samples + summaries
SAMPLES = 256

torch.manual_seed(1234)


def named_json(name, t):
    return dict(name=name, **tensor_json(t))


# --- splitmix64 fill (mirrored in test_nn_golden.cpp) ---
M64 = (1 << 64) - 1


def hash_uniform(n, seed, low, high):
    """value[i] = low + (high - low) * u_i in double, then float32, with u_i in [0, 1) the top
    53 bits of splitmix64(seed + (i + 1) * 0x9E3779B97F4A7C15)."""
    with np.errstate(over="ignore"):
        i = np.arange(1, n + 1, dtype=np.uint64)
        z = np.uint64(seed) + i * np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    u = (z >> np.uint64(11)).astype(np.float64) * (2.0 ** -53)
    return (low + (high - low) * u).astype(np.float32)


def grad_json(t):
    """Full values for small tensors; a sample plus sums for large ones."""
    t = t.detach()
    if t.numel() <= SAMPLE_ABOVE:
        return tensor_json(t)
    flat = t.reshape(-1).double()
    gen = torch.Generator().manual_seed(t.numel())
    idx = torch.randperm(t.numel(), generator=gen)[:SAMPLES].sort().values
    return {"dtype": "f32", "shape": list(t.shape),
            "sample_index": [int(i) for i in idx],
            "sample_values": f32_values(t.reshape(-1)[idx]),
            "sum": float(flat.sum()), "abs_sum": float(flat.abs().sum()),
            "l2": float(flat.norm())}


# --- torchvision-style ResNet with the CIFAR stem (torchvision is not packaged in Debian) ---
class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.relu = nn.ReLU()
        self.conv2 = nn.Conv2d(cout, cout, 3, stride=1, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride=stride, bias=False),
                                            nn.BatchNorm2d(cout))

    def forward(self, x):
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + (self.downsample(x) if self.downsample is not None else x))


class ResNet(nn.Module):
    def __init__(self, widths, blocks, num_classes=10, cin=3):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, widths[0], 3, stride=1, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(widths[0])
        self.relu = nn.ReLU()
        c = widths[0]
        for s, (w, n) in enumerate(zip(widths, blocks)):
            layers = []
            for b in range(n):
                layers.append(BasicBlock(c, w, 2 if (s > 0 and b == 0) else 1))
                c = w
            setattr(self, f"layer{s + 1}", nn.Sequential(*layers))
        self.num_stages = len(widths)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(c, num_classes)

    def forward(self, x):
        x = self.relu(self.bn1(self.conv1(x)))
        for s in range(self.num_stages):
            x = getattr(self, f"layer{s + 1}")(x)
        return self.fc(torch.flatten(self.avgpool(x), 1))


def fmnist_cnn():  # make_model() of bench/peers/src/train_fmnist.py
    return nn.Sequential(
        nn.Conv2d(1, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(3136, 128), nn.ReLU(),
        nn.Linear(128, 10),
    )


# --- layer cases ---
CASES = []


def randomize_bn(m, batches=2):
    """Non-trivial affine parameters and running statistics for every BatchNorm2d in m."""
    with torch.no_grad():
        for bn in [x for x in m.modules() if isinstance(x, nn.BatchNorm2d)]:
            bn.weight.uniform_(0.5, 1.5)
            bn.bias.uniform_(-0.5, 0.5)
            bn.running_mean.uniform_(-0.5, 0.5)
            bn.running_var.uniform_(0.5, 1.5)
            bn.num_batches_tracked.fill_(batches)


def module_case(name, kind, config, module, x, training=True):
    module.train(training)
    state = [named_json(k, v) for k, v in module.state_dict().items()]
    x = x.clone().requires_grad_()
    inp = tensor_json(x)
    out = module(x)
    g = torch.randn(out.shape)
    out.backward(g)
    inp["grad"] = tensor_json(x.grad)
    CASES.append({
        "name": name, "module": kind, "config": config, "training": training,
        "state": state, "input": inp, "grad_output": tensor_json(g), "output": tensor_json(out),
        "param_grads": [named_json(k, p.grad) for k, p in module.named_parameters()],
        "state_after": [named_json(k, v) for k, v in module.state_dict().items()],
    })


def loss_case(name, kind, config, fn, x, target):
    x = x.clone().requires_grad_()
    inp = tensor_json(x)
    out = fn(x, target)
    g = torch.randn(out.shape)
    out.backward(g)
    inp["grad"] = tensor_json(x.grad)
    CASES.append({"name": name, "module": kind, "config": config, "training": True, "state": [],
                  "input": inp, "target": tensor_json(target), "grad_output": tensor_json(g),
                  "output": tensor_json(out), "param_grads": [], "state_after": []})


def layer_cases():
    module_case("linear", "linear", {"in": 5, "out": 3, "bias": True}, nn.Linear(5, 3),
                torch.randn(4, 5))
    module_case("linear_nobias_batched", "linear", {"in": 6, "out": 4, "bias": False},
                nn.Linear(6, 4, bias=False), torch.randn(2, 3, 6))
    module_case("conv2d_pad1", "conv2d",
                {"in": 3, "out": 4, "kernel": 3, "stride": 1, "padding": 1, "bias": True},
                nn.Conv2d(3, 4, 3, padding=1), torch.randn(2, 3, 6, 6))
    module_case("conv2d_stride2_nobias", "conv2d",
                {"in": 3, "out": 4, "kernel": 3, "stride": 2, "padding": 1, "bias": False},
                nn.Conv2d(3, 4, 3, stride=2, padding=1, bias=False), torch.randn(2, 3, 7, 7))
    module_case("conv2d_1x1_stride2", "conv2d",
                {"in": 4, "out": 6, "kernel": 1, "stride": 2, "padding": 0, "bias": False},
                nn.Conv2d(4, 6, 1, stride=2, bias=False), torch.randn(2, 4, 6, 6))

    for name, momentum, training in (("batch_norm_train", 0.1, True),
                                     ("batch_norm_train_cumulative", None, True),
                                     ("batch_norm_eval", 0.1, False)):
        bn = nn.BatchNorm2d(3, momentum=momentum)
        randomize_bn(bn)
        module_case(name, "batch_norm2d", {"features": 3, "momentum": momentum}, bn,
                    torch.randn(4, 3, 5, 5) * 2 + 0.5, training)

    x = torch.randn(2, 3, 4, 4)
    x[0, 0, 0, 0] = 0.0  # PyTorch's relu gradient at 0 is 0
    module_case("relu", "relu", {}, nn.ReLU(), x)
    module_case("max_pool2d_k2", "max_pool2d", {"kernel": 2, "stride": 2, "padding": 0},
                nn.MaxPool2d(2), torch.randn(2, 3, 6, 7))
    module_case("max_pool2d_k3_s2_p1", "max_pool2d", {"kernel": 3, "stride": 2, "padding": 1},
                nn.MaxPool2d(3, stride=2, padding=1), torch.randn(2, 3, 7, 7))
    module_case("avg_pool2d_k2", "avg_pool2d", {"kernel": 2, "stride": 2, "padding": 0},
                nn.AvgPool2d(2), torch.randn(2, 3, 6, 7))
    module_case("avg_pool2d_k3_s2_p1", "avg_pool2d", {"kernel": 3, "stride": 2, "padding": 1},
                nn.AvgPool2d(3, stride=2, padding=1), torch.randn(2, 3, 7, 7))
    module_case("adaptive_avg_pool2d_1x1", "adaptive_avg_pool2d", {"out_h": 1, "out_w": 1},
                nn.AdaptiveAvgPool2d((1, 1)), torch.randn(2, 3, 5, 5))
    module_case("adaptive_avg_pool2d_2x3", "adaptive_avg_pool2d", {"out_h": 2, "out_w": 3},
                nn.AdaptiveAvgPool2d((2, 3)), torch.randn(2, 3, 4, 6))
    module_case("flatten", "flatten", {}, nn.Flatten(), torch.randn(2, 3, 2, 2))
    module_case("dropout_eval", "dropout", {"p": 0.5}, nn.Dropout(0.5), torch.randn(3, 4),
                training=False)

    for name, cin, cout, stride, training in (
            ("basic_block_identity", 4, 4, 1, True),
            ("basic_block_projection", 4, 8, 2, True),
            ("basic_block_projection_eval", 4, 8, 2, False)):
        block = BasicBlock(cin, cout, stride)
        randomize_bn(block)
        module_case(name, "basic_block", {"in": cin, "out": cout, "stride": stride}, block,
                    torch.randn(2, cin, 6, 6), training)

    logits = torch.randn(5, 4) * 2
    labels = torch.tensor([0, 3, 1, 1, 2])
    loss_case("cross_entropy_mean", "cross_entropy", {"reduction": "mean", "smoothing": 0.0},
              lambda a, t: F.cross_entropy(a, t), logits, labels)
    loss_case("cross_entropy_sum", "cross_entropy", {"reduction": "sum", "smoothing": 0.0},
              lambda a, t: F.cross_entropy(a, t, reduction="sum"), logits, labels)
    loss_case("cross_entropy_smooth", "cross_entropy", {"reduction": "mean", "smoothing": 0.1},
              lambda a, t: F.cross_entropy(a, t, label_smoothing=0.1), logits, labels)
    pred, target = torch.randn(3, 4), torch.randn(3, 4)
    loss_case("mse_mean", "mse", {"reduction": "mean"}, lambda a, t: F.mse_loss(a, t), pred,
              target)
    loss_case("mse_sum", "mse", {"reduction": "sum"},
              lambda a, t: F.mse_loss(a, t, reduction="sum"), pred, target)


# --- fmnist_cnn with hashed weights ---
def fill_spec(name, t, index):
    """How a state-dict entry is filled: (low, high) by role, seed = 1000 + position."""
    if name.endswith("num_batches_tracked"):
        return {"constant": 3}
    bn = t.dim() == 1 and any(name.startswith(f"{i}.") for i in (1, 5))
    if bn:
        low, high = {"weight": (0.5, 1.5), "bias": (-0.5, 0.5), "running_mean": (-0.5, 0.5),
                     "running_var": (0.5, 1.5)}[name.split(".")[1]]
    else:
        fan_in = t.shape[1] * int(np.prod(t.shape[2:])) if t.dim() > 1 else None
        if fan_in is None:  # a bias: the fan in of its layer's weight
            fan_in = FAN_IN[name.split(".")[0]]
        bound = 1.0 / np.sqrt(fan_in)
        low, high = -bound, bound
    return {"seed": 1000 + index, "low": float(low), "high": float(high)}


FAN_IN = {"0": 9, "4": 288, "9": 3136, "11": 128}


def hashed_fmnist_cnn():
    """fmnist_cnn with every state-dict entry filled per fill_spec (reproducible in C++);
    returns the model and the key list (name, shape, dtype, fill) the C++ side rebuilds."""
    model = fmnist_cnn()
    keys = []
    with torch.no_grad():
        for index, (name, t) in enumerate(model.state_dict().items()):
            spec = fill_spec(name, t, index)
            if "constant" in spec:
                t.fill_(spec["constant"])
            else:
                t.copy_(torch.from_numpy(
                    hash_uniform(t.numel(), spec["seed"], spec["low"], spec["high"])).view(t.shape))
            keys.append(dict(name=name, shape=list(t.shape),
                             dtype="i64" if t.dtype == torch.int64 else "f32", fill=spec))
    return model, keys


def fmnist_case():
    model, keys = hashed_fmnist_cnn()
    x = torch.randn(4, 1, 28, 28).requires_grad_()
    y = torch.tensor([3, 0, 9, 5])
    model.train()
    logits = model(x)
    loss = F.cross_entropy(logits, y)
    loss.backward()
    after = [named_json(k, v) for k, v in model.state_dict().items()
             if "running" in k or "num_batches" in k]
    model.eval()
    with torch.no_grad():
        eval_logits = model(x)
    return {"keys": keys, "input": tensor_json(x), "target": tensor_json(y),
            "logits": tensor_json(logits), "loss": tensor_json(loss),
            "input_grad": tensor_json(x.grad),
            "param_grads": [dict(name=k, **grad_json(p.grad)) for k, p in model.named_parameters()],
            "buffers_after": after, "eval_logits": tensor_json(eval_logits)}


def model_info(model):
    return {"num_parameters": sum(p.numel() for p in model.parameters()),
            "keys": [[k, list(v.shape)] for k, v in model.state_dict().items()]}


def main():
    layer_cases()
    data = {
        "torch_version": torch.__version__,
        "cases": CASES,
        "fmnist_cnn": fmnist_case(),
        "models": {"fmnist_cnn": model_info(fmnist_cnn()),
                   "resnet18": model_info(ResNet([64, 128, 256, 512], [2, 2, 2, 2])),
                   "resnet20": model_info(ResNet([16, 32, 64], [3, 3, 3]))},
    }
    with open(OUT_PATH, "w") as f:
        json.dump(data, f, separators=(",", ":"))
        f.write("\n")
    print(f"wrote {OUT_PATH}: {len(CASES)} cases, {os.path.getsize(OUT_PATH)} bytes; params: "
          + ", ".join(f"{k} {v['num_parameters']}" for k, v in data["models"].items()))


if __name__ == "__main__":
    main()

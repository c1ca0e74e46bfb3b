"""Writes tests/golden/train_steps.json: PyTorch 1.13 training train_fmnist.py's CNN for 10 SGD
steps and, separately, 10 Adam steps from the same initial weights on the same 10 batches,
which tests/nn/test_train_golden.cpp replays with ringlet (never needing PyTorch). Regenerate with
    cd <repo root> && /usr/bin/python3 tests/golden/make_train_golden.py

Nothing large is stored as decimals (the file stays far below 1 MB):
- Initial weights: the splitmix64 fill of make_nn_golden.py (hash_uniform, fill_spec), which
  the C++ test reproduces bit for bit; "keys" lists every state-dict entry and how to fill it.
- Batches: batch b (of 10, 16 images each) has int labels (stored) and images
      x = float32(noise + template[label])
  where noise = hash_uniform(16 * 784, NOISE_SEED + b, -NOISE, NOISE) and template[c] =
  hash_uniform(784, TEMPLATE_SEED + c, -1, 1), both float32, added in float32 (exact IEEE
  rounding, reproducible in C++). The class templates make the batches learnable, so the
  losses fall as in real training rather than wandering around log(10).
- Per run: the loss of each step's forward (before its update) and, after the 10 steps, the
  sum, sum of |v| and L2 norm (in float64) of every float state-dict entry (parameters and
  BatchNorm running statistics), and the value of each num_batches_tracked.
The model is in train mode throughout (BatchNorm normalizes with batch statistics and updates
its running statistics). One thread, so the figures do not depend on the machine's core count.
Output is deterministic.
"""
import json
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from make_nn_golden import hash_uniform, hashed_fmnist_cnn  # noqa: E402

OUT_PATH = os.path.join(HERE, "train_steps.json")
STEPS = 10
BATCH = 16
NOISE_SEED = 5000
TEMPLATE_SEED = 6000
NOISE = 0.25  # half-width of the per-image noise; the class templates span [-1, 1]
LABEL_SEED = 11

RUNS = {
    "sgd": {"optimizer": "sgd", "lr": 0.05, "momentum": 0.9, "weight_decay": 5e-4},
    "adam": {"optimizer": "adam", "lr": 1e-3},
}


def batches(labels):
    templates = np.stack([hash_uniform(784, TEMPLATE_SEED + c, -1.0, 1.0) for c in range(10)])
    out = []
    for b in range(STEPS):
        noise = hash_uniform(BATCH * 784, NOISE_SEED + b, -NOISE, NOISE).reshape(BATCH, 784)
        x = (noise + templates[labels[b]]).astype(np.float32)  # float32 + float32
        assert x.dtype == np.float32
        out.append((torch.from_numpy(x).view(BATCH, 1, 28, 28),
                    torch.from_numpy(np.asarray(labels[b], dtype=np.int64))))
    return out


def run(options, data):
    model, _ = hashed_fmnist_cnn()
    model.train()
    params = list(model.parameters())
    if options["optimizer"] == "sgd":
        opt = torch.optim.SGD(params, lr=options["lr"], momentum=options["momentum"],
                              weight_decay=options["weight_decay"])
    else:
        opt = torch.optim.Adam(params, lr=options["lr"])
    losses = []
    for x, y in data:
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        losses.append(float(loss))
    final = []
    for name, t in model.state_dict().items():
        if t.dtype != torch.float32:  # num_batches_tracked
            final.append({"name": name, "value": int(t)})
            continue
        v = t.detach().double()
        final.append({"name": name, "sum": float(v.sum()), "abs_sum": float(v.abs().sum()),
                      "l2": float(v.norm())})
    return {"options": options, "losses": losses, "final": final}


def main():
    torch.set_num_threads(1)
    labels = np.random.default_rng(LABEL_SEED).integers(0, 10, size=(STEPS, BATCH))
    data = batches(labels)
    _, keys = hashed_fmnist_cnn()
    out = {
        "torch_version": torch.__version__,
        "keys": keys,
        "data": {"steps": STEPS, "batch": BATCH, "noise_seed": NOISE_SEED,
                 "noise": NOISE, "template_seed": TEMPLATE_SEED, "labels": labels.tolist()},
        "runs": {name: run(options, data) for name, options in RUNS.items()},
    }
    with open(OUT_PATH, "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    print(f"wrote {OUT_PATH}: {os.path.getsize(OUT_PATH)} bytes")
    for name, r in out["runs"].items():
        print(name, " ".join(f"{v:.4f}" for v in r["losses"]))


if __name__ == "__main__":
    main()

"""Writes tests/golden/rng.json: what PyTorch's CPU generator draws after torch.manual_seed(s),
replayed by tests/trainer/test_torch_seed.cpp (which never needs PyTorch). Regenerate with Debian's
PyTorch 1.13:
    cd <repo root> && /usr/bin/python3 tests/golden/make_rng_golden.py

Contents:
- "draws": torch.rand / uniform_ / randint / randn / randperm results for small fixed seeds,
  float32 and float64, including randn sizes below 16 (scalar Box-Muller) and above 16 with a
  tail (torch's normal_fill, which redraws the last 16).
- "randperm_60000": randperm(60000) for seed 1, sampled (head, tail, a checksum).
- "fmnist_cnn": train_fmnist.py's make_model() right after torch.manual_seed(0): each parameter's
  first values, last value and sum (the whole model would not fit the size budget).
- "distributed_sampler": torch.utils.data.DistributedSampler(range(60000), 2 replicas, seed 0)
  for epochs 0 and 1: each rank's first indices, length and checksum.
Output is deterministic.
"""
import json
import os
import sys

import torch
from torch.utils.data.distributed import DistributedSampler

HERE = os.path.dirname(os.path.abspath(__file__))
OUT_PATH = os.path.join(HERE, "rng.json")

sys.path.insert(0, HERE)
from make_golden import tensor_json  # noqa: E402  (exact f32 decimals)
from make_nn_golden import fmnist_cnn  # noqa: E402  (train_fmnist.py's model)


def f64_json(t):
    return {"dtype": "f64", "shape": list(t.shape), "values": [float(v) for v in t.reshape(-1)]}


def as_json(t):
    return f64_json(t) if t.dtype == torch.float64 else tensor_json(t)


def checksum(values):
    """sum of (i + 1) * v mod 2^61 - 1 over integer values: order-sensitive."""
    m = (1 << 61) - 1
    return sum((i + 1) * int(v) for i, v in enumerate(values)) % m


def draw(kind, seed, dtype, **kw):
    torch.manual_seed(seed)
    if kind == "rand":
        t = torch.rand(kw["n"], dtype=dtype)
    elif kind == "uniform":
        t = torch.empty(kw["n"], dtype=dtype).uniform_(kw["low"], kw["high"])
    elif kind == "normal":
        t = torch.empty(kw["n"], dtype=dtype).normal_(kw["mean"], kw["std"])
    elif kind == "randint":
        t = torch.randint(kw["low"], kw["high"], (kw["n"],))
    elif kind == "randperm":
        t = torch.randperm(kw["n"])
    else:
        raise ValueError(kind)
    dtype_name = {torch.float32: "f32", torch.float64: "f64", None: "i64"}[dtype]
    return dict(kind=kind, seed=seed, dtype=dtype_name, **kw, out=as_json(t))


def main():
    f32, f64 = torch.float32, torch.float64
    draws = [
        draw("rand", 0, f32, n=20),
        draw("rand", 7, f64, n=6),
        draw("uniform", 0, f32, n=12, low=-0.3, high=0.3),
        draw("uniform", 3, f64, n=5, low=-2.0, high=5.0),
        draw("normal", 0, f32, n=5, mean=0.0, std=1.0),
        draw("normal", 0, f32, n=16, mean=0.0, std=1.0),
        draw("normal", 2, f32, n=37, mean=1.5, std=0.5),
        draw("normal", 4, f64, n=7, mean=0.0, std=2.0),
        draw("normal", 4, f64, n=21, mean=-1.0, std=1.0),
        draw("randint", 0, None, n=10, low=0, high=10),
        draw("randint", 9, None, n=6, low=-50, high=1000),
        draw("randint", 5, None, n=4, low=0, high=1 << 40),
        draw("randperm", 5, None, n=10),
        draw("randperm", 11, None, n=1),
    ]

    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    perm = torch.randperm(60000, generator=g).tolist()
    randperm_60000 = dict(seed=1, head=perm[:16], tail=perm[-4:], checksum=checksum(perm))

    torch.manual_seed(0)
    model = fmnist_cnn()
    params = []
    for name, p in model.named_parameters():
        flat = p.detach().reshape(-1)
        params.append(dict(name=name, shape=list(p.shape), head=tensor_json(flat[:6])["values"],
                           last=tensor_json(flat[-1:])["values"][0],
                           sum=float(flat.double().sum())))

    sampler = []
    for epoch in (0, 1):
        for rank in (0, 1):
            s = DistributedSampler(range(60000), num_replicas=2, rank=rank, shuffle=True, seed=0)
            s.set_epoch(epoch)
            idx = list(iter(s))
            sampler.append(dict(epoch=epoch, rank=rank, length=len(idx), head=idx[:8],
                                checksum=checksum(idx)))

    out = dict(torch_version=torch.__version__, draws=draws, randperm_60000=randperm_60000,
               fmnist_cnn=params, distributed_sampler=sampler)
    with open(OUT_PATH, "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    print(f"wrote {OUT_PATH} ({os.path.getsize(OUT_PATH)} bytes)")


if __name__ == "__main__":
    main()

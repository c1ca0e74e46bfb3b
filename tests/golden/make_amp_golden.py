"""Writes tests/golden/amp.json: one forward and backward step of a small MLP (linear, relu,
linear) under PyTorch's bfloat16 autocast on the CPU: the linear layers take bf16 inputs,
accumulate in f32 and return bf16; the parameters stay f32; the loss is computed in f32 from the
bf16 logits.

tests/nn/test_autocast.cpp replays it with nn::Autocast(bf16). There is no convolution here:
PyTorch 1.13's CPU bf16 convolution accumulates in bf16 (on a 3x3, 2-channel case it lands up
to 0.06 away from the f32-accumulated result), which is not the f32 accumulation that mixed
precision means (and that cuDNN does), so test_autocast checks Conv2d against that definition
instead. Regenerate (Debian's python3-torch, PyTorch 1.13) with
    cd <repo root> && /usr/bin/python3 tests/golden/make_amp_golden.py
and commit amp.json. Tensors are {"shape": [...], "values": [...]} (f32, row-major).
"""
import json
import os

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
OUT_PATH = os.path.join(HERE, "amp.json")


def tensor_json(t):
    t = t.detach().float()
    return {"shape": list(t.shape), "values": [float(v) for v in t.reshape(-1).tolist()]}


def main():
    torch.manual_seed(7)
    x = torch.randn(6, 20)
    labels = torch.tensor([1, 4, 0, 2, 3, 1])
    params = {
        "fc1_weight": (torch.randn(16, 20) * 0.3).requires_grad_(),
        "fc1_bias": (torch.randn(16) * 0.1).requires_grad_(),
        "fc2_weight": (torch.randn(5, 16) * 0.3).requires_grad_(),
        "fc2_bias": (torch.randn(5) * 0.1).requires_grad_(),
    }
    p = params
    with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
        h = F.relu(F.linear(x, p["fc1_weight"], p["fc1_bias"]))
        logits = F.linear(h, p["fc2_weight"], p["fc2_bias"])
    assert logits.dtype == torch.bfloat16, logits.dtype
    loss = F.cross_entropy(logits.float(), labels)
    loss.backward()
    case = {
        "torch_version": torch.__version__,
        "input": tensor_json(x),
        "labels": labels.tolist(),
        "logits": tensor_json(logits),
        "loss": float(loss),
    }
    for name, t in params.items():
        case[name] = tensor_json(t)
        case["grad_" + name] = tensor_json(t.grad)
    with open(OUT_PATH, "w") as f:
        json.dump(case, f, sort_keys=True)
        f.write("\n")
    print("wrote", OUT_PATH)


if __name__ == "__main__":
    main()

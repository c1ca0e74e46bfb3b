"""Writes tests/golden/optim.json: PyTorch 1.13's optimizer updates, LR schedules and
gradient clipping, which tests/nn/test_optim.cpp replays without PyTorch.

Regenerate (Debian's python3-torch) with
    cd <repo root> && /usr/bin/python3 tests/golden/make_optim_golden.py
and commit optim.json; a new case's name also goes into the expected lists of test_optim.cpp.
Output is deterministic (fixed seed, fixed key order).

Format:
  "optimizers": [{"name", "optimizer": "sgd"|"adam"|"adamw", "options": {...},
                  "params": [tensor...],                  initial values
                  "grads": [[tensor|null per param] per step],  null: no gradient that step
                  "after": [[tensor per param] per step]}]  parameters after each step
  "schedules": [{"name", "kind", "options", "lr", "lrs": [lr after construction, then after
                 each step()]}]
  "clip": [{"name", "max_norm", "norm_type", "grads": [tensor...], "total_norm",
            "clipped": [tensor...]}]
A tensor is {"dtype": "f32"|"f64", "shape": [...], "values": [...]} (row-major); f32 values
are the shortest decimals that read back as the same float, f64 values are Python reprs.
"""
import json
import math
import os
import warnings

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
OUT_PATH = os.path.join(HERE, "optim.json")


def tensor_json(t):
    t = t.detach()
    if t.dtype == torch.float32:
        vals = []
        for v in t.reshape(-1).numpy():
            s = float(str(v))
            assert np.float32(s) == v, (v, s)
            vals.append(s)
        return {"dtype": "f32", "shape": list(t.shape), "values": vals}
    if t.dtype == torch.float64:
        return {"dtype": "f64", "shape": list(t.shape),
                "values": [float(v) for v in t.reshape(-1).numpy()]}
    raise TypeError(t.dtype)


# Shapes: one tensor longer than 16 elements so PyTorch's vectorized kernel path is covered
# as well as its scalar tail.
SHAPES = [(3, 4), (5,), (37,)]


def optimizer_case(name, kind, options, dtype=torch.float32, missing=()):
    """Three steps from fixed initial values with stored gradients; `missing` lists
    (step, param) pairs that get no gradient (the optimizer must skip them)."""
    params = [torch.randn(*s, dtype=dtype).requires_grad_() for s in SHAPES]
    initial = [tensor_json(p) for p in params]
    if kind == "sgd":
        opt = torch.optim.SGD(params, **options)
    else:
        opt_options = dict(options)
        if "beta1" in opt_options:
            opt_options["betas"] = (opt_options.pop("beta1"), opt_options.pop("beta2"))
        cls = torch.optim.Adam if kind == "adam" else torch.optim.AdamW
        opt = cls(params, **opt_options)
    grads, after = [], []
    for step in range(3):
        opt.zero_grad(set_to_none=True)
        row = []
        for i, p in enumerate(params):
            if (step, i) in missing:
                row.append(None)
                continue
            g = torch.randn(p.shape, dtype=dtype)
            p.grad = g.clone()
            row.append(tensor_json(g))
        opt.step()
        grads.append(row)
        after.append([tensor_json(p) for p in params])
    return {"name": name, "optimizer": kind, "options": options, "params": initial,
            "grads": grads, "after": after}


def schedule_case(name, kind, options, steps=12, lr=0.1):
    opt = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=lr)
    if kind == "step":
        sched = torch.optim.lr_scheduler.StepLR(opt, **options)
    elif kind == "multistep":
        sched = torch.optim.lr_scheduler.MultiStepLR(opt, **options)
    elif kind == "linear":
        sched = torch.optim.lr_scheduler.LinearLR(opt, **options)
    elif kind == "cosine":
        sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, **options)
    elif kind == "warmup_cosine":
        warmup, total = options["warmup_iters"], options["total_iters"]
        sched = torch.optim.lr_scheduler.SequentialLR(
            opt,
            [torch.optim.lr_scheduler.LinearLR(opt, start_factor=options["start_factor"],
                                               end_factor=1.0, total_iters=warmup),
             torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=total - warmup,
                                                        eta_min=options["eta_min"])],
            milestones=[warmup])
    else:
        raise ValueError(kind)
    lrs = [opt.param_groups[0]["lr"]]
    for _ in range(steps):
        opt.step()
        sched.step()
        lrs.append(opt.param_groups[0]["lr"])
        assert sched.get_last_lr()[0] == lrs[-1]
    return {"name": name, "kind": kind, "options": options, "lr": lr, "lrs": lrs}


def clip_case(name, max_norm, norm_type, scale=1.0):
    params = [torch.zeros(*s, requires_grad=True) for s in SHAPES]
    grads = []
    for p in params:
        p.grad = torch.randn(p.shape) * scale
        grads.append(tensor_json(p.grad))
    total = torch.nn.utils.clip_grad_norm_(params, max_norm, norm_type=norm_type)
    return {"name": name, "max_norm": max_norm,
            "norm_type": "inf" if math.isinf(norm_type) else norm_type, "grads": grads,
            "total_norm": float(total), "clipped": [tensor_json(p.grad) for p in params]}


def main():
    # SequentialLR calls scheduler.step(0) at a milestone, which warns about the deprecated
    # epoch argument; that closed-form jump is exactly the behaviour being recorded.
    warnings.filterwarnings("ignore", message="The epoch parameter")
    torch.manual_seed(20240605)
    optimizers = [
        optimizer_case("sgd_plain", "sgd", {"lr": 0.1}),
        optimizer_case("sgd_momentum", "sgd", {"lr": 0.05, "momentum": 0.9},
                       missing={(0, 1)}),
        optimizer_case("sgd_momentum_dampening", "sgd",
                       {"lr": 0.05, "momentum": 0.9, "dampening": 0.3}),
        optimizer_case("sgd_nesterov", "sgd", {"lr": 0.05, "momentum": 0.9, "nesterov": True}),
        optimizer_case("sgd_weight_decay", "sgd",
                       {"lr": 0.05, "momentum": 0.9, "weight_decay": 5e-4}),
        optimizer_case("sgd_momentum_f64", "sgd",
                       {"lr": 0.05, "momentum": 0.9, "weight_decay": 1e-2}, dtype=torch.float64),
        optimizer_case("adam_default", "adam", {"lr": 1e-3}, missing={(0, 2)}),
        optimizer_case("adam_weight_decay", "adam",
                       {"lr": 2e-2, "beta1": 0.8, "beta2": 0.99, "eps": 1e-6,
                        "weight_decay": 0.1}),
        optimizer_case("adam_amsgrad", "adam", {"lr": 1e-2, "amsgrad": True}),
        optimizer_case("adamw_default", "adamw", {"lr": 1e-3}),
        optimizer_case("adamw_weight_decay_amsgrad", "adamw",
                       {"lr": 5e-2, "weight_decay": 0.3, "amsgrad": True}),
        optimizer_case("adam_f64", "adam", {"lr": 1e-2, "weight_decay": 1e-2},
                       dtype=torch.float64),
    ]
    schedules = [
        schedule_case("step", "step", {"step_size": 3, "gamma": 0.5}),
        schedule_case("multistep", "multistep", {"milestones": [2, 5, 5, 9], "gamma": 0.1}),
        schedule_case("linear_warmup", "linear",
                      {"start_factor": 0.25, "end_factor": 1.0, "total_iters": 4}),
        schedule_case("linear_decay", "linear",
                      {"start_factor": 1.0, "end_factor": 0.1, "total_iters": 6}),
        # Past T_max, PyTorch's recursive form turns around; 25 steps cover that branch.
        schedule_case("cosine", "cosine", {"T_max": 10, "eta_min": 0.001}, steps=25),
        schedule_case("warmup_cosine", "warmup_cosine",
                      {"warmup_iters": 3, "total_iters": 12, "start_factor": 0.1,
                       "eta_min": 0.0}, steps=12),
    ]
    clips = [
        clip_case("l2_clipped", 1.0, 2.0),
        clip_case("l2_not_clipped", 100.0, 2.0),
        clip_case("inf_clipped", 0.5, math.inf),
        clip_case("l1_clipped", 3.0, 1.0, scale=0.5),
    ]
    out = {"torch_version": torch.__version__, "optimizers": optimizers,
           "schedules": schedules, "clip": clips}
    with open(OUT_PATH, "w") as f:
        json.dump(out, f, separators=(",", ":"))
        f.write("\n")
    print("wrote", OUT_PATH, os.path.getsize(OUT_PATH), "bytes")


if __name__ == "__main__":
    main()

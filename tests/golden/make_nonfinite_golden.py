"""Writes tests/golden/nonfinite.json: PyTorch's results when NaN and +-inf reach the ops a
network runs (activations, pooling, matmul/linear, conv, batch norm, softmax, losses, reductions)
and the optimizers' updates, forward and backward.

tests/tensor/test_golden.cpp replays the op cases on the CPU and on the emulated device,
tests/nn/test_optim.cpp the optimizer cases; neither needs PyTorch. Regenerate (Debian's
python3-torch, PyTorch 1.13) with
    cd <repo root> && /usr/bin/python3 tests/golden/make_nonfinite_golden.py
and commit nonfinite.json; a new case's name also goes into the test's expected list.

The format is ops.json's ("cases") and optim.json's ("optimizers"), except that a non-finite
value is stored as the string "nan", "inf" or "-inf" (JSON has no number for them).
"""
import json
import math
import os

import torch
import torch.nn.functional as F

import make_golden as g
import make_optim_golden as og

HERE = os.path.dirname(os.path.abspath(__file__))
OUT_PATH = os.path.join(HERE, "nonfinite.json")
NAN, INF = float("nan"), float("inf")


def encode(v):
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return v


def encoded(tensor_json):
    """Wraps a tensor_json so its values go out with non-finite ones as strings."""
    def wrapped(t):
        out = tensor_json(t)
        out["values"] = [encode(v) for v in out["values"]]
        return out
    return wrapped


def finite_f32(values):
    """make_golden's f32_values without its finiteness assertion."""
    return [float(v) if not math.isfinite(v) else float(str(v))
            for v in t_numpy(values)]


def t_numpy(t):
    return t.detach().reshape(-1).numpy().astype("float32")


g.f32_values = finite_f32
g.tensor_json = encoded(g.tensor_json)


def og_tensor_json(t):
    t = t.detach()
    dtype = "f32" if t.dtype == torch.float32 else "f64"
    vals = [float(str(v)) if math.isfinite(v) else float(v) for v in t.reshape(-1).numpy()]
    return {"dtype": dtype, "shape": list(t.shape), "values": vals}


og.tensor_json = encoded(og_tensor_json)


def with_values(shape, spots):
    """randn of `shape` with the given flat positions set (NaN, inf or -inf), requiring grad."""
    t = torch.randn(*shape)
    flat = t.view(-1)
    for i, v in spots.items():
        flat[i] = v
    return t.requires_grad_()


def activation_cases():
    x = lambda: with_values((3, 4), {1: NAN, 5: INF, 6: -INF, 9: 0.0})
    g.case("relu_nonfinite", "relu", torch.relu, [x()])
    g.case("sigmoid_nonfinite", "sigmoid", torch.sigmoid, [x()])
    g.case("tanh_nonfinite", "tanh", torch.tanh, [x()])
    g.case("exp_nonfinite", "exp", torch.exp, [x()])
    g.case("clamp_nonfinite", "clamp", lambda a: torch.clamp(a, -0.5, 0.5), [x()],
           {"min": -0.5, "max": 0.5})
    g.case("maximum_nan", "maximum", torch.maximum, [x(), with_values((4,), {2: NAN})])
    g.case("minimum_nan", "minimum", torch.minimum, [x(), with_values((4,), {2: NAN})])
    g.case("mul_inf_zero", "mul", torch.mul,
           [with_values((2, 3), {0: INF, 4: -INF}), with_values((2, 3), {0: 0.0, 1: NAN})])


def reduce_cases():
    x = lambda: with_values((3, 5), {2: NAN, 7: INF, 13: -INF})
    g.case("sum_nonfinite", "sum", lambda a: a.sum(dim=1), [x()], {"dims": [1], "keepdim": False})
    g.case("mean_nonfinite", "mean", lambda a: a.mean(dim=0), [x()],
           {"dims": [0], "keepdim": False})
    g.case("var_nonfinite", "var", lambda a: a.var(dim=1), [x()],
           {"dims": [1], "unbiased": True, "keepdim": False})
    g.case("max_dim_nan", "max_dim", lambda a: tuple(torch.max(a, 1)), [x()],
           {"dim": 1, "keepdim": False})
    g.case("min_dim_nan", "min_dim", lambda a: tuple(torch.min(a, 1)), [x()],
           {"dim": 1, "keepdim": False})
    g.case("max_full_nan", "max_full", torch.max, [x()])
    g.case("argmax_nan", "argmax", lambda a: torch.argmax(a, 1), [x()],
           {"dim": 1, "keepdim": False}, backward=False)
    g.case("softmax_nonfinite", "softmax", lambda a: torch.softmax(a, 1), [x()], {"dim": 1})
    g.case("log_softmax_nonfinite", "log_softmax", lambda a: torch.log_softmax(a, 1), [x()],
           {"dim": 1})


def layer_cases():
    # A NaN weight reaches every row of the output column it feeds; inf * 0 is NaN.
    g.case("linear_nan_weight", "linear", F.linear,
           [g.rn(4, 5), with_values((3, 5), {6: NAN}), g.rn(3)])
    g.case("matmul_inf", "matmul", torch.matmul,
           [with_values((3, 4), {1: INF}), with_values((4, 2), {4: 0.0})])
    g.case("conv2d_nan_pixel", "conv2d", lambda x, w, b: F.conv2d(x, w, b, 1, 1),
           [with_values((2, 2, 5, 5), {12: NAN}), g.rn(3, 2, 3, 3), g.rn(3)],
           {"stride": [1, 1], "padding": [1, 1], "dilation": [1, 1]})
    pool = {"kernel": [2, 2], "stride": [2, 2], "padding": [0, 0]}
    pooled = lambda: with_values((1, 2, 4, 4), {0: NAN, 5: INF, 18: -INF, 27: NAN})
    g.case("max_pool2d_nonfinite", "max_pool2d",
           lambda t: tuple(F.max_pool2d(t, 2, 2, 0, return_indices=True)), [pooled()], pool)
    g.case("avg_pool2d_nonfinite", "avg_pool2d", lambda t: F.avg_pool2d(t, 2, 2, 0), [pooled()],
           pool)
    for training in (True, False):
        rm, rv = torch.zeros(3), torch.ones(3)
        name = "batch_norm_nan_" + ("train" if training else "eval")
        g.case(name, "batch_norm",
               lambda x, rm, rv, w, b, tr=training: F.batch_norm(x, rm, rv, w, b, tr, 0.1, 1e-5),
               [with_values((4, 3, 2, 2), {5: NAN}), rm, rv, g.rn(3), g.rn(3)],
               {"training": training, "momentum": 0.1, "eps": 1e-5}, after=(1, 2))


def loss_cases():
    labels = torch.tensor([0, 3, 1, 4])
    for name, spots in (("nan", {6: NAN}), ("inf", {2: INF}), ("minus_inf", {0: -INF})):
        for red in ("mean", "none"):
            g.case(f"cross_entropy_{name}_{red}", "cross_entropy",
                   lambda x, t, red=red: F.cross_entropy(x, t, reduction=red),
                   [with_values((4, 5), spots), labels], {"reduction": red,
                                                          "label_smoothing": 0.0})
    g.case("mse_loss_inf", "mse_loss", lambda x, t: F.mse_loss(x, t),
           [with_values((2, 3), {1: INF}), g.rn(2, 3)], {"reduction": "mean"})


def optimizer_cases():
    """Each optimizer with one NaN in a gradient at the first step: that element (and, where
    the update couples elements, nothing else) becomes NaN, as in PyTorch."""
    def with_nan_grads(kind, options):
        torch.manual_seed(len(kind) + len(options))
        real_randn = torch.randn
        calls = [0]

        def randn(*shape, **kw):
            t = real_randn(*shape, **kw)
            calls[0] += 1
            if calls[0] == 4:  # the first step's first gradient
                t.view(-1)[2] = NAN
            return t
        torch.randn = randn
        try:
            return og.optimizer_case(f"{kind}_nan_grad", kind, options)
        finally:
            torch.randn = real_randn

    return [with_nan_grads("sgd", {"lr": 0.05, "momentum": 0.9, "weight_decay": 5e-4}),
            with_nan_grads("adam", {"lr": 0.01}),
            with_nan_grads("adamw", {"lr": 0.01, "weight_decay": 0.01})]


def main():
    torch.manual_seed(51)
    activation_cases()
    reduce_cases()
    layer_cases()
    loss_cases()
    names = [c["name"] for c in g.CASES]
    assert len(names) == len(set(names)), "duplicate case names"
    optimizers = optimizer_cases()
    dump = lambda obj: json.dumps(obj, separators=(",", ":"), allow_nan=False)
    with open(OUT_PATH, "w") as f:
        f.write('{"generator":"tests/golden/make_nonfinite_golden.py","torch":'
                + dump(torch.__version__))
        f.write(',\n"cases":[\n' + ",\n".join(dump(c) for c in g.CASES))
        f.write('\n],\n"optimizers":[\n' + ",\n".join(dump(o) for o in optimizers) + "\n]}\n")
    print(f"wrote {len(g.CASES)} op cases and {len(optimizers)} optimizer cases to {OUT_PATH} "
          f"({os.path.getsize(OUT_PATH)} bytes)")


if __name__ == "__main__":
    main()

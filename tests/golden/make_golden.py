"""Writes tests/golden/ops.json: PyTorch's forward and backward results for every op family
ringlet implements, plus one forward/backward step of a tiny FMNIST-style CNN.

tests/tensor/test_golden.cpp replays each case and compares; it never needs PyTorch. Regenerate
(Debian's python3-torch, PyTorch 1.13) with
    cd <repo root> && /usr/bin/python3 tests/golden/make_golden.py
and commit the new ops.json; a new case's name also goes into kExpectedCases there. Output is
deterministic (fixed seed, fixed key order). Dropout has no case: its mask comes from
ringlet's own generator, so PyTorch cannot reproduce it (its tests check statistics instead).

Case format: {"name", "op" (the C++ kind), "params", "inputs": [tensor...],
"grad_output": tensor (absent for forward-only ops), "outputs": [tensor...],
"after": [{"input": i, ...tensor}] (inputs updated in place, e.g. running stats)}.
A tensor is {"dtype": "f32"|"i64"|"u8", "shape": [...], "values": [...] (row-major)};
an input with a "grad" key requires grad and "grad" is its expected gradient.
outputs[0] is the tensor backward starts from; the others (indices) are forward checks.
"""
import json
import os

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
OUT_PATH = os.path.join(HERE, "ops.json")


def f32_values(t):
    """Shortest decimal that reads back (strtod, then cast to float) as the same float32."""
    out = []
    for v in t.detach().reshape(-1).numpy().astype(np.float32):
        s = float(str(v))
        assert np.float32(s) == v or (np.isnan(v) and np.isnan(s)), (v, s)
        out.append(s)
    return out


def tensor_json(t):
    t = t.detach()
    if t.dtype == torch.float32:
        return {"dtype": "f32", "shape": list(t.shape), "values": f32_values(t)}
    if t.dtype == torch.int64:
        return {"dtype": "i64", "shape": list(t.shape), "values": [int(v) for v in t.reshape(-1)]}
    if t.dtype == torch.bool or t.dtype == torch.uint8:
        return {"dtype": "u8", "shape": list(t.shape),
                "values": [int(v) for v in t.to(torch.uint8).reshape(-1)]}
    raise TypeError(t.dtype)


CASES = []


def case(name, op, fn, inputs, params=None, backward=True, after=()):
    """Runs fn(*inputs) -> tensor or tuple (first one differentiable), then backward with a
    random upstream gradient. Float inputs with requires_grad get their gradient stored;
    `after` lists input positions whose in-place updates are stored too."""
    saved = [tensor_json(x) for x in inputs]  # before any in-place update
    outs = fn(*inputs)
    outs = list(outs) if isinstance(outs, tuple) else [outs]
    entry = {"name": name, "op": op, "params": params or {}, "inputs": saved}
    if backward:
        g = torch.randn(outs[0].shape)
        outs[0].backward(g)
        entry["grad_output"] = tensor_json(g)
        for x, s in zip(inputs, saved):
            if x.requires_grad:
                assert x.grad is not None, name
                s["grad"] = tensor_json(x.grad)
    entry["outputs"] = [tensor_json(o) for o in outs]
    entry["after"] = [dict(input=i, **tensor_json(inputs[i])) for i in after]
    CASES.append(entry)


def rn(*shape):
    return torch.randn(*shape).requires_grad_()


def away_from_zero(*shape):
    """|x| in [0.5, 2] with random sign: keeps div, log-like ops and kinks well conditioned."""
    mag = torch.rand(*shape) * 1.5 + 0.5
    sign = torch.where(torch.rand(*shape) < 0.5, -1.0, 1.0)
    return (mag * sign).requires_grad_()


def positive(*shape):
    return (torch.rand(*shape) * 1.5 + 0.5).requires_grad_()


def elementwise_cases():
    case("add_broadcast", "add", torch.add, [rn(2, 3, 4), rn(3, 1)])
    case("sub_broadcast", "sub", torch.sub, [rn(4), rn(2, 1, 4)])
    case("mul_broadcast", "mul", torch.mul, [rn(2, 1, 3), rn(4, 1)])
    case("div_broadcast", "div", torch.div, [rn(3, 4), away_from_zero(4)])
    case("add_scalar", "add_scalar", lambda a: a + 1.5, [rn(2, 3)], {"scalar": 1.5})
    case("sub_scalar", "sub_scalar", lambda a: a - 0.25, [rn(2, 3)], {"scalar": 0.25})
    case("mul_scalar", "mul_scalar", lambda a: a * -3.0, [rn(2, 3)], {"scalar": -3.0})
    case("div_scalar", "div_scalar", lambda a: a / 4.0, [rn(2, 3)], {"scalar": 4.0})
    case("pow_tensor", "pow", torch.pow, [positive(3, 4), rn(4)])
    case("pow_scalar_int", "pow_scalar", lambda a: torch.pow(a, 3.0), [rn(3, 4)],
         {"exponent": 3.0})
    case("pow_scalar_frac", "pow_scalar", lambda a: torch.pow(a, 2.5), [positive(3, 4)],
         {"exponent": 2.5})
    case("neg", "neg", torch.neg, [rn(3, 4)])
    case("exp", "exp", torch.exp, [rn(3, 4)])
    case("log", "log", torch.log, [positive(3, 4)])
    case("sqrt", "sqrt", torch.sqrt, [positive(3, 4)])
    # abs and relu get exact zeros: PyTorch's gradient there is 0.
    with_zeros = torch.randn(3, 4)
    with_zeros[0, 1] = 0.0
    with_zeros[2, 3] = 0.0
    case("abs", "abs", torch.abs, [with_zeros.clone().requires_grad_()])
    case("relu", "relu", torch.relu, [with_zeros.clone().requires_grad_()])
    case("sigmoid", "sigmoid", torch.sigmoid, [rn(3, 4)])
    case("tanh", "tanh", torch.tanh, [rn(3, 4)])
    # Values exactly on the bounds: PyTorch passes the gradient there.
    c = torch.randn(3, 4)
    c[0, 0] = -0.5
    c[1, 2] = 0.5
    case("clamp", "clamp", lambda a: torch.clamp(a, -0.5, 0.5), [c.requires_grad_()],
         {"min": -0.5, "max": 0.5})
    cond = torch.rand(3, 4) < 0.5
    case("where_broadcast", "where", lambda cnd, a, b: torch.where(cnd, a, b),
         [cond, rn(3, 1), rn(4)])
    # One tie: PyTorch splits the gradient in half between equal operands.
    a, b = torch.randn(3, 4), torch.randn(4)
    a[1, 2] = b[2]
    case("maximum_broadcast", "maximum", torch.maximum,
         [a.clone().requires_grad_(), b.clone().requires_grad_()])
    case("minimum_broadcast", "minimum", torch.minimum,
         [a.clone().requires_grad_(), b.clone().requires_grad_()])


def reduce_cases():
    case("sum_dims", "sum", lambda x: x.sum(dim=(0, 2)), [rn(2, 3, 4)],
         {"dims": [0, 2], "keepdim": False})
    case("sum_keepdim", "sum", lambda x: x.sum(dim=1, keepdim=True), [rn(2, 3, 4)],
         {"dims": [1], "keepdim": True})
    case("sum_all", "sum", lambda x: x.sum(), [rn(2, 3, 4)], {"dims": [], "keepdim": False})
    case("mean_keepdim", "mean", lambda x: x.mean(dim=-1, keepdim=True), [rn(2, 3, 4)],
         {"dims": [-1], "keepdim": True})
    case("mean_all", "mean", lambda x: x.mean(), [rn(2, 3, 4)], {"dims": [], "keepdim": False})
    case("var_unbiased", "var", lambda x: x.var(dim=1, unbiased=True), [rn(2, 5, 4)],
         {"dims": [1], "unbiased": True, "keepdim": False})
    case("var_biased_keepdim", "var",
         lambda x: x.var(dim=(0, 2), unbiased=False, keepdim=True), [rn(2, 3, 4)],
         {"dims": [0, 2], "unbiased": False, "keepdim": True})
    case("var_all", "var", lambda x: x.var(), [rn(3, 4)],
         {"dims": [], "unbiased": True, "keepdim": False})
    case("max_dim", "max_dim", lambda x: tuple(x.max(dim=1)), [rn(2, 5, 3)],
         {"dim": 1, "keepdim": False})
    case("min_dim_keepdim", "min_dim", lambda x: tuple(x.min(dim=-1, keepdim=True)),
         [rn(3, 4)], {"dim": -1, "keepdim": True})
    # Full max/min with a three-way tie: PyTorch spreads the gradient evenly.
    t = torch.randn(3, 4)
    t[0, 1] = t[1, 3] = t[2, 0] = 5.0
    case("max_full_ties", "max_full", torch.max, [t.clone().requires_grad_()])
    t[0, 1] = t[1, 3] = t[2, 0] = -5.0
    case("min_full_ties", "min_full", torch.min, [t.clone().requires_grad_()])
    case("argmax", "argmax", lambda x: torch.argmax(x, dim=1), [torch.randn(3, 5, 2)],
         {"dim": 1, "keepdim": False}, backward=False)
    case("argmax_keepdim", "argmax", lambda x: torch.argmax(x, dim=-1, keepdim=True),
         [torch.randn(4, 6)], {"dim": -1, "keepdim": True}, backward=False)
    case("softmax_dim1", "softmax", lambda x: torch.softmax(x, dim=1), [rn(2, 5, 3)],
         {"dim": 1})
    case("softmax_last", "softmax", lambda x: torch.softmax(x, dim=-1), [rn(4, 6)], {"dim": -1})
    case("log_softmax_last", "log_softmax", lambda x: torch.log_softmax(x, dim=-1),
         [rn(4, 6)], {"dim": -1})
    case("log_softmax_dim0", "log_softmax", lambda x: torch.log_softmax(x, dim=0),
         [rn(5, 3)], {"dim": 0})


def movement_cases():
    case("reshape", "reshape", lambda x: x.reshape(4, -1), [rn(2, 3, 4)], {"shape": [4, -1]})
    case("reshape_noncontig", "transpose_reshape",
         lambda x: x.transpose(0, 1).reshape(12), [rn(3, 4)],
         {"dim0": 0, "dim1": 1, "shape": [12]})
    case("flatten", "flatten", lambda x: torch.flatten(x, 1), [rn(2, 3, 2, 2)],
         {"start_dim": 1, "end_dim": -1})
    case("permute", "permute", lambda x: x.permute(2, 0, 1), [rn(2, 3, 4)],
         {"dims": [2, 0, 1]})
    case("transpose", "transpose", lambda x: x.transpose(0, 2), [rn(2, 3, 4)],
         {"dim0": 0, "dim1": 2})
    case("narrow", "narrow", lambda x: x.narrow(1, 1, 2), [rn(2, 4, 3)],
         {"dim": 1, "start": 1, "length": 2})
    case("slice_step", "slice", lambda x: x[:, :, 1:4:2], [rn(2, 3, 5)],
         {"dim": 2, "start": 1, "end": 4, "step": 2})
    case("select", "select", lambda x: x.select(1, 2), [rn(2, 3, 4)], {"dim": 1, "index": 2})
    case("expand", "expand", lambda x: x.expand(2, 3, 4), [rn(3, 1)], {"shape": [2, 3, 4]})
    case("squeeze_unsqueeze", "squeeze_unsqueeze",
         lambda x: x.squeeze(1).unsqueeze(0), [rn(3, 1, 4)], {"squeeze": 1, "unsqueeze": 0})
    case("cat_dim1", "cat", lambda a, b, c: torch.cat([a, b, c], dim=1),
         [rn(2, 1, 3), rn(2, 4, 3), rn(2, 2, 3)], {"dim": 1})
    case("cat_dim0", "cat", lambda a, b: torch.cat([a, b], dim=0), [rn(1, 4), rn(3, 4)],
         {"dim": 0})


def matmul_cases():
    case("matmul_2d", "matmul", torch.matmul, [rn(3, 4), rn(4, 5)])
    case("matmul_batched_broadcast", "matmul", torch.matmul, [rn(2, 1, 3, 4), rn(3, 4, 5)])
    case("matmul_transposed", "matmul_tt", lambda a, b: torch.matmul(a.t(), b.t()),
         [rn(4, 3), rn(5, 4)])
    case("matmul_vec_vec", "matmul", torch.matmul, [rn(4), rn(4)])
    case("matmul_mat_vec", "matmul", torch.matmul, [rn(3, 4), rn(4)])
    case("matmul_vec_mat", "matmul", torch.matmul, [rn(4), rn(4, 5)])
    case("matmul_batched_vec", "matmul", torch.matmul, [rn(2, 3, 4), rn(4)])
    case("matmul_vec_batched", "matmul", torch.matmul, [rn(4), rn(2, 4, 5)])
    case("linear_bias", "linear", F.linear, [rn(3, 4), rn(5, 4), rn(5)])
    case("linear_batched_nobias", "linear", F.linear, [rn(2, 3, 4), rn(5, 4)])


def conv_cases():
    def conv(name, x, w, b, stride, padding, dilation):
        params = {"stride": stride, "padding": padding, "dilation": dilation}
        inputs = [x, w] + ([b] if b is not None else [])
        case(name, "conv2d",
             lambda *t: F.conv2d(t[0], t[1], t[2] if len(t) > 2 else None, stride, padding,
                                 dilation), inputs, params)

    conv("conv2d_basic", rn(2, 3, 6, 6), rn(4, 3, 3, 3), rn(4), [1, 1], [0, 0], [1, 1])
    conv("conv2d_stride2_pad1", rn(2, 3, 7, 7), rn(4, 3, 3, 3), rn(4), [2, 2], [1, 1], [1, 1])
    conv("conv2d_dilation2_nobias", rn(1, 2, 7, 7), rn(3, 2, 3, 3), None, [1, 1], [2, 2],
         [2, 2])
    conv("conv2d_asymmetric", rn(2, 2, 7, 5), rn(3, 2, 3, 2), rn(3), [2, 1], [1, 0], [1, 2])
    conv("conv2d_1x1", rn(2, 4, 3, 3), rn(5, 4, 1, 1), rn(5), [1, 1], [0, 0], [1, 1])


def pool_cases():
    def pool(name, kind, x, kernel, stride, padding):
        params = {"kernel": kernel, "stride": stride, "padding": padding}
        if kind == "max_pool2d":
            fn = lambda t: tuple(F.max_pool2d(t, kernel, stride, padding, return_indices=True))
        else:
            fn = lambda t: F.avg_pool2d(t, kernel, stride, padding)
        case(name, kind, fn, [x], params)

    pool("max_pool2d_k2", "max_pool2d", rn(2, 3, 6, 6), [2, 2], [2, 2], [0, 0])
    pool("max_pool2d_k3_s2_p1", "max_pool2d", rn(2, 2, 7, 7), [3, 3], [2, 2], [1, 1])
    pool("max_pool2d_asym_overlap", "max_pool2d", rn(1, 2, 5, 7), [2, 3], [1, 2], [0, 1])
    pool("avg_pool2d_k2", "avg_pool2d", rn(2, 3, 6, 6), [2, 2], [2, 2], [0, 0])
    pool("avg_pool2d_k3_s2_p1", "avg_pool2d", rn(2, 2, 7, 7), [3, 3], [2, 2], [1, 1])
    pool("avg_pool2d_asym", "avg_pool2d", rn(1, 2, 5, 7), [2, 3], [1, 2], [0, 1])


def norm_cases():
    def bn(name, x, c, training, momentum, eps):
        rm = torch.randn(c) * 0.5
        rv = torch.rand(c) + 0.5
        params = {"training": training, "momentum": momentum, "eps": eps}
        case(name, "batch_norm",
             lambda x, rm, rv, w, b: F.batch_norm(x, rm, rv, w, b, training, momentum, eps),
             [x, rm, rv, rn(c), rn(c)], params, after=(1, 2))

    bn("batch_norm_train_4d", rn(4, 3, 3, 3), 3, True, 0.1, 1e-5)
    bn("batch_norm_train_2d", rn(6, 4), 4, True, 0.2, 1e-3)
    bn("batch_norm_eval_4d", rn(2, 3, 2, 2), 3, False, 0.1, 1e-5)


def loss_cases():
    def target(n, c):
        return torch.randint(0, c, (n,))

    for red in ("mean", "sum", "none"):
        case(f"cross_entropy_{red}", "cross_entropy",
             lambda x, t, red=red: F.cross_entropy(x, t, reduction=red),
             [rn(5, 7), target(5, 7)], {"reduction": red, "label_smoothing": 0.0})
    for red in ("mean", "sum"):
        case(f"cross_entropy_smooth_{red}", "cross_entropy",
             lambda x, t, red=red: F.cross_entropy(x, t, reduction=red, label_smoothing=0.1),
             [rn(5, 7), target(5, 7)], {"reduction": red, "label_smoothing": 0.1})
    for red in ("mean", "sum"):
        case(f"nll_loss_{red}", "nll_loss", lambda x, t, red=red: F.nll_loss(x, t, reduction=red),
             [rn(5, 7), target(5, 7)], {"reduction": red})
    for red in ("mean", "sum", "none"):
        case(f"mse_loss_{red}", "mse_loss", lambda x, t, red=red: F.mse_loss(x, t, reduction=red),
             [rn(3, 4), rn(3, 4)], {"reduction": red})


def index_cases():
    case("gather_dim1", "gather", lambda x, i: torch.gather(x, 1, i),
         [rn(3, 5), torch.tensor([[0, 4], [2, 2], [1, 3]])], {"dim": 1})
    case("gather_dim0", "gather", lambda x, i: torch.gather(x, 0, i),
         [rn(3, 4), torch.tensor([[2, 0, 1, 2], [0, 0, 2, 1]])], {"dim": 0})
    # Repeated indices: their gradients must accumulate.
    case("index_select_dim0", "index_select", lambda x, i: torch.index_select(x, 0, i),
         [rn(4, 3), torch.tensor([3, 0, 3, 1])], {"dim": 0})
    case("index_select_dim1", "index_select", lambda x, i: torch.index_select(x, 1, i),
         [rn(2, 5, 2), torch.tensor([4, 1, 1])], {"dim": 1})


def cnn_case():
    """The FMNIST-CNN (train_fmnist.py) shrunk to 4/8 channels and a 16-unit hidden layer."""
    model = nn.Sequential(
        nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(4, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(8 * 7 * 7, 16), nn.ReLU(),
        nn.Linear(16, 10),
    )
    names = {0: "conv1", 1: "bn1", 4: "conv2", 5: "bn2", 9: "fc1", 11: "fc2"}
    # Default BN affine parameters are 1 and 0; perturb them so their gradients are tested
    # through a non-trivial scale and shift.
    with torch.no_grad():
        for i in (1, 5):
            model[i].weight.add_(0.1 * torch.randn_like(model[i].weight))
            model[i].bias.add_(0.1 * torch.randn_like(model[i].bias))
    x = torch.randn(8, 1, 28, 28)
    y = torch.randint(0, 10, (8,))
    params = [(f"{names[i]}.{p}", getattr(model[i], p)) for i in sorted(names)
              for p in ("weight", "bias")]
    initial = [(n, tensor_json(p)) for n, p in params]
    model.train()
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    cnn = {
        "input": tensor_json(x),
        "labels": tensor_json(y),
        "bn_momentum": 0.1,
        "bn_eps": 1e-5,
        "parameters": [dict(name=n, **t) for n, t in initial],
        "loss": float(str(np.float32(loss.item()))),
        "gradients": [dict(name=n, **tensor_json(p.grad)) for n, p in params],
        "running_stats": [
            dict(name=f"{names[i]}.{s}", **tensor_json(getattr(model[i], s)))
            for i in (1, 5) for s in ("running_mean", "running_var")],
    }
    return cnn


def main():
    torch.manual_seed(1234)
    elementwise_cases()
    reduce_cases()
    movement_cases()
    matmul_cases()
    conv_cases()
    pool_cases()
    norm_cases()
    loss_cases()
    index_cases()
    names = [c["name"] for c in CASES]
    assert len(names) == len(set(names)), "duplicate case names"
    cnn = cnn_case()
    # One case per line keeps diffs of a regenerated file readable.
    dump = lambda obj: json.dumps(obj, separators=(",", ":"))
    with open(OUT_PATH, "w") as f:
        f.write('{"generator":"tests/golden/make_golden.py","torch":' + dump(torch.__version__))
        f.write(',\n"cases":[\n')
        f.write(",\n".join(dump(c) for c in CASES))
        f.write('\n],\n"cnn":' + dump(cnn) + "\n}\n")
    print(f"wrote {len(CASES)} op cases and the CNN case to {OUT_PATH} "
          f"({os.path.getsize(OUT_PATH)} bytes)")


if __name__ == "__main__":
    main()

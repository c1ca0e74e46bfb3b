"""PyTorch's training step on a GPU in three forms, measured as bench/train_bench measures
ringlet's on a device: a synthetic batch, a warm-up, then blocks of --block steps between two
host synchronizations, the step's time the block's over its steps, the median over the blocks.

  eager:   f32, NCHW, torch.backends.cudnn.benchmark off, no autocast (PyTorch's plainest form)
  tuned:   cudnn.benchmark on, channels-last model and input, bf16 autocast
  graphed: the eager form's whole step captured once with torch.cuda.graph and replayed

Models: fmnist_cnn (train_fmnist.py's, 1x28x28) and resnet20 (torchvision's BasicBlock ResNet
with the CIFAR stem, 16/32/64 channels, 3 blocks a stage, 3x32x32: ringlet's nn::resnet20).
SGD lr 0.05, momentum 0.9, weight decay 5e-4, cross-entropy, as train_bench. One JSON line per
run: {"framework": "torch", "model", "batch", "form", "step_ms", "device", "torch"}.

usage: python3 step_forms_gpu.py [--model fmnist_cnn|resnet20] [--batch 64]
                                 [--form eager|tuned|graphed] [--steps 100] [--block 20]
"""
import argparse
import json
import os
import statistics
import sys
import time

import torch
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from train_fmnist import make_model as make_fmnist  # noqa: E402  the CPU baseline's model


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                            nn.BatchNorm2d(cout))

    def forward(self, x):
        out = torch.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return torch.relu(out + (x if self.downsample is None else self.downsample(x)))


def make_resnet20(classes=10):
    layers, cin = [], 16
    for stage, cout in enumerate((16, 32, 64)):
        blocks = []
        for b in range(3):
            blocks.append(BasicBlock(cin, cout, 2 if stage > 0 and b == 0 else 1))
            cin = cout
        layers.append(nn.Sequential(*blocks))
    return nn.Sequential(nn.Conv2d(3, 16, 3, 1, 1, bias=False), nn.BatchNorm2d(16), nn.ReLU(),
                         *layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, classes))


def setup(model_name, batch, form, device):
    torch.manual_seed(0)
    torch.backends.cudnn.benchmark = form == "tuned"
    fmnist = model_name == "fmnist_cnn"
    model = (make_fmnist() if fmnist else make_resnet20()).to(device)
    x = torch.randn(batch, 1 if fmnist else 3, 28 if fmnist else 32, 28 if fmnist else 32,
                    device=device)
    y = torch.randint(0, 10, (batch,), device=device)
    if form == "tuned":
        model = model.to(memory_format=torch.channels_last)
        x = x.contiguous(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=5e-4,
                          foreach=True)
    return model, opt, nn.CrossEntropyLoss(), x, y


def make_step(model, opt, loss_fn, x, y, form):
    def step():
        opt.zero_grad(set_to_none=True)
        if form == "tuned":
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = loss_fn(model(x), y)
        else:
            loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        return loss
    if form != "graphed":
        return step
    # torch.cuda.graphs' recipe: warm up on a side stream, capture, replay.
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            step()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    opt.zero_grad(set_to_none=True)
    with torch.cuda.graph(graph):
        step()
    return graph.replay


def measure(step, steps, block, device):
    for _ in range(10):
        step()
    torch.cuda.synchronize(device)
    times = []
    for _ in range(max(1, steps // block)):
        t0 = time.perf_counter()
        for _ in range(block):
            step()
        torch.cuda.synchronize(device)
        times.append((time.perf_counter() - t0) * 1e3 / block)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="fmnist_cnn", choices=["fmnist_cnn", "resnet20"])
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--form", default="eager", choices=["eager", "tuned", "graphed"])
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--block", type=int, default=20)
    a = ap.parse_args()
    if not torch.cuda.is_available():
        print("skipped: this PyTorch sees no CUDA GPU")
        return 77
    device = torch.device("cuda", 0)
    model, opt, loss_fn, x, y = setup(a.model, a.batch, a.form, device)
    ms = measure(make_step(model, opt, loss_fn, x, y, a.form), a.steps, a.block, device)
    print(json.dumps({"framework": "torch", "model": a.model, "batch": a.batch, "form": a.form,
                      "step_ms": ms, "device": torch.cuda.get_device_name(device),
                      "torch": torch.__version__}))
    return 0


if __name__ == "__main__":
    sys.exit(main())

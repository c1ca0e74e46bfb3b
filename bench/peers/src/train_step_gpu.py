"""PyTorch's time for one training step of the Fashion-MNIST CNN on a GPU, measured as
bench/train_bench measures ringlet's: synthetic batch of 64 per rank, 10 warm-up
forward+backward runs, then the median of --steps forward+backward+SGD steps, each ended by
torch.cuda.synchronize(). With --nproc N, N processes share the GPUs (rank r on device
r % count), wrapped in DistributedDataParallel (gradient_as_bucket_view=True) over --backend:
gloo works with several ranks on one GPU; nccl refuses them (it needs a GPU per rank), which the
script reports instead of a figure. Prints one JSON line per run, as train_bench does.

usage: python3 train_step_gpu.py [--nproc 1] [--backend gloo|nccl] [--steps 50]
"""
import argparse
import json
import os
import socket
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from train_fmnist import BATCH, make_model  # noqa: E402  the same model as the CPU baseline


def measure(rank, world, device, steps):
    torch.manual_seed(0)
    model = make_model().to(device)
    if world > 1:
        model = nn.parallel.DistributedDataParallel(model, device_ids=[device.index],
                                                    gradient_as_bucket_view=True)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=5e-4)
    loss_fn = nn.CrossEntropyLoss()
    x = torch.randn(BATCH, 1, 28, 28, device=device)
    y = torch.randint(0, 10, (BATCH,), device=device)

    def step():
        opt.zero_grad(set_to_none=True)
        loss_fn(model(x), y).backward()
        opt.step()
        torch.cuda.synchronize(device)

    for _ in range(10):
        step()
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        step()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def worker(rank, world, port, backend, steps, out):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    device = torch.device("cuda", rank % torch.cuda.device_count())
    torch.cuda.set_device(device)
    try:
        dist.init_process_group(backend, rank=rank, world_size=world)
        ms = torch.tensor([measure(rank, world, device, steps)], device=device)
        dist.all_reduce(ms, op=dist.ReduceOp.MAX)  # the slowest rank sets the pace
        if rank == 0:
            out.put(ms.item())
        dist.destroy_process_group()
    except Exception as e:  # noqa: BLE001 - reported, not hidden
        if rank == 0:
            out.put(f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nproc", type=int, default=1)
    ap.add_argument("--backend", default="gloo", choices=["gloo", "nccl"])
    ap.add_argument("--steps", type=int, default=50)
    a = ap.parse_args()
    if not torch.cuda.is_available():
        print("skipped: PyTorch sees no CUDA device")
        return 0
    gpus = torch.cuda.device_count()
    name = torch.cuda.get_device_name(0)
    if a.nproc == 1:
        result = measure(0, 1, torch.device("cuda", 0), a.steps)
    else:
        ctx = mp.get_context("spawn")
        out = ctx.Queue()
        port = free_port()
        procs = [ctx.Process(target=worker, args=(r, a.nproc, port, a.backend, a.steps, out))
                 for r in range(a.nproc)]
        for p in procs:
            p.start()
        try:
            result = out.get(timeout=300)
        except Exception:  # noqa: BLE001
            result = "no result within 300 s"
        for p in procs:
            p.join(30)
            if p.is_alive():
                p.kill()
    line = {"bench": "torch_train_step", "torch": torch.__version__, "gpu": name, "gpus": gpus,
            "nproc": a.nproc, "backend": a.backend if a.nproc > 1 else "none", "batch": BATCH}
    if isinstance(result, float):
        line.update(step_ms=result, images_per_s=a.nproc * BATCH / result * 1e3)
        print(f"# torch {torch.__version__} on {name}: {a.nproc} rank(s), backend "
              f"{line['backend']}: step {result:.2f} ms ({line['images_per_s']:.0f} images/s)")
    else:
        line.update(error=result)
        print(f"# torch {torch.__version__} on {name}: {a.nproc} ranks on {gpus} GPU(s) over "
              f"{a.backend}: not measured: {result}")
    print(json.dumps(line), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

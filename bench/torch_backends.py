#!/usr/bin/env python3
"""torch.distributed backends side by side: ringlet (ringlet_torch) against gloo in one run.

usage: PYTHONPATH=build/python /usr/bin/python3 bench/torch_backends.py
           [--ranks 2,4] [--sizes 4K,...,64M] [--rounds 5] [--min-time 0.2]
           [--ddp fmnist,resnet18] [--ddp-steps 20] [--json F]

Each job starts its ranks as processes (env:// on loopback, one CPU thread each); every rank
joins both backends (gloo as the default group, ringlet through new_group), so the two run
interleaved, round by round, in the same processes. Collectives: all_reduce (sum), all_gather
and reduce_scatter of float32, nccl-tests' columns (size, count, type, redop, time, algbw,
busbw), the time of an op being the slowest rank's, the median of the rounds; every result is
checked. gloo in torch 1.13 has no reduce_scatter: its column says so. DDP: a training step of an
fmnist-sized CNN (batch 64, 1x28x28) and a ResNet-18 (batch 16, 3x32x32) on 2 ranks, images per
second over each backend (median of rounds of --ddp-steps steps). The last lines are the ratios.
"""
import argparse
import datetime
import json
import os
import socket
import statistics
import subprocess
import sys
import time

SIZES = "4K,16K,64K,256K,1M,4M,16M,64M"


def parse_size(text):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(text[:-1]) * units[text[-1]] if text[-1] in units else int(text)


def human(b):
    return f"{b >> 20}M" if b >= 1 << 20 else f"{b >> 10}K" if b >= 1024 else f"{b}"


# ---------------------------------------------------------------------------------------------
# One rank.

def rank_main(args):
    import torch
    import torch.distributed as dist
    import ringlet_torch  # noqa: F401

    torch.set_num_threads(1)
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=300))
    groups = {"gloo": dist.group.WORLD, "ringlet": dist.new_group(backend="ringlet")}
    rank, world = dist.get_rank(), dist.get_world_size()
    rows = []
    if args.sizes:
        rows += collective_rounds(args, groups, rank, world, torch, dist)
    if args.ddp:
        rows += ddp_rounds(args, groups, rank, world, torch, dist)
    if rank == 0:
        print("RESULT " + json.dumps(rows), flush=True)
    dist.barrier()
    dist.destroy_process_group()


def slowest(dist, torch, seconds):
    t = torch.tensor([seconds], dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return t.item()


def one_op(coll, group, bufs, dist):
    if coll == "all_reduce":
        dist.all_reduce(bufs["x"], group=group)
    elif coll == "all_gather":
        dist.all_gather(bufs["outs"], bufs["x"], group=group)
    else:
        dist.reduce_scatter(bufs["out"], bufs["ins"], group=group)


def make_bufs(coll, nbytes, world, rank, torch):
    count = nbytes // 4
    if coll == "all_reduce":
        return {"x": torch.full((count,), float(rank + 1))}
    block = max(1, count // world)
    if coll == "all_gather":
        return {"x": torch.full((block,), float(rank + 1)),
                "outs": [torch.zeros(block) for _ in range(world)]}
    return {"ins": [torch.full((block,), float(rank + 1)) for _ in range(world)],
            "out": torch.zeros(block)}


def check(coll, bufs, world):
    total = world * (world + 1) / 2
    if coll == "all_reduce":
        return bool((bufs["x"] == total).all())
    if coll == "all_gather":
        return all(bool((o == r + 1).all()) for r, o in enumerate(bufs["outs"]))
    return bool((bufs["out"] == total).all())


def time_op(coll, group, nbytes, world, rank, args, torch, dist):
    bufs = make_bufs(coll, nbytes, world, rank, torch)
    one_op(coll, group, bufs, dist)
    ok = check(coll, bufs, world)
    iters = 1
    while True:  # calibrate: at least min_time per round
        dist.barrier()
        t0 = time.perf_counter()
        for _ in range(iters):
            one_op(coll, group, bufs, dist)
        took = slowest(dist, torch, time.perf_counter() - t0)
        if took >= args.min_time or iters >= 100000:
            return took / iters, ok
        iters = int(iters * max(2.0, 1.2 * args.min_time / max(took, 1e-6)))


def collective_rounds(args, groups, rank, world, torch, dist):
    times, oks = {}, {}
    for _ in range(args.rounds):
        for coll in ("all_reduce", "all_gather", "reduce_scatter"):
            for nbytes in args.sizes:
                for backend in ("ringlet", "gloo"):
                    if backend == "gloo" and coll == "reduce_scatter":
                        continue
                    t, ok = time_op(coll, groups[backend], nbytes, world, rank, args, torch, dist)
                    key = (coll, nbytes, backend)
                    times.setdefault(key, []).append(t)
                    oks[key] = oks.get(key, True) and ok
    return [{"kind": "collective", "coll": c, "bytes": b, "backend": be, "ranks": world,
             "time_s": statistics.median(ts), "rounds": ts, "ok": oks[(c, b, be)]}
            for (c, b, be), ts in times.items()]


def fmnist_cnn(torch):
    nn = torch.nn
    return nn.Sequential(nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Flatten(), nn.Linear(64 * 7 * 7, 128), nn.ReLU(), nn.Linear(128, 10))


def resnet18(torch, classes=10):
    """torchvision's ResNet-18 with the CIFAR stem, from the BasicBlock of the peers' GPU step."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "peers", "src"))
    from step_forms_gpu import BasicBlock

    nn = torch.nn
    layers = [nn.Conv2d(3, 64, 3, 1, 1, bias=False), nn.BatchNorm2d(64), nn.ReLU()]
    cin = 64
    for cout, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
        layers += [BasicBlock(cin, cout, stride), BasicBlock(cout, cout, 1)]
        cin = cout
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(512, classes)]
    return nn.Sequential(*layers)


def ddp_rounds(args, groups, rank, world, torch, dist):
    shapes = {"fmnist": (fmnist_cnn, 64, (1, 28, 28)), "resnet18": (resnet18, 16, (3, 32, 32))}
    rows = []
    for name in args.ddp:
        make, batch, shape = shapes[name]
        ddps = {}
        for backend in ("ringlet", "gloo"):
            torch.manual_seed(0)
            model = make(torch)
            ddps[backend] = (torch.nn.parallel.DistributedDataParallel(
                model, process_group=groups[backend]), None)
            ddps[backend] = (ddps[backend][0],
                             torch.optim.SGD(ddps[backend][0].parameters(), lr=0.01, momentum=0.9))
        gen = torch.Generator().manual_seed(rank)
        x = torch.randn(batch, *shape, generator=gen)
        y = torch.randint(0, 10, (batch,), generator=gen)
        rates = {"ringlet": [], "gloo": []}
        for r in range(args.rounds + 1):  # round 0 warms up
            for backend in ("ringlet", "gloo"):
                model, opt = ddps[backend]
                dist.barrier()
                t0 = time.perf_counter()
                for _ in range(args.ddp_steps):
                    opt.zero_grad()
                    torch.nn.functional.cross_entropy(model(x), y).backward()
                    opt.step()
                took = slowest(dist, torch, time.perf_counter() - t0)
                if r > 0:
                    rates[backend].append(world * batch * args.ddp_steps / took)
        for backend, rs in rates.items():
            rows.append({"kind": "ddp", "model": name, "backend": backend, "ranks": world,
                         "batch": batch, "images_per_s": statistics.median(rs), "rounds": rs})
    return rows


# ---------------------------------------------------------------------------------------------
# The driver.

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_job(world, argv):
    port = free_port()
    procs = []
    for rank in range(world):
        env = dict(os.environ, RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank),
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), GLOO_SOCKET_IFNAME="lo",
                   OMP_NUM_THREADS="1")
        procs.append(subprocess.Popen([sys.executable, __file__, "--rank-main"] + argv, env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    outs = [p.communicate(timeout=3600)[0] for p in procs]
    for p, out in zip(procs, outs):
        if p.returncode != 0:
            raise SystemExit(f"a rank exited {p.returncode}:\n{out[-4000:]}")
    [line] = [line for line in outs[0].splitlines() if line.startswith("RESULT ")]
    return json.loads(line[len("RESULT "):])


def print_tables(rows):
    colls = [r for r in rows if r["kind"] == "collective"]
    by = {(r["coll"], r["ranks"], r["bytes"], r["backend"]): r for r in colls}
    for coll in ("all_reduce", "all_gather", "reduce_scatter"):
        for world in sorted({r["ranks"] for r in colls}):
            sizes = sorted({r["bytes"] for r in colls if r["coll"] == coll and r["ranks"] == world})
            if not sizes:
                continue
            factor = 2 * (world - 1) / world if coll == "all_reduce" else (world - 1) / world
            print(f"\n# {coll}, {world} ranks, float32 sum; time = median of rounds, slowest rank")
            print(f"{'size':>6} {'count':>10} {'type':>5} {'redop':>5} | {'ringlet_us':>10} "
                  f"{'algbw':>7} {'busbw':>7} | {'gloo_us':>10} {'algbw':>7} {'busbw':>7} | "
                  f"{'ratio':>6} check")
            for b in sizes:
                mine, peer = by[(coll, world, b, "ringlet")], by.get((coll, world, b, "gloo"))
                line = (f"{human(b):>6} {b // 4:>10} {'float':>5} {'sum':>5} | "
                        f"{mine['time_s'] * 1e6:>10.1f} {b / mine['time_s'] / 1e9:>7.3f} "
                        f"{factor * b / mine['time_s'] / 1e9:>7.3f} | ")
                if peer:
                    line += (f"{peer['time_s'] * 1e6:>10.1f} {b / peer['time_s'] / 1e9:>7.3f} "
                             f"{factor * b / peer['time_s'] / 1e9:>7.3f} | "
                             f"{peer['time_s'] / mine['time_s']:>5.2f}x")
                    ok = mine["ok"] and peer["ok"]
                else:
                    line += f"{'(gloo has none)':>26} | {'-':>6}"
                    ok = mine["ok"]
                print(line + (" OK" if ok else " WRONG"))
    ddp = [r for r in rows if r["kind"] == "ddp"]
    if ddp:
        print("\n# PyTorch DDP training step, images/s (median of rounds), 2 ranks x 1 thread")
        for model in sorted({r["model"] for r in ddp}):
            rate = {r["backend"]: r["images_per_s"] for r in ddp if r["model"] == model}
            print(f"{model:>10}: ringlet {rate['ringlet']:8.1f}  gloo {rate['gloo']:8.1f}  "
                  f"ratio {rate['ringlet'] / rate['gloo']:.3f}x")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rank-main", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--ranks", default="2,4")
    p.add_argument("--sizes", default=SIZES)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--min-time", type=float, default=0.2)
    p.add_argument("--ddp", default="fmnist,resnet18")
    p.add_argument("--ddp-steps", type=int, default=10)
    p.add_argument("--json")
    args = p.parse_args()
    if args.rank_main:
        args.sizes = [parse_size(s) for s in args.sizes.split(",") if s]
        args.ddp = [m for m in args.ddp.split(",") if m]
        return rank_main(args)
    import torch
    print(f"# torch {torch.__version__}, ringlet_torch vs gloo, {datetime.date.today()}, "
          f"{os.cpu_count()} CPUs", flush=True)
    rows = []
    passed = ["--sizes", args.sizes, "--rounds", str(args.rounds), "--min-time", str(args.min_time),
              "--ddp-steps", str(args.ddp_steps)]
    for world in [int(w) for w in args.ranks.split(",")]:
        rows += run_job(world, passed + ["--ddp", args.ddp if world == 2 else ""])
    print_tables(rows)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0 if all(r.get("ok", True) for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())

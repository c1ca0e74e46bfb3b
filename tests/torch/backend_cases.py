"""One rank of a ringlet_torch test job: `python3 backend_cases.py CASE [ARG]`, started with
torch's env:// variables (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT) by backend_test.py.
Each case checks its results against answers every rank can compute (each rank's input is a
function of its rank), raises AssertionError on the first wrong one, and prints
"CASE ok rank R" at the end.

Cases: ops (every op x dtype x reduce op x count, contiguous or not), groups (new_group
sub-communicators), async (Work and futures), mismatch (ranks issue different counts: both raise
ringlet's fingerprint error), ddp BACKEND OUT (10 DDP steps of a small CNN,
parameters saved to OUT), dead KIND (rank 1 is SIGKILLed or SIGSTOPped before an all_reduce;
rank 0 must raise RuntimeError naming it within the group's timeout), init METHOD (file:// or
tcp:// rendezvous instead of env://).
"""
import datetime
import os
import signal
import sys
import time

import torch
import torch.distributed as dist

import ringlet_torch  # noqa: F401  registers "ringlet"

COUNTS = (1, 7, 1000003)
DTYPES = (torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int8, torch.uint8,
          torch.int32, torch.int64, torch.bool)
R = dist.ReduceOp


def init(backend="ringlet", timeout=60):
    dist.init_process_group(backend, timeout=datetime.timedelta(seconds=timeout))
    return dist.get_rank(), dist.get_world_size()


def data(rank, count, dtype, op=None):
    """Rank `rank`'s input: small integers, so every result is exact in every dtype."""
    i = torch.arange(count, dtype=torch.int64)
    if dtype == torch.bool:
        return (i + rank) % 3 == 0
    if op is not None and op == R.PRODUCT:
        v = torch.where((i + rank) % 3 == 0, 2, 1)
    else:
        v = (i * 7 + rank * 3) % 29
    return v.to(dtype)


def combine(op, a, b):
    if a.dtype == torch.bool:
        if op in (R.SUM, R.MAX, R.BOR):
            return a | b
        return a & b  # PRODUCT, MIN, BAND
    return {R.SUM: lambda: a + b, R.AVG: lambda: a + b, R.PRODUCT: lambda: a * b,
            R.MIN: lambda: torch.minimum(a, b), R.MAX: lambda: torch.maximum(a, b),
            R.BAND: lambda: a & b, R.BOR: lambda: a | b, R.BXOR: lambda: a ^ b}[op]()


def reduced(op, world, count, dtype):
    acc = data(0, count, dtype, op)
    for r in range(1, world):
        acc = combine(op, acc, data(r, count, dtype, op))
    if op == R.AVG:
        acc = (acc.float() / world).to(dtype) if dtype != torch.float64 else acc / world
    return acc


def ops_for(dtype):
    if dtype == torch.bool:
        return (R.SUM, R.PRODUCT, R.MIN, R.MAX, R.BAND, R.BOR)
    if dtype.is_floating_point:
        return (R.SUM, R.AVG, R.PRODUCT, R.MIN, R.MAX)
    return (R.SUM, R.PRODUCT, R.MIN, R.MAX, R.BAND, R.BOR, R.BXOR)


def same(got, want, what):
    assert got.dtype == want.dtype and torch.equal(got, want), \
        f"{what}: got {got.flatten()[:8]} ({got.dtype}), want {want.flatten()[:8]} ({want.dtype})"


def strided(t):
    """The same values in a non-contiguous tensor (every other element of a larger one)."""
    wide = torch.zeros(t.numel() * 2, dtype=t.dtype)
    view = wide[::2]
    view.copy_(t)
    assert not view.is_contiguous() or t.numel() <= 1
    return view


def case_reductions(rank, world):
    for dtype in DTYPES:
        for op in ops_for(dtype):
            for count in COUNTS:
                what = f"all_reduce {op} {dtype} x{count}"
                t = data(rank, count, dtype, op)
                dist.all_reduce(t, op=op)
                same(t, reduced(op, world, count, dtype), what)
        s = strided(data(rank, 1001, dtype, R.SUM))
        dist.all_reduce(s, op=R.MAX)
        same(s, reduced(R.MAX, world, 1001, dtype), f"all_reduce MAX {dtype} strided")
        for root in range(world):
            t = data(rank, 1000, dtype)
            dist.reduce(t, root, op=R.MAX)
            if rank == root:
                same(t, reduced(R.MAX, world, 1000, dtype), f"reduce {dtype} root {root}")
    tensors = [data(rank, n, torch.float32) for n in (3, 1000, 1)]
    dist.all_reduce_coalesced(tensors)
    for n, t in zip((3, 1000, 1), tensors):
        same(t, reduced(R.SUM, world, n, torch.float32), f"all_reduce_coalesced x{n}")


def moved(rank, count, dtype):
    """Data for ops that reduce nothing: any dtype (complex too), as bytes."""
    if dtype == torch.complex64:
        return torch.complex(data(rank, count, torch.float32), data(rank + 1, count, torch.float32))
    return data(rank, count, dtype)


def case_moves(rank, world):
    for dtype in (torch.float32, torch.bfloat16, torch.int8, torch.bool, torch.complex64):
        for count in COUNTS:
            theirs = [moved(r, count, dtype) for r in range(world)]
            mine, base = theirs[rank], theirs[0]
            for root in range(world):
                b = theirs[root].clone() if rank == root else torch.zeros_like(base)
                dist.broadcast(b, root)
                same(b, theirs[root], f"broadcast {dtype} x{count} root {root}")
            out = [torch.zeros_like(base) for _ in range(world)]
            dist.all_gather(out, mine)
            for r in range(world):
                same(out[r], theirs[r], f"all_gather {dtype} x{count} from {r}")
            flat = torch.zeros(world * count, dtype=dtype)
            dist.all_gather_into_tensor(flat, mine)
            same(flat, torch.cat(theirs), f"all_gather_into_tensor {dtype} x{count}")
            root = world - 1
            got = [torch.zeros_like(base) for _ in range(world)] if rank == root else None
            dist.gather(mine, got, dst=root)
            if rank == root:
                for r in range(world):
                    same(got[r], theirs[r], f"gather {dtype} x{count} from {r}")
            piece = torch.zeros_like(base)
            dist.scatter(piece, [t.clone() for t in theirs] if rank == 0 else None, src=0)
            same(piece, theirs[rank], f"scatter {dtype} x{count}")
    s = strided(data(rank, 999, torch.float64))
    dist.broadcast(s, 0)
    same(s, data(0, 999, torch.float64), "broadcast strided")


def case_scatters(rank, world):
    for dtype in (torch.float32, torch.float16, torch.int64, torch.int8):
        for count in COUNTS:
            # Block p of rank r is data(r * world + p): rank p reduces data(r * world + p).
            blocks = [data(rank * world + p, count, dtype) for p in range(world)]
            want = None
            for r in range(world):
                x = data(r * world + rank, count, dtype)
                want = x if want is None else combine(R.SUM, want, x)
            out = torch.zeros(count, dtype=dtype)
            dist.reduce_scatter(out, [b.clone() for b in blocks], op=R.SUM)
            same(out, want, f"reduce_scatter {dtype} x{count}")
            out2 = torch.zeros(count, dtype=dtype)
            dist.reduce_scatter_tensor(out2, torch.cat(blocks), op=R.SUM)
            same(out2, want, f"reduce_scatter_tensor {dtype} x{count}")
            # all_to_all: block p of rank r is data(r * world + p)
            outs = [torch.zeros(count, dtype=dtype) for _ in range(world)]
            dist.all_to_all(outs, [b.clone() for b in blocks])
            for p in range(world):
                same(outs[p], data(p * world + rank, count, dtype), f"all_to_all {dtype} x{count}")
            single = torch.zeros(world * count, dtype=dtype)
            dist.all_to_all_single(single, torch.cat(blocks))
            same(single, torch.cat([data(p * world + rank, count, dtype) for p in range(world)]),
                 f"all_to_all_single {dtype} x{count}")
    # Split sizes: rank r sends r + p + 1 rows of 3 to rank p, valued 100 r + p.
    in_splits = [rank + p + 1 for p in range(world)]
    out_splits = [p + rank + 1 for p in range(world)]
    x = torch.cat([torch.full((n, 3), 100 * rank + p, dtype=torch.int32)
                   for p, n in enumerate(in_splits)])
    y = torch.zeros(sum(out_splits), 3, dtype=torch.int32)
    dist.all_to_all_single(y, x, out_splits, in_splits)
    want = torch.cat([torch.full((n, 3), 100 * p + rank, dtype=torch.int32)
                      for p, n in enumerate(out_splits)])
    same(y, want, "all_to_all_single with split sizes")


def case_p2p(rank, world):
    nxt, prv = (rank + 1) % world, (rank - 1) % world
    for tag, count in ((0, 1), (5, 7), (9, 1000003)):
        out = data(rank, count, torch.float32)
        got = torch.zeros(count)
        req = dist.irecv(got, prv, tag=tag)
        dist.send(out, nxt, tag=tag)
        req.wait()
        same(got, data(prv, count, torch.float32), f"send/recv tag {tag} x{count}")
    dist.barrier()


def case_ops(rank, world):
    case_reductions(rank, world)
    case_moves(rank, world)
    case_scatters(rank, world)
    case_p2p(rank, world)


def case_groups(rank, world):
    assert world == 3
    ends = dist.new_group([0, 2])
    middle = dist.new_group([1])
    t = data(rank, 1000, torch.float32)
    if rank in (0, 2):
        dist.all_reduce(t, group=ends)
        same(t, data(0, 1000, torch.float32) + data(2, 1000, torch.float32), "all_reduce in [0, 2]")
        b = torch.full((5,), float(rank))
        dist.broadcast(b, 2, group=ends)  # global rank 2 is the group's root
        same(b, torch.full((5,), 2.0), "broadcast in [0, 2] from 2")
        out = [torch.zeros(5) for _ in range(2)]
        dist.all_gather(out, torch.full((5,), float(rank)), group=ends)
        same(torch.stack(out), torch.stack([torch.zeros(5), torch.full((5,), 2.0)]), "all_gather in [0, 2]")
    else:
        dist.all_reduce(t, group=middle)
        same(t, data(1, 1000, torch.float32), "all_reduce in [1]")
    u = data(rank, 10, torch.int64)
    dist.all_reduce(u)
    same(u, reduced(R.SUM, 3, 10, torch.int64), "all_reduce on the default group after")
    dist.barrier()


def case_async(rank, world):
    big = [data(rank, 1 << 20, torch.float32) for _ in range(4)]
    works = [dist.all_reduce(t, async_op=True) for t in big]
    small = data(rank, 16, torch.float32)
    chained = dist.all_reduce(small, async_op=True).get_future().then(
        lambda fut: fut.value()[0] * 2)
    for w in works:
        w.wait()
        assert w.is_completed()
    for t in big:
        same(t, reduced(R.SUM, world, 1 << 20, torch.float32), "async all_reduce")
    same(chained.wait(), reduced(R.SUM, world, 16, torch.float32) * 2, "future.then")
    w = dist.all_gather_into_tensor(torch.zeros(world * 4), torch.ones(4), async_op=True)
    fut = w.get_future()
    fut.wait()
    assert w.is_completed() and w.is_success()
    dist.barrier()


def case_ddp(rank, world, backend, out):
    init(backend)
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(1, 8, 3), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(8, 16, 3), torch.nn.ReLU(), torch.nn.Flatten(),
        torch.nn.Linear(16 * 11 * 11, 10))
    ddp = torch.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=0.01)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
    gen = torch.Generator().manual_seed(1 + rank)
    for _ in range(10):
        x = torch.randn(16, 1, 28, 28, generator=gen)
        y = torch.randint(0, 10, (16,), generator=gen)
        opt.zero_grad()
        torch.nn.functional.cross_entropy(ddp(x), y).backward()
        opt.step()
    if rank == 0:
        torch.save({k: v.clone() for k, v in model.state_dict().items()}, out)
    dist.barrier()


def case_dead(rank, world, kind):
    t = torch.ones(1 << 16)
    dist.all_reduce(t)  # everyone is connected
    if rank == 1:
        os.kill(os.getpid(), signal.SIGKILL if kind == "kill" else signal.SIGSTOP)
        time.sleep(60)
    start = time.monotonic()
    try:
        dist.all_reduce(t)
        dist.all_reduce(t)
    except RuntimeError as e:
        print(f"raised after {time.monotonic() - start:.1f} s: {e}", flush=True)
        return
    raise AssertionError("the all_reduce with a dead or stopped peer returned")


def case_mismatch(rank, world):
    """Rank 0 all-reduces 1000 floats, rank 1 999: both raise the fingerprint error."""
    t = torch.ones(1000 - rank)
    try:
        dist.all_reduce(t)
    except RuntimeError as e:
        assert "fingerprint mismatch" in str(e), str(e)
        print(f"raised: {e}", flush=True)
        return
    raise AssertionError("an all_reduce of another count than the peer's returned")


def case_init(method):
    """init_process_group("ringlet", init_method=METHOD, rank, world_size): file:// and tcp://."""
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dist.init_process_group("ringlet", init_method=method, rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=60))
    t = data(rank, 1000, torch.float32)
    dist.all_reduce(t)
    same(t, reduced(R.SUM, world, 1000, torch.float32), f"all_reduce after {method}")


def main():
    case = sys.argv[1]
    if case == "init":
        case_init(sys.argv[2])
    elif case == "ddp":
        case_ddp(int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), sys.argv[2], sys.argv[3])
    elif case == "dead":
        rank, world = init(timeout=int(sys.argv[3]))
        case_dead(rank, world, sys.argv[2])
    elif case == "algo":  # every op again under RINGLET_ALGO, with counts up to 10007
        global COUNTS
        COUNTS = (1, 7, 10007)
        rank, world = init()
        case_ops(rank, world)
    else:
        rank, world = init()
        {"ops": case_ops, "groups": case_groups, "async": case_async,
         "mismatch": case_mismatch}[case](rank, world)
    print(f"{case} ok rank {dist.get_rank()}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

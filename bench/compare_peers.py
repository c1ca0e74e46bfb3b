"""Aggregates the logs of bench/compare_peers.sh: medians over rounds of time per op and busbw
per (implementation, np, size), one table per world size, and ratios ours/peer. Ours are the
in-place columns of all_reduce_perf's JSON lines; the peers' rows are the
"peer algo np size unit iters time_us algbw busbw check" lines of bench/peers.
tcp is compared with the best TCP peer (Gloo variants, Open MPI over TCP), shm with Open MPI's
shared-memory path. Standard library only.

usage: python3 compare_peers.py LOG_DIR
"""
import glob
import json
import os
import re
import statistics
import sys
from collections import defaultdict

UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}
TCP_PEERS = ("gloo ", "mpi tcp")  # prefixes of the TCP peers
SHM_PEER = "mpi default"


def human(n):
    for unit in ("GiB", "MiB", "KiB"):
        if n >= UNITS[unit] and n % UNITS[unit] == 0:
            return f"{n // UNITS[unit]} {unit}"
    return f"{n} B"


def parse(log_dir):
    """Returns {(impl, np, size): [(time_us, busbw, ok), ...]} over all rounds."""
    cells = defaultdict(list)
    for path in sorted(glob.glob(os.path.join(log_dir, "r*.ours.*.log"))):
        with open(path) as f:
            for line in f:
                if not line.startswith("{"):
                    continue
                j = json.loads(line)
                if j.get("bench") != "all_reduce_perf":
                    continue
                key = (f"ringlet {j['transport']}", j["nranks"], j["size"])
                cells[key].append((j["ip_us"], j["ip_busbw"], j["ip_wrong"] in (0, None)))
    for path in sorted(glob.glob(os.path.join(log_dir, "r*.peer.*.log"))):
        with open(path) as f:
            for line in f:
                parts = line.split()
                if line.startswith("#") or len(parts) != 10 or parts[-1] not in ("OK", "FAIL"):
                    continue
                peer, algo, np_, num, unit, _iters, t, _algbw, busbw, check = parts
                if unit not in UNITS or not re.fullmatch(r"\d+", num):
                    continue
                key = (f"{peer} {algo}", int(np_), int(num) * UNITS[unit])
                cells[key].append((float(t), float(busbw), check == "OK"))
    return cells


def medians(vals):
    return (statistics.median(v[0] for v in vals), statistics.median(v[1] for v in vals),
            all(v[2] for v in vals), len(vals))


def impl_order(impl):
    rank = {"ringlet tcp": 0, "ringlet shm": 1}.get(impl)
    if rank is not None:
        return (rank, impl)
    return (2 if impl.startswith("gloo") else 3 if impl.startswith("mpi") else 4, impl)


def table(cells, np_):
    impls = sorted({k[0] for k in cells if k[1] == np_}, key=impl_order)
    sizes = sorted({k[2] for k in cells if k[1] == np_})
    med = {(i, s): medians(cells[(i, np_, s)]) for i in impls for s in sizes if (i, np_, s) in cells}
    print(f"\n## np = {np_}: median time per op in us (median busbw GB/s), in-place float32 sum\n")
    print("| size | " + " | ".join(impls) + " |")
    print("|---" * (len(impls) + 1) + "|")
    for s in sizes:
        row = []
        for i in impls:
            m = med.get((i, s))
            row.append("-" if m is None else
                       f"{m[0]:.1f} ({m[1]:.3f}){'' if m[2] else ' WRONG'}")
        print(f"| {human(s)} | " + " | ".join(row) + " |")

    print(f"\nnp = {np_}: ratios ours/peer (busbw: > 1 is faster; time: < 1 is faster)\n")
    print("| size | ours | peer | busbw ratio | time ratio |")
    print("|---|---|---|---|---|")
    for s in sizes:
        for ours, peers in (("ringlet tcp", [i for i in impls if i.startswith(TCP_PEERS)]),
                            ("ringlet shm", [i for i in impls if i == SHM_PEER])):
            mine = med.get((ours, s))
            theirs = [(med[(p, s)], p) for p in peers if (p, s) in med]
            if mine is None or not theirs:
                continue
            best, name = max(theirs, key=lambda t: t[0][1])  # the peer with the highest busbw
            label = f"best TCP peer: {name}" if ours.endswith("tcp") else name
            bw = mine[1] / best[1] if best[1] > 0 else float("inf")
            tr = mine[0] / best[0] if best[0] > 0 else float("inf")
            print(f"| {human(s)} | {ours} | {label} | {bw:.2f} | {tr:.2f} |")
    return med


def targets(meds):
    """The collectives' performance targets, each with the measured ratio."""
    def ratio(np_, ours, peer, size, field):  # field 0: time, 1: busbw
        m, p = meds.get(np_, {}).get((ours, size)), meds.get(np_, {}).get((peer, size))
        if m is None or p is None or p[field] == 0:
            return None
        return m[field] / p[field]

    def best_tcp(np_, size):
        peers = [(v[1], i) for (i, s), v in meds.get(np_, {}).items()
                 if s == size and i.startswith(TCP_PEERS)]
        return max(peers)[1] if peers else None

    checks = []
    for size in (16 << 20, 64 << 20):
        peer = best_tcp(2, size)
        checks.append((f"np 2 tcp busbw {human(size)} >= 1.3x best TCP peer ({peer or 'none measured'})",
                       ratio(2, "ringlet tcp", peer, size, 1), ">=", 1.3))
        checks.append((f"np 2 shm busbw {human(size)} >= 1.5x {SHM_PEER}",
                       ratio(2, "ringlet shm", SHM_PEER, size, 1), ">=", 1.5))
    checks.append(("np 2 tcp time 4 KiB <= 1.2x mpi tcp",
                   ratio(2, "ringlet tcp", "mpi tcp", 4096, 0), "<=", 1.2))
    checks.append((f"np 2 shm time 4 KiB <= 3x {SHM_PEER}",
                   ratio(2, "ringlet shm", SHM_PEER, 4096, 0), "<=", 3.0))
    for ours, peer in (("ringlet tcp", "mpi tcp"), ("ringlet shm", SHM_PEER)):
        sizes = sorted({s for (i, s) in meds.get(4, {}) if i == ours})
        worst = [r for r in (ratio(4, ours, peer, s, 0) for s in sizes) if r is not None]
        checks.append((f"np 4 {ours.split()[1]} time, worst size, <= 1.5x {peer}",
                       max(worst) if worst else None, "<=", 1.5))
    print("\n## Targets (ratio ours/peer)\n")
    for label, value, cmp, bound in checks:
        if value is None:
            print(f"- {label}: not measured")
            continue
        met = value >= bound if cmp == ">=" else value <= bound
        print(f"- {label}: {value:.2f} {'met' if met else 'NOT met'}")


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    cells = parse(sys.argv[1])
    if not cells:
        sys.exit(f"no results found in {sys.argv[1]}")
    rounds = max(len(v) for v in cells.values())
    print(f"# compare_peers: medians over up to {rounds} rounds (logs: {sys.argv[1]})")
    meds = {np_: table(cells, np_) for np_ in sorted({k[1] for k in cells})}
    targets(meds)


if __name__ == "__main__":
    main()

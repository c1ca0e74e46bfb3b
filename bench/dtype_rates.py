"""All-reduce byte rate per dtype at each instruction-set level, in one sitting: runs
all_reduce_perf (in place, -np ranks, one size) for float, half and bfloat16 over each
transport, with RINGLET_ISA set to each level, interleaved round by round (the types' order
rotating from round to round) so that machine noise falls on every cell alike. Prints the
median in-place busbw of each cell and its ratio to float's at the same level and transport.
Short runs are noisy on shm (a 20-iteration run swings between 5 and 16 GB/s on 2 cores, as
the two ranks' processes settle on the cores), hence 100 iterations after 20 of warm-up by
default.

Placement: on a VM the host moves the two virtual CPUs while a job runs, and a shm or loopback
all-reduce runs 2-4x slower while they sit apart (bench/README.md). bench/core_probe runs
beside the rounds as a monitor (bench/placement_monitor.py) and every run is labelled near,
apart or mixed; the ratios are then also given within each placement: the median of a type's
runs there against the median of float's runs there ("by_placement" in the JSON lines), so
that a run caught apart does not pass for a slow type. Standard library only.

usage: python3 bench/dtype_rates.py [--build build] [--np 2] [--size 16M]
           [--transports shm,tcp] [--isas baseline,best] [--rounds 5] [--iters 100]
           [--warmup 20]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections import defaultdict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare_peers  # noqa: E402  (the placement labels)
from placement_monitor import PlacementMonitor  # noqa: E402

DTYPES = ("float", "half", "bfloat16")


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--build", default="build")
    p.add_argument("--np", type=int, default=2)
    p.add_argument("--size", default="16M")
    p.add_argument("--transports", default="shm,tcp")
    p.add_argument("--isas", default="baseline,best",
                   help="levels to run; 'best' is what the binary picks by itself")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--iters", type=int, default=100)
    p.add_argument("--warmup", type=int, default=20)
    args = p.parse_args()
    if args.rounds < 1 or args.iters < 1 or args.warmup < 0 or args.np < 2:
        p.error("--rounds and --iters must be >= 1, --np >= 2")
    return args


def run_once(args, transport, dtype, isa):
    """In-place busbw (GB/s) and the level the run reports, from all_reduce_perf's JSON line."""
    env = dict(os.environ)
    env.pop("RINGLET_ISA", None)
    if isa != "best":
        env["RINGLET_ISA"] = isa
    program = os.path.join(args.build, "bench", "all_reduce_perf")
    cmd = [program, "-np", str(args.np), "-t", transport, "-b", args.size, "-e", args.size,
           "-d", dtype, "-n", str(args.iters), "-w", str(args.warmup)]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    if out.returncode != 0:
        sys.exit(f"dtype_rates: {' '.join(cmd)} (RINGLET_ISA={isa}) exited "
                 f"{out.returncode}:\n{out.stderr}")
    for line in out.stdout.splitlines():
        if line.startswith("{"):
            j = json.loads(line)
            if j.get("ip_wrong", 1) != 0:
                sys.exit(f"dtype_rates: {' '.join(cmd)} reported wrong elements")
            return j["ip_busbw"], j.get("isa", "?")
    sys.exit(f"dtype_rates: no JSON line from {' '.join(cmd)}")


def rotated(items, r):
    """items, round r's order: each starts r places later, so that no type always runs first
    (right after a change of transport or level) or right after the same type."""
    k = r % len(items)
    return items[k:] + items[:k]


def measure(args, isas, transports):
    """({cell: [busbw per round]}, {cell: [placement per round]}, {isa: level}), the cells
    (isa, transport, dtype) interleaved round by round, the types' order rotating."""
    cells, spans, level_of = defaultdict(list), defaultdict(list), {}
    monitor = PlacementMonitor(args.build)
    try:
        for r in range(args.rounds):
            for isa in isas:
                for transport in transports:
                    for dtype in rotated(DTYPES, r):
                        start = time.time()
                        busbw, level = run_once(args, transport, dtype, isa)
                        spans[(isa, transport, dtype)].append((start, time.time()))
                        cells[(isa, transport, dtype)].append(busbw)
                        level_of[isa] = level
    finally:
        samples = monitor.stop()
    states = {cell: [compare_peers.state_of(span, samples) for span in v]
              for cell, v in spans.items()}
    return cells, states, level_of


def by_placement(cells, states, isa, transport, dtype):
    """{state: (median busbw, its ratio to float's median there, runs)} for the placements
    where both this type and float ran."""
    out = {}
    for state in compare_peers.STATES:
        mine = [v for v, s in zip(cells[(isa, transport, dtype)], states[(isa, transport, dtype)])
                if s == state]
        base = [v for v, s in zip(cells[(isa, transport, "float")],
                                  states[(isa, transport, "float")]) if s == state]
        if mine and base:
            med = statistics.median(mine)
            out[state] = (med, med / statistics.median(base), len(mine))
    return out


def main():
    args = parse_args()
    transports = args.transports.split(",")
    isas = args.isas.split(",")
    cells, states, level_of = measure(args, isas, transports)
    print(f"# all_reduce_perf -np {args.np} -b {args.size} in place, median busbw (GB/s) of "
          f"{args.rounds} interleaved rounds; ratio to float at the same level and transport")
    print(f"# {'isa':>9} {'transport':>9} {'type':>9} {'busbw':>8} {'x float':>8}   rounds "
          "(placement: n near, a apart, m mixed, ? unknown)")
    for isa in isas:
        for transport in transports:
            base = statistics.median(cells[(isa, transport, "float")])
            for dtype in DTYPES:
                cell = (isa, transport, dtype)
                values = cells[cell]
                med = statistics.median(values)
                label = level_of[isa]
                rounds = " ".join(f"{v:.2f}{(s or ' ')[0].replace('u', '?')}".rstrip()
                                  for v, s in zip(values, states[cell]))
                placed = by_placement(cells, states, isa, transport, dtype)
                within = "".join(f"; {st} {m:.2f} ({r:.3f}x, {k} runs)"
                                 for st, (m, r, k) in placed.items())
                print(f"  {label:>9} {transport:>9} {dtype:>9} {med:8.2f} {med / base:8.3f}   "
                      f"{rounds}{within}")
                print(json.dumps({"bench": "dtype_rates", "isa": label, "transport": transport,
                                  "type": dtype, "np": args.np, "size": args.size,
                                  "busbw": med, "vs_float": med / base, "rounds": values,
                                  "placements": states[cell],
                                  "by_placement": {st: {"busbw": m, "vs_float": r, "runs": k}
                                                   for st, (m, r, k) in placed.items()}}))


if __name__ == "__main__":
    main()

"""All-reduce byte rate per dtype at each instruction-set level, in one sitting: runs
all_reduce_perf (in place, -np ranks, one size) for float, half and bfloat16 over each
transport, with RINGLET_ISA set to each level, interleaved round by round so that machine
noise falls on every cell alike. Prints the median in-place busbw of each cell and its ratio
to float's at the same level and transport. Short runs are noisy on shm (a 20-iteration
run swings between 5 and 16 GB/s on 2 cores, as the two ranks' processes settle on the
cores), hence 100 iterations after 20 of warm-up by default. Standard library only.

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
from collections import defaultdict

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


def main():
    args = parse_args()
    transports = args.transports.split(",")
    isas = args.isas.split(",")
    cells = defaultdict(list)
    level_of = {}
    for _ in range(args.rounds):
        for isa in isas:
            for transport in transports:
                for dtype in DTYPES:
                    busbw, level = run_once(args, transport, dtype, isa)
                    cells[(isa, transport, dtype)].append(busbw)
                    level_of[isa] = level
    print(f"# all_reduce_perf -np {args.np} -b {args.size} in place, median busbw (GB/s) of "
          f"{args.rounds} interleaved rounds; ratio to float at the same level and transport")
    print(f"# {'isa':>9} {'transport':>9} {'type':>9} {'busbw':>8} {'x float':>8}   rounds")
    for isa in isas:
        for transport in transports:
            base = statistics.median(cells[(isa, transport, "float")])
            for dtype in DTYPES:
                values = cells[(isa, transport, dtype)]
                med = statistics.median(values)
                label = level_of[isa]
                rounds = " ".join(f"{v:.2f}" for v in values)
                print(f"  {label:>9} {transport:>9} {dtype:>9} {med:8.2f} {med / base:8.3f}   "
                      f"{rounds}")
                print(json.dumps({"bench": "dtype_rates", "isa": label, "transport": transport,
                                  "type": dtype, "np": args.np, "size": args.size,
                                  "busbw": med, "vs_float": med / base, "rounds": values}))


if __name__ == "__main__":
    main()

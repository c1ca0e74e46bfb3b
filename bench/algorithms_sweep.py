#!/usr/bin/env python3
"""The algorithms side by side: all_gather_perf, reduce_scatter_perf and all_reduce_perf at 4 and
8 ranks over shm, once per RINGLET_ALGO that changes the collective's algorithm, in alternating
rounds; prints per collective a table of the median (over the rounds) of the mean of the in-place
and out-of-place times, each with the algorithm ringlet's own JSON line named, and the fastest.

usage: bench/algorithms_sweep.py [--rounds N] [--build DIR] [--transport shm|tcp]
"""
import argparse
import json
import os
import statistics
import subprocess

PLAN = {
    "all_gather_perf": ["ring", "bruck", "rabenseifner"],
    "reduce_scatter_perf": ["ring", "rabenseifner"],
    "all_reduce_perf": ["ring", "rd", "rabenseifner", "tree"],
}
RANKS = (4, 8)


def run(build, prog, ranks, algo, transport):
    """{size: (us, algorithm name)} of one sweep, 64 B - 1 MiB."""
    env = dict(os.environ, RINGLET_ALGO=algo)
    cmd = [os.path.join(build, "bench", prog), "-np", str(ranks), "-t", transport, "-b", "64",
           "-e", "1M", "-f", "4", "-n", "100", "-w", "10"]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300, check=True)
    rows = {}
    for line in out.stdout.splitlines():
        if line.startswith("{"):
            j = json.loads(line)
            rows[j["size"]] = ((j["oop_us"] + j["ip_us"]) / 2, j["algo"])
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--build", default="build")
    parser.add_argument("--transport", default="shm")
    args = parser.parse_args()
    times, names = {}, {}
    for _ in range(args.rounds):
        for prog, algos in PLAN.items():
            for ranks in RANKS:
                for algo in algos:
                    for size, (us, name) in run(args.build, prog, ranks, algo,
                                                args.transport).items():
                        times.setdefault((prog, ranks, size, algo), []).append(us)
                        names[(prog, ranks, size, algo)] = name
    for prog, algos in PLAN.items():
        print(f"\n{prog}, {args.transport}: us, median of {args.rounds} "
              "(in brackets: the algorithm ringlet ran)")
        print("| ranks | bytes | " + " | ".join(f"RINGLET_ALGO={a}" for a in algos) + " | fastest |")
        print("|---|---|" + "---|" * len(algos) + "---|")
        for ranks in RANKS:
            for size in sorted({k[2] for k in times if k[:2] == (prog, ranks)}):
                med = {a: statistics.median(times[(prog, ranks, size, a)]) for a in algos}
                cells = " | ".join(f"{med[a]:.1f} ({names[(prog, ranks, size, a)]})" for a in algos)
                print(f"| {ranks} | {size} | {cells} | {names[(prog, ranks, size, min(med, key=med.get))]} |")


if __name__ == "__main__":
    main()

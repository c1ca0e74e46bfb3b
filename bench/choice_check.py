#!/usr/bin/env python3
"""auto's two choices side by side: the model's built-in tables (the default, RINGLET_ALGO_TABLE
unset: collectives/default_algorithm_tables.cpp, `ringlet model table` under the default profile)
against the measured thresholds (RINGLET_ALGO_TABLE=thresholds), all_reduce_perf on this host's
ranks, interleaved for --rounds rounds, each going first in every other round. Prints per world
size and size the algorithm each ran, its median busbw (each round's the mean of in-place and
out-of-place) and model / thresholds.

usage: bench/choice_check.py [--rounds 2] [--ranks 2,4,8] [--build DIR] [--sizes 1K,64M]
"""
import argparse
import json
import os
import statistics
import subprocess

MODES = {"thresholds": {"RINGLET_ALGO_TABLE": "thresholds"}, "model": {}}


def sweep(build, ranks, sizes, env):
    """{size: (busbw, algo)} of one all_reduce_perf run."""
    # Settled ranks (two started on one CPU share it for about 0.1 s), timed loops of 50 ms.
    cmd = [os.path.join(build, "bench", "all_reduce_perf"), "-np", str(ranks), "-b", sizes[0],
           "-e", sizes[1], "-f", "4", "--warmup-time", "0.3", "--min-time", "0.05"]
    clean = {k: v for k, v in os.environ.items() if k != "RINGLET_ALGO_TABLE"}
    out = subprocess.run(cmd, env={**clean, **env}, capture_output=True, text=True, timeout=600,
                         check=True).stdout
    rows = {}
    for line in out.splitlines():
        if line.startswith("{"):
            j = json.loads(line)
            rows[j["size"]] = ((j["ip_busbw"] + j["oop_busbw"]) / 2, j["algo"])
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--ranks", default="2,4,8")
    ap.add_argument("--build", default="build")
    ap.add_argument("--sizes", default="1K,64M", help="smallest,largest (x4 between)")
    args = ap.parse_args()
    sizes = args.sizes.split(",")
    runs = {}
    for round_ in range(args.rounds):
        for n in [int(r) for r in args.ranks.split(",")]:
            order = list(MODES.items())
            for mode, env in order if round_ % 2 == 0 else reversed(order):  # each first in turn
                for size, (busbw, algo) in sweep(args.build, n, sizes, env).items():
                    runs.setdefault((n, size), {}).setdefault(mode, []).append((busbw, algo))
    print(f"| ranks | bytes | thresholds: algorithm | busbw GB/s | model: algorithm | busbw GB/s "
          f"| model / thresholds |")
    print("|---|---|---|---|---|---|---|")
    ratios = []
    for (n, size), modes in sorted(runs.items()):
        cells = []
        for mode in MODES:
            busbw = statistics.median(b for b, _ in modes[mode])
            algos = sorted({a for _, a in modes[mode]})
            cells.append((busbw, "/".join(algos)))
        ratio = cells[1][0] / cells[0][0] if cells[0][0] > 0 else float("nan")
        ratios.append(ratio)
        print(f"| {n} | {size} | {cells[0][1]} | {cells[0][0]:.2f} | {cells[1][1]} | "
              f"{cells[1][0]:.2f} | {ratio:.2f} |")
    print(f"\nmodel / thresholds: median {statistics.median(ratios):.2f}, "
          f"lowest {min(ratios):.2f}, highest {max(ratios):.2f} over {len(ratios)} rows "
          f"(medians of {args.rounds} rounds, median busbw)")


if __name__ == "__main__":
    main()

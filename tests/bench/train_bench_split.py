#!/usr/bin/env python3
"""bench/train_bench's time_split end to end (a `meson test`): one rank and two local ranks,
a few steps each. Every rank has an entry; its mean step agrees with the step times the program
lists one by one; computing, preempted and blocked are not negative and fit in the step; two
ranks' steps are as long as each other (they wait for each other); the communicator's threads
show CPU time beside the ranks' main threads, and a single rank's process, which has none,
shows almost none (under a tenth of its computing). With --sync barrier (no DDP, a barrier a
step) two ranks still keep in step, say so in the JSON, and their communicator moves no gradients
(one collective a step, the barrier); a --sync that is neither is refused, naming the value.

usage: train_bench_split.py BUILD_DIR
"""
import json
import statistics
import subprocess
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "helpers"))
from checks import check, finish  # tests/helpers/checks.py


def run(build, nproc, *extra):
    cmd = [f"{build}/bench/train_bench", "--steps", "10", "--warmup", "1", "--nproc", str(nproc),
           *extra]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} exited {proc.returncode}:\n{proc.stderr[-2000:]}")
    line = [l for l in proc.stdout.splitlines() if '{"' in l and '"time_split"' in l][-1]
    return json.loads(line[line.find("{"):])


def check_entries(result, nproc):
    splits = result["time_split"]
    check([s["rank"] for s in splits] == list(range(nproc)),
          f"{nproc} rank(s): one time_split entry per rank, in rank order")
    listed = statistics.mean(result["step_samples_ms"])
    first = splits[0]["wall_ms"]
    check(abs(first - listed) <= 0.02 * listed + 0.5,
          f"{nproc} rank(s): rank 0's mean step {first:.2f} ms, its listed steps' mean "
          f"{listed:.2f} ms")
    for s in splits:
        preempted = s["preempted_ms"]
        parts = [s["computing_ms"], s["blocked_ms"]]
        if preempted is not None:
            parts.append(preempted)
        check(all(p >= -0.05 for p in parts) and s["computing_ms"] > 0,
              f"{nproc} rank(s), rank {s['rank']}: no part negative, some computing ({s})")
        check(s["computing_ms"] + (preempted or 0) <= s["wall_ms"] + 0.05,
              f"{nproc} rank(s), rank {s['rank']}: computing and preempted fit in the step")
        if preempted is None:
            print(f"note    rank {s['rank']}: the kernel keeps no run-queue wait here "
                  f"(no /proc/thread-self/schedstat): preempted unknown, inside blocked")


def main():
    build = sys.argv[1]
    one = run(build, 1)
    check_entries(one, 1)
    solo = one["time_split"][0]
    check(solo["other_threads_ms"] < 0.1 * solo["computing_ms"],
          f"1 rank: no communicator threads, other threads' CPU {solo['other_threads_ms']:.3f} ms "
          f"of computing {solo['computing_ms']:.2f} ms")
    two = run(build, 2)
    check_entries(two, 2)
    walls = [s["wall_ms"] for s in two["time_split"]]
    check(max(walls) - min(walls) <= 0.1 * max(walls),
          f"2 ranks: in lockstep, mean steps {walls} within 10% of each other")
    check(all(s["other_threads_ms"] > 0.01 for s in two["time_split"]),
          "2 ranks: each rank's communicator threads used CPU "
          f"({[round(s['other_threads_ms'], 3) for s in two['time_split']]} ms a step)")
    check_barrier(build, two)
    return finish()


def check_barrier(build, ddp):
    """--sync barrier against the DDP run: lockstep without gradient traffic."""
    check(ddp["sync"] == "ddp", f"2 ranks: sync ddp by default ({ddp['sync']})")
    lock = run(build, 2, "--sync", "barrier")
    check_entries(lock, 2)
    check(lock["sync"] == "barrier", f"--sync barrier: the JSON says so ({lock['sync']})")
    walls = [s["wall_ms"] for s in lock["time_split"]]
    check(max(walls) - min(walls) <= 0.1 * max(walls),
          f"--sync barrier: in lockstep, mean steps {walls} within 10% of each other")
    # Ops, not CPU time: on a loaded machine a barrier's wake-ups can cost as much CPU as a small
    # model's gradient all-reduces.
    ops, ddp_ops = lock["per_step"]["comm_ops"], ddp["per_step"]["comm_ops"]
    check(ddp_ops >= 1, f"2 ranks, DDP: {ddp_ops} collectives a step (its buckets' all-reduces)")
    check(ops == 1, f"--sync barrier: the communicator moves no gradients ({ops} collectives a "
          "step: its barrier)")
    bad = subprocess.run([f"{build}/bench/train_bench", "--sync", "allreduce"],
                         capture_output=True, text=True, timeout=60)
    check(bad.returncode != 0 and "--sync: 'allreduce'" in bad.stderr,
          f"--sync allreduce refused, naming it (exit {bad.returncode}: {bad.stderr.strip()[:80]})")


if __name__ == "__main__":
    sys.exit(main())

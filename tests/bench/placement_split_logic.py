#!/usr/bin/env python3
"""The bench scripts' split of their runs by CPU placement, on made-up runs (a `meson test`):
bench/dtype_rates.py's ratio to float within each placement, and bench/ddp_scaling.py's
scaling within each placement, its estimate of the lockstep wait, its means of train_bench's
time_split and its summary (the ceilings, and the step's growth from one to ddp split into
contention, lockstep and gradient sync, over the medians and round by round). A placement where
only one side ran gives no ratio; mixed and unknown runs count in no placement; a run caught
apart does not drag the near figure.

usage: placement_split_logic.py SOURCE_ROOT
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "helpers"))
from checks import check, finish  # tests/helpers/checks.py


def close(a, b):
    return abs(a - b) < 1e-9


def check_dtype_rates(dtype_rates):
    cells = {("avx2", "shm", "float"): [7.0, 3.0, 6.0, 5.0],
             ("avx2", "shm", "half"): [6.3, 6.5, 2.8, 1.0],
             ("avx2", "shm", "bfloat16"): [9.9, 9.9, 9.9, 9.9]}
    states = {("avx2", "shm", "float"): ["near", "apart", "near", "mixed"],
              ("avx2", "shm", "half"): ["near", "near", "apart", "unknown"],
              ("avx2", "shm", "bfloat16"): ["mixed", "mixed", "unknown", "mixed"]}
    half = dtype_rates.by_placement(cells, states, "avx2", "shm", "half")
    check(set(half) == {"near", "apart"}, f"half: a ratio in near and apart ({sorted(half)})")
    med, ratio, runs = half["near"]
    check(close(med, 6.4) and close(ratio, 6.4 / 6.5) and runs == 2,
          f"half near: median 6.4 of 2 runs over float's near median 6.5 ({half['near']})")
    med, ratio, runs = half["apart"]
    check(close(ratio, 2.8 / 3.0) and runs == 1, f"half apart: 2.8 / 3.0 ({half['apart']})")
    bf16 = dtype_rates.by_placement(cells, states, "avx2", "shm", "bfloat16")
    check(bf16 == {}, f"bfloat16 only mixed or unknown: no placement ratio ({bf16})")
    flt = dtype_rates.by_placement(cells, states, "avx2", "shm", "float")
    check(close(flt["near"][1], 1.0), "float against itself: 1.0")


def check_ddp_scaling(ddp_scaling):
    results = {"one": [30.0, 60.0, 31.0], "pair": [32.0, 70.0, 33.0],
               "ddp": [33.0, 80.0, 34.0]}
    states = {"one": ["near", "apart", "near"], "pair": ["near", "apart", "mixed"],
              "ddp": ["near", "near", "near"]}
    split = ddp_scaling.by_placement(results, states)
    check(set(split) == {"near"}, f"ddp_scaling: only near has one, pair and ddp ({sorted(split)})")
    near = split["near"]
    check(near["runs"] == {"one": 2, "pair": 1, "ddp": 3},
          f"ddp_scaling near: runs per name 2/1/3 ({near['runs']})")
    check(close(near["scaling"], 2 * 30.5 / 34.0) and close(near["ceiling"], 2 * 30.5 / 32.0),
          f"ddp_scaling near: 2 x one / ddp and 2 x one / pair from near runs only ({near})")


def check_lockstep(ddp_scaling):
    """ddp_scaling.lockstep_ms: steady ranks wait for nothing; ranks that vary wait."""
    check(close(ddp_scaling.lockstep_ms([30.0] * 5, [32.0] * 7), 0.0),
          "lockstep: two steady ranks, the slower sets the pace, no wait beyond it")
    # Pairs (max): 9 9 11 11 | 11 11 11 11 (the second rank 9 or 11 alike): median 11, each
    # rank's own median 10.
    waited = ddp_scaling.lockstep_ms([9.0, 11.0], [9.0, 9.0, 11.0, 11.0])
    check(close(waited, 1.0), f"lockstep: ranks of 9 or 11 ms wait 1 ms at the median ({waited})")
    # One slow step in ten on each rank: the lockstep median is still the fast step.
    waited = ddp_scaling.lockstep_ms([10.0] * 9 + [20.0], [10.0] * 9 + [20.0])
    check(close(waited, 0.0), f"lockstep: a rare slow step moves no median ({waited})")


def check_time_split(ddp_scaling):
    """ddp_scaling.mean_split / median_split: means over the ranks, how far their computing lay
    apart, medians over the rounds, and an unknown run-queue wait kept unknown."""
    ranks = [{"rank": 0, "computing_ms": 36.0, "preempted_ms": 0.5, "blocked_ms": 5.5,
              "other_threads_ms": 0.7, "wall_ms": 42.0},
             {"rank": 1, "computing_ms": 41.0, "preempted_ms": 0.7, "blocked_ms": 0.3,
              "other_threads_ms": 0.6, "wall_ms": 42.0}]
    m = ddp_scaling.mean_split(ranks)
    check(close(m["computing_ms"], 38.5) and close(m["blocked_ms"], 2.9) and
          close(m["preempted_ms"], 0.6) and close(m["other_threads_ms"], 0.65),
          f"time_split: each field averaged over the ranks ({m})")
    check(close(m["apart_ms"], 5.0), f"time_split: computing 36 and 41 ms lie 5 ms apart ({m})")
    unknown = ddp_scaling.mean_split([dict(ranks[0], preempted_ms=None), ranks[1]])
    check(unknown["preempted_ms"] is None and close(unknown["blocked_ms"], 2.9),
          f"time_split: a rank without the run queue's wait leaves it unknown ({unknown})")
    rounds = [m, dict(m, blocked_ms=1.0, apart_ms=1.0), dict(m, blocked_ms=9.0, apart_ms=7.0)]
    med = ddp_scaling.median_split(rounds)
    check(close(med["blocked_ms"], 2.9) and close(med["apart_ms"], 5.0),
          f"time_split: the median round per field ({med})")
    check(ddp_scaling.median_split([m, unknown])["preempted_ms"] is None,
          "time_split: an unknown round makes the median unknown")


def split(computing):
    return {"computing_ms": computing, "preempted_ms": 0.5, "blocked_ms": 1.0,
            "other_threads_ms": 0.2, "apart_ms": 0.0}


def check_summary(ddp_scaling):
    """ddp_scaling.report on made-up rounds: medians, both ceilings, and one -> ddp split into
    its three parts, which add up."""
    results = {"one": [30.0, 31.0, 50.0], "pair": [32.0, 33.0, 31.0],
               "lockstep": [34.0, 40.0, 35.0], "ddp": [39.0, 37.0, 36.0]}
    states = {name: ["unknown"] * 3 for name in results}
    splits = {name: [split(v) for v in values] for name, values in results.items()}
    s = ddp_scaling.report((results, states, [0.1, 0.3, 0.2], splits))
    check(close(s["scaling"], 2 * 31.0 / 37.0) and close(s["ceiling"], 2 * 31.0 / 32.0) and
          close(s["lockstep_ceiling"], 2 * 31.0 / 35.0),
          f"summary: 2 x one over ddp, pair and lockstep, medians ({s['step_ms']})")
    check(close(s["contention_ms"], 1.0) and close(s["lockstep_cost_ms"], 3.0) and
          close(s["gradient_sync_ms"], 2.0) and close(s["lockstep_ms"], 0.2),
          "summary: one -> ddp is +1 contention, +3 lockstep, +2 gradient sync")
    check(close(s["contention_ms"] + s["lockstep_cost_ms"] + s["gradient_sync_ms"], 37.0 - 31.0),
          "summary: the three parts add up to ddp - one")
    check(close(s["by_round"]["lockstep_cost_ms"], 4.0) and
          close(s["by_round"]["gradient_sync_ms"], 1.0),
          f"summary: round by round, lockstep - pair +2, +7, +4 and ddp - lockstep +5, -3, +1 "
          f"have medians +4 and +1, not the medians' differences ({s['by_round']})")
    check(close(s["time_split"]["lockstep"]["computing_ms"], 35.0),
          "summary: lockstep's time_split is its own")


def main():
    sys.path.insert(0, os.path.join(sys.argv[1], "bench"))
    import dtype_rates  # noqa: E402
    import ddp_scaling  # noqa: E402
    check_dtype_rates(dtype_rates)
    check_ddp_scaling(ddp_scaling)
    check_lockstep(ddp_scaling)
    check_time_split(ddp_scaling)
    check_summary(ddp_scaling)
    return finish()


if __name__ == "__main__":
    sys.exit(main())

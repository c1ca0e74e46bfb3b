#!/usr/bin/env python3
"""bench/simulated_hosts.py end to end, small (a meson test).

usage: simulated_hosts.py BUILD_DIR SOURCE_ROOT

Runs the benchmark with one round, one size (1 MiB) and a few training steps: two network
namespaces x 2 ranks, the flat ring and auto's choice, train_bench with and without the
fp16 hook. Its summary line must show that auto ran the hierarchical all-reduce, that every run
moved bytes (the benchmark itself fails on a wrong result) and that both hooks trained.
Exits 77 (meson's SKIP), saying why, where the benchmark cannot build namespaces (not root).
"""
import json
import subprocess
import sys

SKIP = 77


def main():
    build, root = sys.argv[1], sys.argv[2]
    cmd = [sys.executable, root + "/bench/simulated_hosts.py", "both", "--build", build,
           "--rounds", "1", "--sizes", "1M,1M", "--iters", "3", "--warmup", "1", "--steps", "3",
           "--hooks", "none,fp16_compress", "--no-iperf", "--job-timeout", "90"]
    run = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         timeout=240)
    print(run.stdout)
    if run.returncode == SKIP:
        return SKIP
    assert run.returncode == 0, f"exit {run.returncode}"
    summary = json.loads(run.stdout.strip().splitlines()[-1])
    ran = {row["algo"]: row for row in summary["all_reduce"]}
    assert ran["ring"]["ran"] == "ring", ran
    assert ran["auto"]["ran"] == "hierarchical", ran
    for row in ran.values():
        assert row["ip_busbw"] > 0 and row["oop_busbw"] > 0, row
    hooks = {row["hook"]: row for row in summary["train"]}
    assert [row["comm_hook"] for row in summary["train"]] == ["none", "fp16_compress"], hooks
    assert set(hooks) == {"none", "fp16_compress"}, hooks
    for row in hooks.values():
        assert row["step_ms"] > 0 and row["images_per_s"] > 0, row
    print("simulated_hosts: auto ran hierarchical; both hooks trained")
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""bench/core_probe measures and monitors (a `meson test`).

usage: core_probe_check.py BUILD_DIR

Once: exit 0, a JSON line with a positive round trip under a millisecond and the placement it
names (up to three tries: a sample whose partner thread was not scheduled within 50 ms, on a
machine busy with other tests, is nan). As a monitor (--every 0.05 --for 0.4): a header, then at
least four samples, each a unix time (ascending, within the run) and a round trip in ns.
Refused with exit 2 and a message naming the flag: --every without --for, the same CPU twice, a
CPU this process may not use. Skipped (exit 77), saying so, on a machine with fewer than two
CPUs for this process.
"""
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "helpers"))
from checks import check, finish  # tests/helpers/checks.py


def run(args):
    try:
        return subprocess.run(args, capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        return subprocess.CompletedProcess(args, -1, "", "timed out after 60 s")


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    probe = os.path.join(sys.argv[1], "bench", "core_probe")
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        print(f"skipped: core_probe needs two CPUs, this process may use {len(cpus)}")
        return 77
    for _try in range(3):
        once = run([probe])
        lines = [line for line in once.stdout.splitlines() if line.startswith("{")]
        result = json.loads(lines[0]) if lines else {}
        ns = result.get("round_trip_ns")
        if once.returncode == 0:
            break
    check(once.returncode == 0 and isinstance(ns, (int, float)) and 0 < ns < 1e6
          and result.get("placement") in ("same core", "shared cache", "apart")
          and result.get("cpus") == cpus[:2],
          f"once: a round trip between the first two CPUs ({once.stdout.strip()})")

    start = time.time()
    monitor = run([probe, "--every", "0.05", "--for", "0.4"])
    end = time.time()
    samples = [line.split() for line in monitor.stdout.splitlines() if not line.startswith("#")]
    try:
        values = [(float(t), float(v)) for t, v in samples]
    except ValueError:
        values = []
    times = [t for t, _ in values]
    check(monitor.returncode == 0 and len(values) >= 4 and len(values) == len(samples)
          and times == sorted(times) and start - 1 <= times[0] and times[-1] <= end + 1
          and any(v > 0 for _, v in values),
          f"monitor: {len(values)} timed samples in 0.4 s ({monitor.stdout.strip()[:300]!r})")

    for bad, why in ((["--every", "0.05"], "--every without --for"),
                     (["--cpus", f"{cpus[0]},{cpus[0]}"], "the same CPU twice"),
                     (["--cpus", f"{cpus[0]},{max(cpus) + 1}"], "a CPU this process may not use")):
        r = run([probe] + bad)
        check(r.returncode == 2 and bad[0] in r.stderr,
              f"{why}: exit {r.returncode} (expected 2), the message naming {bad[0]}")
    return finish()


if __name__ == "__main__":
    sys.exit(main())

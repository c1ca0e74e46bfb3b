#!/usr/bin/env python3
"""The model against measurement, in one sitting: `ringlet model fit` measures this machine, then
all_reduce_perf runs the ring (RINGLET_ALGO=ring: the model simulates the algorithm that ran) at
2, 4 and 8 local ranks over shm and over tcp, 64 KiB - 64 MiB, and `ringlet model predict`
simulates each row with the fitted profile (for tcp, the profile's link within the host is the
tcp one). Prints one table: measured median (of the rounds; each round's time the mean of the
in-place and out-of-place ones), predicted, predicted / measured, and whether that is within 25%.

usage: bench/model_check.py [--rounds N] [--build DIR] [--ranks 2,4,8] [--transports shm,tcp]
"""
import argparse
import json
import os
import statistics
import subprocess
import tempfile


def measure(build, ranks, transport):
    """{size: us} of one all_reduce_perf sweep of the ring."""
    env = dict(os.environ, RINGLET_ALGO="ring")
    cmd = [os.path.join(build, "bench", "all_reduce_perf"), "-np", str(ranks), "-t", transport,
           "-b", "64K", "-e", "64M", "-f", "4"]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600, check=True)
    rows = {}
    for line in out.stdout.splitlines():
        if line.startswith("{"):
            j = json.loads(line)
            assert j["algo"] == "ring", j["algo"]
            rows[j["size"]] = (j["oop_us"] + j["ip_us"]) / 2
    return rows


def predict(build, ranks, size, profile):
    cmd = [os.path.join(build, "trainer", "ringlet"), "model", "predict", "--ranks", str(ranks),
           "--size", str(size), "--profile", profile, "--no-sweep"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=True).stdout
    for line in out.splitlines():
        cells = line.split()
        if cells and cells[0] == "ring":
            return float(cells[1])
    raise RuntimeError("no ring row in:\n" + out)


def profiles(build, folder):
    """The fitted profile, and the same with tcp as the link within a host."""
    shm = os.path.join(folder, "shm.json")
    fit = subprocess.run([os.path.join(build, "trainer", "ringlet"), "model", "fit", "--out", shm],
                         capture_output=True, text=True, timeout=300, check=True).stdout
    print(fit)
    with open(shm) as f:
        p = json.load(f)
    p["intra"] = p["inter"]
    tcp = os.path.join(folder, "tcp.json")
    with open(tcp, "w") as f:
        json.dump(p, f)
    return {"shm": shm, "tcp": tcp}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--build", default="build")
    parser.add_argument("--ranks", default="2,4,8")
    parser.add_argument("--transports", default="shm,tcp")
    args = parser.parse_args()
    ranks = [int(r) for r in args.ranks.split(",")]
    transports = args.transports.split(",")
    with tempfile.TemporaryDirectory() as folder:
        profile = profiles(args.build, folder)
        times = {}
        for _ in range(args.rounds):
            for t in transports:
                for n in ranks:
                    for size, us in measure(args.build, n, t).items():
                        times.setdefault((t, n, size), []).append(us)
        print(f"| transport | ranks | bytes | measured us (median of {args.rounds}) "
              "| predicted us | predicted / measured | within 25% |")
        print("|---|---|---|---|---|---|---|")
        within = 0
        for (t, n, size), us in sorted(times.items()):
            measured = statistics.median(us)
            predicted = predict(args.build, n, size, profile[t])
            ratio = predicted / measured
            ok = abs(ratio - 1) <= 0.25
            within += ok
            print(f"| {t} | {n} | {size} | {measured:.1f} | {predicted:.1f} | {ratio:.2f} | "
                  f"{'yes' if ok else 'no'} |")
        print(f"\n{within} of {len(times)} rows within 25%")


if __name__ == "__main__":
    main()

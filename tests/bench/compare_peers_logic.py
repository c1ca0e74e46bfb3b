#!/usr/bin/env python3
"""bench/compare_peers.py's verdicts on made-up logs, and bench/peers/src/loopback.cc run briefly
(a `meson test`).

usage: compare_peers_logic.py SOURCE_ROOT

The logs hold one round of ours (all_reduce_perf JSON lines, both places) and peer rows (in
place and "-oop") chosen so that each kind of verdict occurs: ours faster; a peer more than 5%
faster; a peer faster but ours at the loopback's limit (in place and out of place); a peer
faster and ours far above the loopback's rate (that limit does not bind there: trails); a peer
within 5%; wrong results; a point no peer measured; a faster peer whose own check failed (not
counted). A second set of logs carries a placement log (bench/core_probe's samples) and "# span"
lines: ours and the peer are compared only within a placement (near, apart), mixed runs are
left out, and a point measured in no common placement is unmatched. The loopback program must
report positive, ordered rates for a ring of 2 processes and refuse bad arguments. Without g++
that part is skipped (exit 77), saying so.
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "helpers"))
from checks import FAILURES, check, finish  # tests/helpers/checks.py


def ours(transport, np_, size, ip_us, oop_us, ip_busbw=1.0, oop_busbw=1.0, wrong=0):
    return json.dumps({"bench": "all_reduce_perf", "transport": transport, "nranks": np_,
                       "size": size, "ip_us": ip_us, "ip_busbw": ip_busbw, "ip_wrong": wrong,
                       "oop_us": oop_us, "oop_busbw": oop_busbw, "oop_wrong": 0})


def peer(name, algo, np_, human, time_us, busbw, check_="OK"):
    return f"{name:<8} {algo:<14} {np_:3d} {human:>8} {100:8d} {time_us:12.1f} {1.0:12.3f} {busbw:12.3f} {check_}"


def write_logs(log_dir):
    with open(os.path.join(log_dir, "r1.ours.np2.tcp.log"), "w") as f:
        print(ours("tcp", 2, 4096, 10.0, 30.0), file=f)                 # ip faster, oop trails
        print(ours("tcp", 2, 65536, 40.0, None, 7.0), file=f)           # far above the limit: trails
        print(ours("tcp", 2, 1 << 20, 300.0, 300.0, 3.3, 3.3), file=f)  # at the limit, both places
        print(ours("tcp", 2, 1 << 24, 1000.0, 1000.0, 1.0, 1.0, wrong=5), file=f)
        print("# not a result line", file=f)
    with open(os.path.join(log_dir, "r1.ours.np2.shm.log"), "w") as f:
        print(ours("shm", 2, 4096, 1.04, 2.0), file=f)                  # within 5%; oop: none
    with open(os.path.join(log_dir, "r1.peer.mpi.log"), "w") as f:
        print("peer     algo           np     size    iters      time_us   algbw   busbw check", file=f)
        print(peer("mpi", "tcp", 2, "4 KiB", 20.0, 0.2), file=f)
        print(peer("mpi", "tcp-oop", 2, "4 KiB", 20.0, 0.2), file=f)
        print(peer("mpi", "tcp", 2, "64 KiB", 30.0, 9.0), file=f)
        print(peer("mpi", "tcp", 2, "1 MiB", 200.0, 5.0), file=f)
        print(peer("mpi", "tcp-oop", 2, "1 MiB", 200.0, 5.0), file=f)
        print(peer("mpi", "tcp", 2, "16 MiB", 2000.0, 0.5), file=f)
        print(peer("mpi", "default", 2, "4 KiB", 1.0, 4.0), file=f)
        print(peer("mpi", "default-oop", 2, "4 KiB", 0.1, 40.0, "FAIL"), file=f)  # not counted
    with open(os.path.join(log_dir, "r1.peer.loopback.log"), "w") as f:
        for human in ("4 KiB", "64 KiB", "1 MiB", "16 MiB"):
            print(peer("loopback", "streams", 2, human, 1.0, 3.4), file=f)


def verdict_lines(out):
    return [line for line in out.splitlines() if line.startswith(("- ok", "- TRAILS"))]


def compare(source_root, *writers):
    """compare_peers.py run over a folder of logs that each of writers(log_dir) writes in turn."""
    with tempfile.TemporaryDirectory() as log_dir:
        for write in writers:
            write(log_dir)
        return subprocess.run([sys.executable, os.path.join(source_root, "bench/compare_peers.py"),
                               log_dir], capture_output=True, text=True, timeout=60)


def check_verdicts(source_root):
    run = compare(source_root, write_logs)
    check(run.returncode == 0, f"compare_peers.py exits 0 (stderr: {run.stderr.strip()[:300]})")
    lines = verdict_lines(run.stdout)
    for line in lines:
        print("        " + line)

    def one(prefix):
        found = [line for line in lines if prefix in line]
        return found[0] if len(found) == 1 else ""

    check(one("np 2 in place 4 KiB tcp").startswith("- ok"), "ours faster: ok")
    check(one("np 2 out of place 4 KiB tcp").startswith("- TRAILS")
          and "30.0 us vs mpi tcp 20.0 us = 1.50x" in one("np 2 out of place 4 KiB tcp"),
          "an out-of-place peer row (-oop) is judged against ours out of place: trails 1.50x")
    at_limit = one("np 2 in place 1 MiB tcp")
    check(at_limit.startswith("- ok") and "at the loopback's limit" in at_limit
          and "0.97x the loopback's 3.400 GB/s" in at_limit,
          "a faster peer, but ours at 0.97x the loopback's limit: ok, saying so")
    above = one("np 2 in place 64 KiB tcp")
    check(above.startswith("- TRAILS") and "2.06x the loopback's" in above,
          "ours far above the loopback's rate and a peer faster still: trails (the limit does "
          "not bind there)")
    check(one("np 2 in place 16 MiB tcp").startswith("- TRAILS")
          and "WRONG" in one("np 2 in place 16 MiB tcp"), "wrong results trail whatever the time")
    check(one("np 2 in place 4 KiB shm").startswith("- ok"), "within 5% of the peer: ok")
    oop_limit = one("np 2 out of place 1 MiB tcp")
    check(oop_limit.startswith("- ok") and "at the loopback's limit" in oop_limit,
          "the loopback's limit holds out of place too")
    check(one("np 2 out of place 4 KiB shm") == "" and one("np 2 out of place 16 MiB tcp") == "",
          "no verdict where no peer (with a passing check) measured the point")
    check(len(lines) == 7, f"seven verdicts in all (got {len(lines)})")
    check("every point: 4 of 7 met, 3 trail" in run.stdout, "the summary counts them")
    check("| 4 KiB | ringlet tcp | best TCP peer: mpi tcp |" in run.stdout,
          "the ratio table names the best TCP peer")


def write_placement_logs(log_dir):
    """Samples: near (130 ns) over [100, 200], apart (450 ns) over [300, 400], both over
    [500, 510]; a nan sample is ignored."""
    with open(os.path.join(log_dir, "placement.log"), "w") as f:
        print("# core_probe cpus 0,1 every 0.25 s for 86400 s: unix_time round_trip_ns", file=f)
        for t in range(100, 201, 5):
            print(f"{t}.000 130.0", file=f)
        print("250.000 nan", file=f)
        for t in range(300, 401, 5):
            print(f"{t}.000 450.0", file=f)
        for t in range(500, 511, 5):
            print(f"{t}.000 {130.0 if t % 10 else 450.0}", file=f)
    near, apart, mixed = (110, 112), (310, 312), (500, 510)
    ours_runs = [  # (span, size, in-place us)
        (near, 4096, 1.0), (apart, 4096, 2.6), (apart, 4096, 2.6),  # ahead in each placement
        (near, 65536, 10.0),                                        # trails in the same one
        (apart, 1 << 20, 100.0),                                    # no common placement
        (near, 1 << 24, 100.0), (mixed, 1 << 24, 50.0),             # the mixed run left out
        ((201, 201), 1 << 26, 100.0),    # no sample inside: the one at 200 s stands for it
        ((260, 261), 65536, 1.0)]        # none within 1 s (250 s is nan): unknown, left out
    with open(os.path.join(log_dir, "r1.ours.np2.shm.log"), "w") as f:
        for span, size, us in ours_runs:
            print(f"# span {span[0]}.000 {span[1]}.500", file=f)
            line = json.loads(ours("shm", 2, size, us, 0.0))
            line["oop_us"] = None
            print(json.dumps(line), file=f)
    peer_runs = [(near, "4 KiB", 1.2), (near, "4 KiB", 1.2), (apart, "4 KiB", 2.7),
                 (near, "64 KiB", 8.0), (near, "1 MiB", 90.0), (near, "16 MiB", 98.0),
                 (near, "64 MiB", 98.0)]
    with open(os.path.join(log_dir, "r1.peer.mpi.log"), "w") as f:
        for span, human, us in peer_runs:
            print(f"# span {span[0]}.000 {span[1]}.500", file=f)
            print(peer("mpi", "default", 2, human, us, 1.0), file=f)


def check_placement_verdicts(source_root):
    run = compare(source_root, write_placement_logs)
    check(run.returncode == 0, f"with placement: exits 0 (stderr: {run.stderr.strip()[:300]})")
    lines = [line for line in run.stdout.splitlines()
             if line.startswith(("- ok", "- TRAILS", "- UNMATCHED"))]
    for line in lines:
        print("        " + line)

    def one(prefix):
        found = [line for line in lines if prefix in line]
        return found[0] if len(found) == 1 else ""

    small = one("np 2 in place 4 KiB shm")
    check(small.startswith("- ok") and "near (1 vs 2 runs): 1.0 us vs mpi default 1.2 us" in small
          and "apart (2 vs 1 runs): 2.6 us vs mpi default 2.7 us" in small,
          "ahead in each placement: ok, though the medians over all runs (2.6 vs 1.2 us) trail")
    check(one("np 2 in place 64 KiB shm").startswith("- TRAILS"),
          "a peer faster in the same placement trails")
    check(one("np 2 in place 1 MiB shm").startswith("- UNMATCHED")
          and "ours ran apart, the peers near" in one("np 2 in place 1 MiB shm"),
          "no common placement: unmatched, saying where each ran")
    check("near (1 vs 1 runs): 100.0 us vs mpi default 98.0 us" in one("np 2 in place 16 MiB shm"),
          "a run in a mixed placement is left out of the comparison")
    check("near (1 vs 1 runs): 100.0 us vs mpi default 98.0 us" in one("np 2 in place 64 MiB shm"),
          "a span with no sample inside takes the nearest one within a second")
    check(one("np 2 in place 64 KiB shm").startswith("- TRAILS")
          and "ringlet shm: 3 apart, 1 mixed, 4 near, 1 unknown" in run.stdout,
          "a span with no sample within a second is unknown and left out")
    check("every point: 3 of 5 met, 1 trail, 1 unmatched" in run.stdout,
          "the summary counts met, trailing and unmatched points")
    check("45 samples: 22 near, 23 apart" in run.stdout,
          "the placement summary counts the samples, the nan one left out")


def check_empty_placement(source_root):
    """A placement log without a sample (the probe could not run): said, and every result is
    compared as one placement."""
    def no_samples(log_dir):
        with open(os.path.join(log_dir, "placement.log"), "w") as f:
            print("core_probe: needs two CPUs to run on; this process may use 1", file=f)

    run = compare(source_root, write_placement_logs, no_samples)
    check(run.returncode == 0 and "placement.log holds no samples: core_probe: needs two CPUs"
          in run.stdout and "every point: 3 of 5 met, 2 trail" in run.stdout
          and "unmatched" not in run.stdout.split("every point:")[-1].split("(")[0],
          "no samples in the placement log: said, and one placement for all (3 of 5 met)")


def run_group(argv, timeout):
    """Runs argv in a session of its own; on timeout kills the whole group (the ring's children
    too) and returns None."""
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        return None
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


def check_loopback(source_root):
    with tempfile.TemporaryDirectory() as build:
        exe = os.path.join(build, "loopback")
        cc = subprocess.run(["g++", "-O2", "-std=c++17", "-Wall", "-Werror", "-pthread", "-o", exe,
                             os.path.join(source_root, "bench/peers/src/loopback.cc")],
                            capture_output=True, text=True, timeout=120)
        check(cc.returncode == 0, f"loopback.cc compiles without warnings ({cc.stderr[:300]})")
        if cc.returncode != 0:
            return
        run = run_group([exe, "2", "0.3"], timeout=60)
        check(run is not None, "a ring of 2 streams for 0.3 s ends within 60 s")
        if run is None:
            return
        words = run.stdout.split()
        try:
            rates = {k: float(words[words.index(k) + 1])
                     for k in ("mean_GBps", "min_GBps", "max_GBps")}
        except (ValueError, IndexError):
            rates = {}
        check(run.returncode == 0 and words[:2] == ["links", "2"] and bool(rates)
              and 0 < rates["min_GBps"] <= rates["mean_GBps"] <= rates["max_GBps"],
              f"a ring of 2 streams reports positive, ordered rates ({run.stdout.strip()})")
        for bad in (["1", "1"], ["2", "0"], ["2"]):
            r = run_group([exe] + bad, timeout=30)
            check(r is not None and r.returncode == 2 and r.stderr.strip() != "",
                  f"loopback {' '.join(bad)} is refused with exit 2 and a message")


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    check_verdicts(sys.argv[1])
    check_placement_verdicts(sys.argv[1])
    check_empty_placement(sys.argv[1])
    if shutil.which("g++") is None:
        print(f"{len(FAILURES)} failed; skipped: the loopback program (no g++ to build it)")
        return 1 if FAILURES else 77
    check_loopback(sys.argv[1])
    return finish()


if __name__ == "__main__":
    sys.exit(main())

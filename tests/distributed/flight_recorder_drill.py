#!/usr/bin/env python3
"""Flight recorder drill: `RINGLET_FR_DIR=D all_reduce_perf -np 3` over shm, tcp, the emulated
RDMA device and the emulated device's ipc, one rank (rank 1) stopped (SIGSTOP) or killed
(SIGKILL) in mid-run. Each job must fail within its deadline and leave D/rank0*.json and
D/rank2*.json but no rank-1 dump; `ringlet diagnose D`'s first line must name rank 1 and the op's
sequence number the survivors' errors name (all_reduce seq S -> op #S): "never joined ... or
stalled" for the stopped rank, "died" for the killed one. While rank 1 is stopped, `ringlet
status 127.0.0.1:<store port>` must name it on top as not reporting within 2 s and exit 3, and
the survivors' timeout errors must say the same from the status board.
usage: flight_recorder_drill.py RINGLET ALL_REDUCE_PERF
The last line is `N passed, N failed`.
"""
import glob
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "helpers"))
from spawned_ranks import child_pid  # noqa: E402

JOBS = {
    "shm": ({}, ["-t", "shm"]),
    "tcp": ({}, ["-t", "tcp"]),
    "rdma-emu": ({"RINGLET_IB_DEVICE": "emu0"}, ["-t", "rdma"]),
    "emu-ipc": ({}, ["-g", "1", "--device", "emu", "-t", "ipc"]),
}
passed = failed = 0


def check(ok, what):
    global passed, failed
    print(("ok      " if ok else "FAILED  ") + what, flush=True)
    passed, failed = passed + ok, failed + (not ok)


def status_names_stopped(ringlet, port, stopped_at, label):
    """`ringlet status` on the job's store names rank 1 as silent within 2 s of its stop, at the
    top, and exits 3 (stuck for more than --stuck-after 1)."""
    out, status = "", None
    while time.monotonic() - stopped_at < 2.0:
        proc = subprocess.run([ringlet, "status", f"127.0.0.1:{port}", "--stuck-after", "1"],
                              capture_output=True, text=True, timeout=10)
        out, status = proc.stdout + proc.stderr, proc.returncode
        lines = out.splitlines()
        if status == 3 and len(lines) > 1 and lines[1].startswith("  rank 1 (pid") and \
                "has not reported" in lines[1]:
            break
        time.sleep(0.1)
    took = time.monotonic() - stopped_at
    check(took < 2.0, f"{label}: ringlet status named rank 1 on top {took:.2f} s after its stop "
          f"(exit {status}):\n{out}")


def trial(ringlet, perf, name, how):
    env_extra, args = JOBS[name]
    with tempfile.TemporaryDirectory() as d:
        env = dict(os.environ, RINGLET_FR_DIR=d, RINGLET_TIMEOUT="2500", **env_extra)
        job = subprocess.Popen([perf, "-np", "3", "-b", "64K", "-e", "64K", "-n", "1000000",
                                "-w", "1"] + args, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
        victim, argv = child_pid(job.pid, 1)
        label = f"{name}, rank 1 {'stopped' if how == signal.SIGSTOP else 'killed'}"
        if victim is None:
            job.kill()
            check(False, f"{label}: rank 1 never started")
            return
        time.sleep(1.5)  # mid-run
        os.kill(victim, how)
        stopped_at = time.monotonic()
        if how == signal.SIGSTOP:
            status_names_stopped(ringlet, argv[argv.index("--store-port") + 1], stopped_at, label)
        try:
            out, _ = job.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            job.kill()
            out, _ = job.communicate()
            check(False, f"{label}: the job still ran 30 s after the signal")
        finally:
            if how == signal.SIGSTOP:
                try:
                    os.kill(victim, signal.SIGKILL)
                    os.kill(victim, signal.SIGCONT)
                except ProcessLookupError:
                    pass
        check(job.returncode != 0, f"{label}: the job failed (exit {job.returncode})")
        dumps = sorted(os.path.basename(p) for p in glob.glob(os.path.join(d, "rank*.json")))
        check(any(p.startswith("rank0") for p in dumps) and any(p.startswith("rank2") for p in dumps)
              and not any(p.startswith("rank1") for p in dumps),
              f"{label}: the survivors' dumps and none from rank 1 ({dumps})")
        seqs = set(re.findall(r"all_reduce seq (\d+) (?:failed|did not finish)", out))
        diag = subprocess.run([ringlet, "diagnose", d], capture_output=True, text=True)
        first = diag.stdout.splitlines()[0] if diag.stdout else diag.stderr.strip()
        said = re.match(r"rank 1 (never joined op #(\d+)|died: .* in op #(\d+))", first)
        seq = said and (said.group(2) or said.group(3))
        verdict = "never joined" if how == signal.SIGSTOP else "died"
        check(diag.returncode == 0 and said is not None and verdict in first and seq in seqs,
              f"{label}: diagnose's first line names rank 1 and op #{seq} (errors: {sorted(seqs)})"
              f": {first}")
        if how == signal.SIGSTOP:
            check("status board: rank 1 (pid" in out and "has not reported for" in out,
                  f"{label}: the survivors' timeout errors read from the status board that rank 1 "
                  "stopped reporting")
        if failed:
            print(out[-3000:])
            print(diag.stdout[:3000])


def main():
    ringlet, perf = sys.argv[1], sys.argv[2]
    for name in JOBS:
        trial(ringlet, perf, name, signal.SIGSTOP)
    trial(ringlet, perf, "shm", signal.SIGKILL)
    print(f"{passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()

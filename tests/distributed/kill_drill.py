#!/usr/bin/env python3
"""Kill drill: jobs of `ringlet launch` running all_reduce_perf over shm, tcp, the emulated
RDMA device and the emulated device's ipc, each SIGKILLed once at a random moment (0.1-1.5 s in:
set-up, mid-collective), the victim a random worker (rank 0 included) or the launcher. After
each kill, within 15 s:
  - no process of the job remains (the launcher, the workers, their process groups);
  - /dev/shm holds nothing named with a pid of the job (ringlet-shm-<pid>-..., ringlet-ibemu-...);
  - a killed worker is named by the launcher (its rank and SIGKILL).
usage: kill_drill.py RINGLET ALL_REDUCE_PERF [--trials N] [--seed S]
The last line is `N passed, N failed` (trials).
"""
import argparse
import os
import random
import signal
import subprocess
import sys
import time

JOBS = {
    "shm": ({"RINGLET_TRANSPORT": "shm"}, []),
    "tcp": ({"RINGLET_TRANSPORT": "tcp"}, []),
    "rdma-emu": ({"RINGLET_TRANSPORT": "rdma", "RINGLET_IB_DEVICE": "emu0"}, []),
    "emu-ipc": ({}, ["-g", "1", "--device", "emu", "-t", "ipc"]),
}


def children(pid):
    out = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                out += [int(p) for p in f.read().split()]
    except OSError:
        pass
    return out


def rank_of(pid):
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            for item in f.read().split(b"\0"):
                if item.startswith(b"RANK="):
                    return int(item[5:])
    except OSError:
        pass
    return None


def alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[-1][0] != "Z"
    except OSError:
        return False


def group_alive(pgid):
    try:
        os.killpg(pgid, 0)
        return True
    except OSError:
        return False


def leftovers(pids):
    names = [n for n in os.listdir("/dev/shm")
             if any(n.startswith(f"ringlet-shm-{p}-") or n.startswith(f"ringlet-ibemu-{p}-")
                    for p in pids)]
    return names


def trial(ringlet, perf, kind, rng):
    env_extra, extra_args = JOBS[kind]
    nproc = 2 if kind == "emu-ipc" else 3
    cmd = [ringlet, "launch", "--nproc-per-node", str(nproc), perf, "-b", "256K", "-e", "256K",
           "-n", "200000", "-w", "1"] + extra_args
    launcher = subprocess.Popen(cmd, env=dict(os.environ, **env_extra), stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, start_new_session=True)
    time.sleep(rng.uniform(0.1, 1.5))
    workers = []
    for _ in range(50):  # the workers are started (and exec'd) within 5 s
        workers = [p for p in children(launcher.pid) if rank_of(p) is not None]
        if len(workers) == nproc or launcher.poll() is not None:
            break
        time.sleep(0.1)
    if launcher.poll() is not None or not workers:
        launcher.kill()
        out = launcher.communicate()[0].decode(errors="replace")
        return f"the job was not running when the kill came: {out[-300:]}"
    victim = rng.choice(workers + [launcher.pid])
    victim_rank = rank_of(victim) if victim != launcher.pid else None
    job_pids = [launcher.pid] + workers
    os.kill(victim, signal.SIGKILL)
    try:
        out = launcher.communicate(timeout=15)[0].decode(errors="replace")
    except subprocess.TimeoutExpired:
        for p in job_pids:
            try:
                os.killpg(p, signal.SIGKILL)
            except OSError:
                pass
        launcher.kill()
        return "the launcher did not exit within 15 s of the kill"
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        running = [p for p in workers if alive(p) or group_alive(p)]
        left = leftovers(job_pids)
        if not running and not left:
            break
        time.sleep(0.1)
    else:
        return f"15 s after the kill: processes {running}, /dev/shm {left}"
    who = "the launcher" if victim_rank is None else f"rank {victim_rank}"
    if victim_rank is not None and not (f"rank {victim_rank} " in out and "SIGKILL" in out):
        return f"{who} was killed but the launcher did not name it: {out[-400:]}"
    return None, who


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("ringlet")
    parser.add_argument("perf")
    parser.add_argument("--trials", type=int, default=32)
    parser.add_argument("--seed", type=int, default=int(time.time()))
    a = parser.parse_args()
    if a.trials < 1 or a.trials > 1000:
        parser.error("--trials must be in [1, 1000]")
    print(f"kill drill: {a.trials} trials, seed {a.seed}")
    rng = random.Random(a.seed)
    kinds = list(JOBS)
    passed = failed = 0
    for i in range(a.trials):
        kind = kinds[i % len(kinds)]
        result = trial(a.ringlet, a.perf, kind, rng)
        if isinstance(result, tuple):
            passed += 1
            print(f"ok   trial {i + 1} ({kind}): killed {result[1]}; nothing left")
        else:
            failed += 1
            print(f"FAIL trial {i + 1} ({kind}): {result}")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Kill drill: jobs of all_reduce_perf over shm, tcp, the emulated RDMA device and the emulated
device's ipc, started by `ringlet launch` or by all_reduce_perf -np (rank 0 spawns the others),
each SIGKILLed once at a random moment (0.1-1.5 s in: set-up, mid-collective), the victim a
random rank (rank 0 included) or the launcher. After each kill, within 15 s:
  - no process of the job remains (the launcher, the ranks, the workers' process groups);
  - /dev/shm holds nothing named with a pid of the job (ringlet-shm-<pid>-..., ringlet-ibemu-...);
  - the dead is named: a killed worker by the launcher (its rank and SIGKILL), a killed -np rank
    by rank 0, and a killed rank 0 of -np by every other rank. (The workers of a killed launcher
    die with it, by SIGKILL: they cannot speak.)
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
    "np-rdma-emu": ({"RINGLET_TRANSPORT": "rdma", "RINGLET_IB_DEVICE": "emu0"}, ["-np", "3"]),
    "np-shm": ({"RINGLET_TRANSPORT": "shm"}, ["-np", "3"]),
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
    """A launched worker's RANK, or an -np rank's --child-rank; None for anything else."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            args = f.read().split(b"\0")
        if b"--child-rank" in args:
            return int(args[args.index(b"--child-rank") + 1])
        with open(f"/proc/{pid}/environ", "rb") as f:
            for item in f.read().split(b"\0"):
                if item.startswith(b"RANK="):
                    return int(item[5:])
    except (OSError, ValueError, IndexError):
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
    spawned = "-np" in extra_args  # rank 0 is the first process and spawns the others
    nproc = 2 if kind == "emu-ipc" else 3
    bench = [perf, "-b", "256K", "-e", "256K", "-n", "200000", "-w", "1"] + extra_args
    cmd = bench if spawned else [ringlet, "launch", "--nproc-per-node", str(nproc)] + bench
    want = nproc - 1 if spawned else nproc
    launcher = subprocess.Popen(cmd, env=dict(os.environ, **env_extra), stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, start_new_session=True)
    time.sleep(rng.uniform(0.1, 1.5))
    workers = []
    for _ in range(50):  # the workers are started (and exec'd) within 5 s
        workers = [p for p in children(launcher.pid) if rank_of(p) is not None]
        if len(workers) == want or launcher.poll() is not None:
            break
        time.sleep(0.1)
    if launcher.poll() is not None or not workers:
        launcher.kill()
        out = launcher.communicate()[0].decode(errors="replace")
        return f"the job was not running when the kill came: {out[-300:]}"
    victim = rng.choice(workers + [launcher.pid])
    victim_rank = rank_of(victim) if victim != launcher.pid else (0 if spawned else None)
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
    groups = [launcher.pid] if spawned else workers
    while time.monotonic() < deadline:
        running = [p for p in workers if alive(p)] + [g for g in groups if group_alive(g)]
        left = leftovers(job_pids)
        if not running and not left:
            break
        time.sleep(0.1)
    else:
        return f"15 s after the kill: processes {running}, /dev/shm {left}"
    who = "the launcher" if victim_rank is None else f"rank {victim_rank}"
    if spawned and victim_rank == 0:
        named = out.count(f"rank 0 (pid {victim}), which started this rank, died") == nproc - 1
    elif spawned:
        named = f"rank {victim_rank} (pid {victim}) was killed by signal 9" in out
    else:
        named = victim_rank is None or (f"rank {victim_rank} " in out and "SIGKILL" in out)
    if not named:
        return f"{who} (pid {victim}) was killed but not named: {out[-400:]}"
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

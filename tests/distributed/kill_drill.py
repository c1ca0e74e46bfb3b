#!/usr/bin/env python3
"""Kill drill: jobs of all_reduce_perf over shm, tcp, the emulated RDMA device and the emulated
device's ipc, started by `ringlet launch` or by all_reduce_perf -np (rank 0 spawns the others),
each SIGKILLed once at a random moment (0.1-1.5 s in: set-up, mid-collective; every fourth job
a short one, killed when rank 0 has its result: teardown, where the others may have ended
and only the cleanup is checked), the victim a random rank (rank 0
included) or the launcher. After each kill, within 15 s:
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
import threading
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


class Output:
    """The job's merged output, read by a thread; `summary` is set once rank 0 printed its result
    line (the JSON record of the size): the ranks are about to tear down."""

    def __init__(self, stream):
        self.lines = []
        self.summary = threading.Event()
        self.thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self.thread.start()

    def _read(self, stream):
        for raw in stream:
            line = raw.decode(errors="replace")
            self.lines.append(line)
            if '"bench":"all_reduce_perf"' in line:
                self.summary.set()

    def text(self):
        self.thread.join(timeout=5)
        return "".join(self.lines)


def start_job(ringlet, perf, kind, teardown):
    env_extra, extra_args = JOBS[kind]
    spawned = "-np" in extra_args  # rank 0 is the first process and spawns the others
    nproc = 2 if kind == "emu-ipc" else 3
    iters = "1000" if teardown else "200000"
    bench = [perf, "-b", "256K", "-e", "256K", "-n", iters, "-w", "1"] + extra_args
    cmd = bench if spawned else [ringlet, "launch", "--nproc-per-node", str(nproc)] + bench
    job = subprocess.Popen(cmd, env=dict(os.environ, **env_extra), stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, start_new_session=True)
    return job, spawned, (nproc - 1 if spawned else nproc)


def trial(ringlet, perf, kind, rng, teardown):
    started = time.monotonic()
    launcher, spawned, want = start_job(ringlet, perf, kind, teardown)
    output = Output(launcher.stdout)
    workers = []
    for _ in range(100):  # the workers are started (and exec'd) within 10 s
        workers = [p for p in children(launcher.pid) if rank_of(p) is not None]
        if len(workers) == want or launcher.poll() is not None:
            break
        time.sleep(0.05)
    if teardown:  # the moment rank 0 has its result: the ranks are tearing down
        output.summary.wait(timeout=30)
    else:
        time.sleep(max(0.0, rng.uniform(0.1, 1.5) - (time.monotonic() - started)))
    living = [p for p in workers if alive(p)]
    if not workers or launcher.poll() is not None:
        launcher.kill()
        launcher.wait()
        if not workers and not teardown:
            return f"no worker seen running: {output.text()[-300:]}"
        victim = None  # the job had ended: nothing to kill, nothing may be left
    else:
        victim = rng.choice(living + [launcher.pid])
    victim_rank = None if victim is None else (
        rank_of(victim) if victim != launcher.pid else (0 if spawned else None))
    job_pids = [launcher.pid] + workers
    if victim is not None:
        try:
            os.kill(victim, signal.SIGKILL)
        except ProcessLookupError:  # it exited between the check above and the kill
            if not teardown:
                launcher.kill()
                return f"{victim} exited before it was killed: {output.text()[-300:]}"
            victim = None  # the job ended by itself while tearing down: only cleanup is checked
    try:
        launcher.wait(timeout=15)
    except subprocess.TimeoutExpired:
        for p in job_pids:
            try:
                os.killpg(p, signal.SIGKILL)
            except OSError:
                pass
        launcher.kill()
        return f"the launcher did not exit within 15 s of the kill: {output.text()[-600:]}"
    out = output.text()
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
    if victim is None:
        return None, "nobody (the job had ended)"
    who = "the launcher" if victim_rank is None else f"rank {victim_rank}"
    if spawned and victim_rank == 0:
        named = all(f"(rank {r}): rank 0 (pid {victim}), which started this rank, died" in out
                    for r in range(1, want + 1))
    elif spawned:
        named = f"rank {victim_rank} (pid {victim}) was killed by signal 9" in out
    elif victim_rank is not None:
        named = f"rank {victim_rank} (pid {victim}) failed with signal 9 (SIGKILL)" in out
    else:
        named = True  # the workers of a killed launcher die with it (SIGKILL): none can speak
    if teardown:
        named = True  # the others may have finished already: only the cleanup is checked
    if not named:
        return f"{who} (pid {victim}) was killed but not named: {out[-400:]}"
    return None, who + (" in teardown" if teardown else "")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("ringlet")
    parser.add_argument("perf")
    parser.add_argument("--trials", type=int, default=40)
    parser.add_argument("--seed", type=int, default=int(time.time()))
    a = parser.parse_args()
    if a.trials < 1 or a.trials > 1000:
        parser.error("--trials must be in [1, 1000]")
    print(f"kill drill: {a.trials} trials, seed {a.seed}")
    rng = random.Random(a.seed)
    kinds = list(JOBS)
    passed = failed = kills = 0
    for i in range(a.trials):
        kind = kinds[i % len(kinds)]
        result = trial(a.ringlet, a.perf, kind, rng, teardown=i % 4 == 3)
        if isinstance(result, tuple):
            passed += 1
            kills += not result[1].startswith("nobody")
            print(f"ok   trial {i + 1} ({kind}): killed {result[1]}; nothing left")
        else:
            failed += 1
            print(f"FAIL trial {i + 1} ({kind}): {result}")
    print(f"{kills} SIGKILLs in {a.trials} trials (every fourth in teardown, where the job may"
          " end first)")
    regular = a.trials - a.trials // 4
    if kills < regular:
        failed += 1
        print(f"FAIL only {kills} SIGKILLs for {regular} jobs killed mid-run")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

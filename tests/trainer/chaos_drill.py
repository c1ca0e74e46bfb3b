#!/usr/bin/env python3
"""Chaos drill: trials of a small multi-rank `ringlet train --nproc N --max_restarts 3`, each
disturbed once at a random moment, must all end like an undisturbed run, bit for bit.

Each trial picks N in --ranks, a victim (a random worker rank, or the launcher), a signal
(SIGKILL, or SIGSTOP) and a moment (a random fraction of an epoch after a random number of
recorded epochs, or while a checkpoint is being written: its temporary file exists; a moment
that comes after the run's end is drawn again). Then:
  - a killed worker: the launcher restarts every worker from the last checkpoint;
  - a stopped worker: the others fail at the collective deadline (RINGLET_TIMEOUT) naming it,
    the launcher kills it and restarts every worker;
  - a killed launcher: its workers die with it (no orphan may remain), and the same command
    with --resume finishes the run (without --resume when the run had not recorded itself yet);
  - a stopped launcher: it is continued after a random pause and finishes.
Every trial must end within its deadline (a hang is a failure: everything is killed), exit 0,
leave a readable checkpoint after the disturbance and at the end, record epochs 1..E exactly
once in metrics.jsonl, leave no temporary file and no process behind, and end with a checkpoint
equal, tensor for tensor and bit for bit (and in epoch and step), to the undisturbed run's.

usage: chaos_drill.py RINGLET [--trials N] [--seed S] [--ranks 2,3,4] [--keep DIR]
meson runs 6 trials (`meson test chaos_drill`); the longer drill is --trials 50.
The last line is `N passed, N failed` (trials).
"""
import argparse
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import run_files

EPOCHS = 4
RUN_ARGS = ["--epochs", str(EPOCHS), "--limit_train", "1024", "--limit_test", "100",
            "--threads", "1", "--workers", "1", "--log_every", "1000", "--max_restarts", "3"]
ENV = {"RINGLET_TIMEOUT": "3000",  # ms: a stopped rank is noticed within 3 s
       "RINGLET_RDZV_TIMEOUT": "10"}  # s: a rank stopped before it joined, within 10 s
TRIAL_DEADLINE = 90.0  # seconds for each command of a trial (> rendezvous + grace + run)


class TrialFailure(Exception):
    pass


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("ringlet")
    p.add_argument("--trials", type=int, default=6)
    p.add_argument("--seed", type=int, default=None, help="default: from the time, printed")
    p.add_argument("--ranks", default="2,3,4")
    p.add_argument("--keep", default=None, help="keep the run directories here")
    args = p.parse_args()
    if args.trials < 1 or args.trials > 10000:
        p.error("--trials must be in [1, 10000]")
    args.ranks = [int(r) for r in args.ranks.split(",")]
    if any(r < 2 or r > 8 for r in args.ranks):
        p.error("--ranks takes counts in [2, 8]")
    return args


# ---- processes -----------------------------------------------------------------------------

def start(ringlet, nproc, out, log, resume=False):
    cmd = [ringlet, "train", "--nproc", str(nproc), "--out", str(out)] + RUN_ARGS
    if resume:
        cmd.append("--resume")
    env = dict(os.environ, **ENV)
    return subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env,
                            start_new_session=True)


def send(pid, sig):
    """Sends `sig` to `pid`; False when the process is already gone."""
    try:
        os.kill(pid, sig)
        return True
    except ProcessLookupError:
        return False


def kill_everything(out):
    for pid in run_files.processes_of(out):
        send(pid, signal.SIGKILL)


def describe_processes(out):
    parts = []
    for pid, rank in sorted(run_files.processes_of(out).items()):
        try:
            state = Path("/proc", str(pid), "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            state = "?"
        parts.append(f"{'launcher' if rank is None else f'rank {rank}'} pid {pid} state {state}")
    return ", ".join(parts) or "none"


def wait_for(proc, what, out):
    try:
        return proc.wait(timeout=TRIAL_DEADLINE)
    except subprocess.TimeoutExpired:
        alive = describe_processes(out)
        kill_everything(out)
        proc.wait()
        raise TrialFailure(f"{what} did not end within {TRIAL_DEADLINE:.0f} s (a hang; "
                           f"processes: {alive})")


def wait_until_gone(out, seconds):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if not run_files.processes_of(out):
            return True
        time.sleep(0.05)
    return False


# ---- files ---------------------------------------------------------------------------------

def read_checkpoint(path):
    try:
        return run_files.read_checkpoint(path)
    except run_files.Unreadable as e:
        raise TrialFailure(str(e))


def check_readable(out, when):
    path = out / "checkpoint.safetensors"
    if path.exists():
        read_checkpoint(path)
    return f"checkpoint readable {when}" if path.exists() else f"no checkpoint yet {when}"


def temp_files(out, prefix="."):
    """Temporary files of atomic writes in `out` (of checkpoint writes only, with that prefix)."""
    if not out.exists():
        return []
    return sorted(p.name for p in out.iterdir() if p.name.startswith(prefix) and ".tmp." in p.name)


CHECKPOINT_TEMP = ".checkpoint.safetensors.tmp."


def check_final(out, reference):
    epochs = run_files.recorded_epochs(out)
    if epochs != list(range(1, EPOCHS + 1)):
        raise TrialFailure(f"metrics.jsonl records epochs {epochs}, not 1..{EPOCHS} once each")
    difference = run_files.difference(read_checkpoint(out / "checkpoint.safetensors"), reference)
    if difference:
        raise TrialFailure(f"the checkpoint differs from the undisturbed run's: {difference}")
    if temp_files(out):
        raise TrialFailure(f"temporary files left: {temp_files(out)}")
    if not wait_until_gone(out, 10):
        raise TrialFailure(f"processes left running: {run_files.processes_of(out)}")


# ---- a trial -------------------------------------------------------------------------------

def wait_for_moment(rng, proc, out, plan, length):
    """Sleeps until the trial's moment; returns a description of it."""
    if plan["moment"] == "random":
        # Anchored on progress, so that a slow machine still sees the moment inside the run:
        # once `done` epochs are recorded, a random fraction of an epoch later (done = 0: of
        # the start-up too).
        done = rng.randint(0, EPOCHS - 1)
        fraction = rng.uniform(0.0, 0.8)
        metrics = out / "metrics.jsonl"
        while proc.poll() is None and done > 0 and (
                not metrics.exists() or len(metrics.read_text().splitlines()) < done):
            time.sleep(0.005)
        end = time.monotonic() + fraction * length / (EPOCHS if done > 0 else 2)
        while time.monotonic() < end and proc.poll() is None:
            time.sleep(0.005)
        return f"{fraction:.2f} of an epoch after epoch {done}" if done else \
            f"{fraction * length / 2:.2f} s after the start"
    # The k-th checkpoint write: its temporary file exists.
    k = rng.randint(1, EPOCHS)
    seen = set()
    end = time.monotonic() + 3 * length
    while time.monotonic() < end and proc.poll() is None:
        names = set(temp_files(out, CHECKPOINT_TEMP))
        if names - seen:
            seen |= names
            if len(seen) >= k:
                return f"while writing checkpoint {len(seen)}"
        time.sleep(0.0005)
    return "at the end (no checkpoint write was seen)"


def disturb(rng, proc, out, plan):
    """Sends the signal; returns the victim's description, or None when the run had ended."""
    live = run_files.processes_of(out)
    if proc.poll() is not None:
        return None
    if plan["victim"] == "launcher":
        pid, who = proc.pid, "the launcher"
    else:
        workers = {rank: pid for pid, rank in live.items() if rank is not None}
        if not workers:
            return None
        rank = rng.choice(sorted(workers))
        pid, who = workers[rank], f"rank {rank}"
    if not send(pid, plan["signal"]):
        return None  # it exited between the look and the signal: the run is ending
    return f"{who} (pid {pid})"


def trial(args, rng, index, work, references, lengths):
    plan = {"nproc": rng.choice(args.ranks),
            "victim": rng.choice(["rank", "rank", "launcher"]),
            "signal": rng.choice([signal.SIGKILL, signal.SIGSTOP]),
            "moment": rng.choice(["random", "checkpoint"])}
    out = work / f"trial{index:03d}"
    log_path = work / f"trial{index:03d}.log"
    steps = []
    try:
        # A moment drawn past the run's end disturbs nothing: draw another (3 tries).
        for attempt in range(3):
            if attempt > 0:
                steps.append("the run had ended before the moment: again")
                shutil.rmtree(out)
            if run_trial(args, rng, plan, out, log_path, steps, references, lengths):
                break
        else:
            raise TrialFailure("the run ended before each of 3 moments drawn: nothing disturbed")
    except TrialFailure as e:
        raise TrialFailure(f"{e}; the trial: {plan['nproc']} ranks; " + "; ".join(steps))
    return plan["nproc"], steps


def run_trial(args, rng, plan, out, log_path, steps, references, lengths):
    """One run of the trial; False when the run had ended before the moment came."""
    with open(log_path, "w") as log:
        proc = start(args.ringlet, plan["nproc"], out, log)
        started = time.monotonic()
        steps.append(wait_for_moment(rng, proc, out, plan, lengths[plan["nproc"]]))
        victim = disturb(rng, proc, out, plan)
        if victim is None:  # an undisturbed run, which must still end like one
            if wait_for(proc, "the run", out) != 0:
                raise TrialFailure(f"an undisturbed run failed (log {log_path})")
            check_final(out, references[plan["nproc"]])
            return False
        steps.append(f"{signal.Signals(plan['signal']).name} {victim}")
        if temp_files(out, CHECKPOINT_TEMP):
            steps.append("a checkpoint was being written")
        if plan["signal"] == signal.SIGSTOP and plan["victim"] == "launcher":
            pause = rng.uniform(0.5, 3.0)
            time.sleep(pause)
            send(proc.pid, signal.SIGCONT)
            steps.append(f"SIGCONT after {pause:.1f} s")
        status = wait_for(proc, "the run", out)
        steps.append(check_readable(out, "after the disturbance"))
        if plan["victim"] == "launcher" and plan["signal"] == signal.SIGKILL:
            if not wait_until_gone(out, 10):
                raise TrialFailure(f"workers outlived their launcher: {run_files.processes_of(out)}")
            recorded = (out / "config.json").exists()
            steps.append("--resume" if recorded else "rerun (nothing recorded yet)")
            proc = start(args.ringlet, plan["nproc"], out, log, resume=recorded)
            status = wait_for(proc, "the resumed run", out)
        if status != 0:
            raise TrialFailure(f"exit status {status} (log {log_path})")
        check_final(out, references[plan["nproc"]])
        steps.append(f"bit for bit after {time.monotonic() - started:.1f} s")
        return True


def reference_runs(args, work):
    references, lengths = {}, {}
    for n in sorted(set(args.ranks)):
        out = work / f"undisturbed{n}"
        with open(work / f"undisturbed{n}.log", "w") as log:
            started = time.monotonic()
            status = wait_for(start(args.ringlet, n, out, log), f"the undisturbed {n}-rank run",
                              out)
        lengths[n] = time.monotonic() - started
        if status != 0:
            raise TrialFailure(f"the undisturbed {n}-rank run failed with status {status}")
        references[n] = read_checkpoint(out / "checkpoint.safetensors")
        print(f"undisturbed {n}-rank run: {lengths[n]:.1f} s", flush=True)
    return references, lengths


def main():
    args = parse_args()
    seed = args.seed if args.seed is not None else int(time.time()) % 100000
    rng = random.Random(seed)
    print(f"chaos drill: {args.trials} trials, ranks {args.ranks}, seed {seed} "
          f"(repeat with --seed {seed})", flush=True)
    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="ringlet_chaos_"))
    work.mkdir(parents=True, exist_ok=True)
    passed = failed = 0
    try:
        references, lengths = reference_runs(args, work)
        for i in range(args.trials):
            try:
                nproc, steps = trial(args, rng, i, work, references, lengths)
                passed += 1
                print(f"trial {i + 1:3d} ({nproc} ranks): ok: " + "; ".join(steps), flush=True)
            except TrialFailure as e:
                failed += 1
                print(f"trial {i + 1:3d}: FAILED: {e}", flush=True)
            except Exception as e:  # the drill's own error (a file it expected, ...): a failure
                failed += 1
                print(f"trial {i + 1:3d}: FAILED: {type(e).__name__}: {e}", flush=True)
    except Exception as e:
        failed += 1
        print(f"chaos drill: FAILED: {type(e).__name__}: {e}", flush=True)
    finally:
        for out in work.iterdir():
            if out.is_dir():
                kill_everything(out)
        if not args.keep and failed == 0:
            subprocess.run(["rm", "-rf", str(work)], check=False)
        elif failed:
            print(f"chaos drill: the runs and their logs are in {work}")
    print(f"{passed} passed, {failed} failed")
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())

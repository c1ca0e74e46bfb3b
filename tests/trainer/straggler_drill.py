#!/usr/bin/env python3
"""Straggler drill: `ringlet train --nproc 2` with rank 1 slowed from outside (SIGSTOP and
SIGCONT in turn, 60 ms of every 100, as a noisy neighbour would). While it trains, `ringlet status
RUN_DIR` reads the job's status board (exit 0 or 3, every rank listed) and `--dump` has every
rank write its flight recorder into RUN_DIR/flight_recorder; then a progress line
must name rank 1 as the straggler keeping the others waiting, steps.jsonl must carry every rank's
"waited_for_ms" and "straggler": 1, and `ringlet report` must draw the waiting per rank.
usage: straggler_drill.py RINGLET
The last line is `N passed, N failed`.
"""
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run_files  # noqa: E402

RUN_ARGS = ["--nproc", "2", "--epochs", "1", "--limit_train", "3072", "--limit_test", "100",
            "--threads", "1", "--workers", "1", "--log_every", "6"]
passed = failed = 0


def check(ok, what):
    global passed, failed
    print(("ok      " if ok else "FAILED  ") + what, flush=True)
    passed, failed = passed + ok, failed + (not ok)


def rank_pid(out, rank, job):
    """The pid of the worker of `rank` training into `out` (within 30 s)."""
    for _ in range(300):
        for pid, r in run_files.processes_of(out).items():
            if r == rank:
                return pid
        if job.poll() is not None:
            return None
        time.sleep(0.1)
    return None


def slow_down(pid, done):
    """SIGSTOP for 60 ms, SIGCONT for 40 ms, until `done` is set or the process is gone."""
    try:
        while not done.is_set():
            os.kill(pid, signal.SIGSTOP)
            time.sleep(0.06)
            os.kill(pid, signal.SIGCONT)
            time.sleep(0.04)
    except ProcessLookupError:
        pass
    finally:
        try:
            os.kill(pid, signal.SIGCONT)
        except ProcessLookupError:
            pass


def status_while_training(ringlet, out, job):
    """`ringlet status RUN_DIR` once the run's store note is there: every rank listed."""
    note = Path(out) / "store"
    for _ in range(300):
        if note.exists() or job.poll() is not None:
            break
        time.sleep(0.1)
    proc = subprocess.run([ringlet, "status", str(out)], capture_output=True, text=True,
                          timeout=30)
    text = proc.stdout + proc.stderr
    check(proc.returncode in (0, 3) and "communicator train (2 ranks):" in text and
          "rank 0 (pid" in text and "rank 1 (pid" in text,
          f"ringlet status RUN_DIR while training lists both ranks (exit {proc.returncode}):\n{text}")
    proc = subprocess.run([ringlet, "status", str(out), "--dump"], capture_output=True, text=True,
                          timeout=30)
    check(proc.returncode == 0 and "asked every rank of train" in proc.stdout,
          f"ringlet status RUN_DIR --dump asks for dumps: {proc.stdout}{proc.stderr}")


def main():
    ringlet = sys.argv[1]
    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / "run"
        job = subprocess.Popen([ringlet, "train", "--out", str(out)] + RUN_ARGS,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               env=dict(os.environ, RINGLET_TIMEOUT="20000"),
                               start_new_session=True)
        lines = []
        reader = threading.Thread(target=lambda: lines.extend(job.stdout), daemon=True)
        reader.start()
        victim = rank_pid(out, 1, job)
        check(victim is not None, "rank 1 started")
        status_while_training(ringlet, out, job)
        done = threading.Event()
        slower = threading.Thread(target=slow_down, args=(victim, done), daemon=True)
        if victim is not None:
            slower.start()
        try:
            job.wait(timeout=300)
        except subprocess.TimeoutExpired:
            os.killpg(job.pid, signal.SIGKILL)
            job.wait()
        done.set()
        reader.join(timeout=10)
        text = "".join(lines)
        check(job.returncode == 0, f"the run finished (exit {job.returncode})")
        named = [line for line in text.splitlines() if "straggler: rank 1 keeps the others" in line]
        check(bool(named), "a progress line names rank 1 as the straggler: " +
              (named[0] if named else f"none in:\n{text[-3000:]}"))
        records = [json.loads(line) for line in (out / "steps.jsonl").read_text().splitlines()]
        waited = [r for r in records if len(r.get("waited_for_ms", [])) == 2]
        check(len(waited) == len(records) and any(r.get("straggler") == 1 for r in records),
              f"steps.jsonl: waited_for_ms per rank in {len(waited)} of {len(records)} records, "
              f"straggler 1 in {sum(r.get('straggler') == 1 for r in records)}")
        check(not (out / "store").exists(), "the run's store note is gone after the run")
        dumps = sorted(p.name for p in (out / "flight_recorder").glob("rank*.json")) \
            if (out / "flight_recorder").exists() else []
        check(dumps == ["rank0.train.json", "rank1.train.json"],
              f"every rank dumped its flight recorder on request: {dumps}")
        report = subprocess.run([ringlet, "report", str(out), "--output", str(Path(d) / "r.html")],
                                capture_output=True, text=True, timeout=60)
        html = (Path(d) / "r.html").read_text() if report.returncode == 0 else report.stderr
        check("Waiting for each rank" in html and "straggler: rank 1 in" in html,
              "ringlet report draws the waiting per rank and names rank 1")
        if failed:
            print(text[-4000:])
    print(f"{passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()

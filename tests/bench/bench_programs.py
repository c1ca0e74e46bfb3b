#!/usr/bin/env python3
"""The nccl-tests-style benchmark programs, end to end (a `meson test`).

usage: bench_programs.py BUILD_DIR ringlet|nccl

ringlet: all_reduce_perf and its siblings with -np 2/3 on host and emulated-device buffers
(ipc and staged over tcp), every dtype x op for all_reduce: each prints nccl-tests' table with
#wrong 0 in every row and "Out of bounds values : 0 OK"; --corrupt (one spoiled element per
check) must make the run fail, so the check is shown to catch a wrong result. Device buffers
over ipc (device flags), ranks as processes and as threads (--threads): the host-work lines after
the table say 0 host waits and 0 host messages per op at every size. --model's column is what
`ringlet model predict` simulates for the algorithm that ran, '-' for a collective it does not.
A rank that -np spawns holds none of rank 0's sockets or pipes but stdin, stdout and stderr.

nccl: the NCCL peer programs print the same table with #wrong 0 when this machine has a GPU
per rank; where it has not, they must fail with the sentence that says so, and the test exits
77 (meson's SKIP) naming why.
"""
import json
import os
import re
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "helpers"))
from spawned_ranks import child_pid  # noqa: E402

COLUMNS = ("size count type redop root time algbw busbw #wrong time algbw busbw #wrong").split()
SKIP = 77


def run(build, program, args, timeout=120, env=None):
    cmd = [f"{build}/bench/{program}", *args]
    full_env = None if env is None else {**os.environ, **env}
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=full_env)
    return " ".join(cmd[-len(args) - 1:]), proc


def rows(out):
    """The table's result rows: 13 fields, the first two integers."""
    found = []
    for line in out.splitlines():
        fields = line.split()
        if len(fields) == 13 and fields[0].isdigit() and fields[1].isdigit():
            found.append(fields)
    return found


def check_table(what, proc, expected_rows):
    out = proc.stdout
    problems = []
    if proc.returncode != 0:
        problems.append(f"exit status {proc.returncode}: {proc.stderr.strip()[-400:]}")
    header = [l for l in out.splitlines() if l.startswith("#") and "size" in l and "redop" in l]
    if not header or header[0].split()[1:] != COLUMNS:
        problems.append("no nccl-tests column header")
    table = rows(out)
    if len(table) != expected_rows:
        problems.append(f"{len(table)} result rows, expected {expected_rows}")
    wrong = [r for r in table if r[8] != "0" or r[12] != "0"]
    if wrong:
        problems.append(f"rows with wrong results: {wrong[:3]}")
    if "# Out of bounds values : 0 OK" not in out:
        problems.append("no 'Out of bounds values : 0 OK' line")
    return [f"{what}: {p}" for p in problems]


def ringlet(build):
    sizes = ["-b", "1K", "-e", "64K", "-f", "64", "-n", "5", "-w", "2"]  # 2 sizes
    cases = [
        ("all_reduce_perf", ["-np", "2", "-g", "1", "-d", "all", "-o", "all"], 2 * 6 * 5),
        ("all_reduce_perf", ["-np", "3", "-g", "1", "-t", "tcp", "-d", "float", "-o", "all"], 10),
        ("all_reduce_perf", ["-np", "2", "-d", "all", "-o", "sum"], 2 * 6),
        ("all_reduce_perf", ["-np", "2", "--warmup-time", "0.05"], 2),
        ("all_gather_perf", ["-np", "3", "-g", "1", "-d", "all"], 2 * 6),
        ("reduce_scatter_perf", ["-np", "2", "-g", "1", "-t", "shm", "-o", "all"], 2 * 5),
        ("broadcast_perf", ["-np", "3", "-g", "1", "-r", "2"], 2),
    ]
    problems = []
    for program, args, expected in cases:
        what, proc = run(build, program, args + sizes)
        problems += check_table(what, proc, expected)
        print(f"{what}: {len(rows(proc.stdout))} rows, status {proc.returncode}")
    what, proc = run(build, "all_reduce_perf", ["-np", "2", "-g", "1", "--corrupt"] + sizes)
    if proc.returncode == 0 or "FAILED" not in proc.stdout:
        problems.append(f"{what}: a spoiled result was not reported (status {proc.returncode})")
    print(f"{what}: status {proc.returncode} (must fail)")
    return problems + host_work(build, sizes) + what_ran(build)


HOST_WORK = re.compile(r"^# +(\d+) +([\d.]+) +([\d.]+) \| +([\d.]+) +([\d.]+)$", re.M)


def host_work(build, sizes):
    """Device all-reduces over ipc with device flags: no host wait or message per op."""
    problems = []
    for mode in ([], ["--threads"]):
        args = ["-np", "3", *mode, "-g", "1", "--device", "emu", "-t", "ipc"] + sizes
        what, proc = run(build, "all_reduce_perf", args)
        problems += check_table(what, proc, 2)
        found = HOST_WORK.findall(proc.stdout)
        busy = [r for r in found if any(float(v) != 0 for v in r[1:])]
        if len(found) != 2 or busy:
            problems.append(f"{what}: host work per op {found} (expected 2 rows of zeros)")
        print(f"{what}: host work per op {found}")
    return problems


DEBUG_CHOICE = re.compile(r"rank (\d+): all_reduce of (\d+) bytes \(f32, sum\) runs (\w+) over (\S+)")


def what_ran(build):
    """The header names the transports the ranks' connections use (auto resolved), the
    "# Algorithm:" line and each JSON row's "algo" name the algorithm each size ran, and
    RINGLET_LOG=debug logs the same choice for every all_reduce issued."""
    sizes = ["-b", "1K", "-e", "16M", "-f", "32", "-n", "2", "-w", "1", "-d", "float", "-o", "sum"]
    problems = []
    for transport, env in (("shm", {}), ("tcp", {}), ("shm", {"RINGLET_ALGO": "ring"})):
        args = ["-np", "2"] + (["-t", "tcp"] if transport == "tcp" else []) + sizes
        what, proc = run(build, "all_reduce_perf", args, env={"RINGLET_LOG": "debug", **env})
        what = " ".join(f"{k}={v}" for k, v in env.items()) + (" " if env else "") + what
        out = proc.stdout
        ranks = [l for l in out.splitlines() if l.startswith("#  Rank")]
        if len(ranks) != 2 or not all(f"[{transport}]" in l for l in ranks):
            problems.append(f"{what}: the rank lines do not name [{transport}]: {ranks}")
        algos = {}
        for line in out.splitlines():
            if line.startswith("{"):
                row = json.loads(line)
                algos[row["size"]] = row.get("algo")
        logged = {}
        for rank, size, algo, over in DEBUG_CHOICE.findall(proc.stderr):
            logged.setdefault(int(size), set()).add(algo)
            if over != transport:
                problems.append(f"{what}: rank {rank} logged its all_reduce over {over}")
        if len(algos) != 3 or any(logged.get(size) != {algo} for size, algo in algos.items()):
            problems.append(f"{what}: rows' algorithms {algos}, logged {logged}")
        expected = {"ring"} if env else ({"rd", "ring"} if transport == "tcp" else None)
        names = set(algos.values())
        if (expected is not None and names != expected) or (expected is None and len(names) < 2):
            problems.append(f"{what}: algorithms {sorted(names)} (expected {expected or 'two'})")
        summary = next((l for l in out.splitlines() if l.startswith("# Algorithm: ")), "")
        if not summary or [w for w in re.findall(r"(\w+) \(", summary)] != ordered(algos):
            problems.append(f"{what}: '# Algorithm:' line {summary!r} for rows {algos}")
        print(f"{what}: {summary[2:]}; ranks over {transport}; {sum(map(len, logged.values()))} "
              f"logged choices agree")
    return problems


def ordered(algos):
    """The rows' algorithms by size, consecutive repeats merged."""
    runs = []
    for size in sorted(algos):
        if not runs or runs[-1] != algos[size]:
            runs.append(algos[size])
    return runs


def model_column(build):
    """--model adds the model's expected busbw to each row: the algorithm that ran (the rows' JSON
    names it: the ring where asked for, auto's shm window or recursive doubling otherwise), as
    `ringlet model predict` simulates it under the same profile (the mean of its in-place and
    --out-of-place busbw, as the row's measured figure is the mean of those columns); '-' for a
    collective the model does not run (broadcast); a bad profile is an error naming the file."""
    problems = []
    sizes = ["-b", "64K", "-e", "1M", "-f", "16", "-n", "2", "-w", "1", "--model", "default"]
    for env in ({"RINGLET_ALGO": "ring"}, {}):
        what, proc = run(build, "all_reduce_perf", ["-np", "3", "-t", "shm"] + sizes, env=env)
        what = " ".join(f"{k}={v}" for k, v in env.items()) + " " + what
        header = [l for l in proc.stdout.splitlines() if l.startswith("#") and "redop" in l]
        if proc.returncode != 0 or not header or header[0].split()[1:] != COLUMNS + ["model"]:
            problems.append(f"{what}: exit {proc.returncode}, header {header[:1]}: {proc.stderr[-300:]}")
            continue
        if "# Model: expected busbw" not in proc.stdout:
            problems.append(f"{what}: no '# Model:' line")
        table = [l.split() for l in proc.stdout.splitlines()
                 if len(l.split()) == 14 and l.split()[0].isdigit()]
        algos = {json.loads(l)["size"]: json.loads(l)["algo"] for l in proc.stdout.splitlines()
                 if l.startswith("{")}
        if len(table) != 2:
            problems.append(f"{what}: {len(table)} rows of 14 fields")
        for row in table:
            cell, algo = row[13], algos.get(int(row[0]), "?")
            busbw = []
            for place in ([], ["--out-of-place"]):
                predicted = subprocess.run(
                    [f"{build}/trainer/ringlet", "model", "predict", "--ranks", "3", "--size",
                     row[0], "--no-sweep"] + place, capture_output=True, text=True,
                    timeout=60).stdout
                busbw += [float(l.split()[2]) for l in predicted.splitlines()
                          if l.split()[:1] == [algo]]
            if (len(busbw) != 2 or cell == "-"
                    or abs(float(cell.rstrip("*")) - sum(busbw) / 2) > 0.006):
                problems.append(f"{what}: size {row[0]}, {algo}: model cell {cell}, predict says "
                                f"{busbw}")
        print(f"{what}: model cells {[(algos.get(int(r[0])), r[13]) for r in table]}")
    what, proc = run(build, "broadcast_perf", ["-np", "2", "-b", "64K", "-e", "64K", "-n", "2",
                                               "-w", "1", "--model", "default"])
    cells = [l.split()[-1] for l in proc.stdout.splitlines() if l.split()[:1] == ["65536"]]
    if proc.returncode != 0 or cells != ["-"]:
        problems.append(f"{what}: exit {proc.returncode}, model cells {cells}, not ['-']")
    problems += table_choice(build)
    what, proc = run(build, "all_reduce_perf", ["-np", "2", "--warmup-time", "soon"])
    if proc.returncode == 0 or "--warmup-time 'soon' is not a number of seconds" not in proc.stderr:
        problems.append(f"{what}: exit {proc.returncode}, stderr {proc.stderr[-300:]!r}")
    what, proc = run(build, "all_reduce_perf", ["-np", "2", "--model", "/nonexistent/p.json"])
    if proc.returncode == 0 or "profile /nonexistent/p.json: cannot open it" not in proc.stderr:
        problems.append(f"{what}: exit {proc.returncode}, stderr {proc.stderr[-300:]!r}")
    return problems


def table_choice(build):
    """RINGLET_ALGO_TABLE: a table `ringlet model table` wrote makes auto run its algorithm at
    each size (the rows' JSON names it), instead of the thresholds' (which pick the shm window)."""
    problems = []
    with tempfile.TemporaryDirectory() as folder:
        table = os.path.join(folder, "t.json")
        made = subprocess.run([f"{build}/trainer/ringlet", "model", "table", "--ranks", "3",
                               "--out", table], capture_output=True, text=True, timeout=120)
        if made.returncode != 0:
            return [f"ringlet model table: exit {made.returncode}: {made.stderr[-300:]}"]
        with open(table) as f:
            rows = json.load(f)["all_reduce"]["3"]
        sizes = ["-np", "3", "-b", "1K", "-e", "1M", "-f", "32", "-n", "2", "-w", "1"]
        what, proc = run(build, "all_reduce_perf", sizes, env={"RINGLET_ALGO_TABLE": table})
        ran = {}
        for line in proc.stdout.splitlines():
            if line.startswith("{"):
                row = json.loads(line)
                ran[row["size"]] = row["algo"]
        expected = {size: next(a for up_to, a in rows if up_to == 0 or size <= up_to)
                    for size in ran}
        if proc.returncode != 0 or len(ran) != 3 or ran != expected:
            problems.append(f"RINGLET_ALGO_TABLE {rows}: {what}: ran {ran}, expected {expected}: "
                            f"{proc.stderr[-300:]}")
        print(f"RINGLET_ALGO_TABLE {rows}: {what}: ran {ran}")
    return problems


NO_PLACE = re.compile(r"NCCL needs a CUDA GPU and this machine has none|NCCL cannot place \d+ ranks")


def nccl(build):
    sizes = ["-b", "1K", "-e", "32K", "-f", "32"]  # 2 sizes
    what, proc = run(build, "nccl_all_reduce_perf", ["-np", "2", "-d", "all", "-o", "all"] + sizes)
    reason = NO_PLACE.search(proc.stderr)
    if proc.returncode != 0 and reason:
        line = next(l for l in proc.stderr.splitlines() if NO_PLACE.search(l))
        print(f"skipped: {what}: {line.split(': ', 1)[-1]}")
        return None
    problems = check_table(what, proc, 2 * 6 * 5)
    for program in ("nccl_all_gather_perf", "nccl_reduce_scatter_perf", "nccl_broadcast_perf"):
        what, proc = run(build, program, ["-np", "2"] + sizes)
        problems += check_table(what, proc, 2)
    return problems


def open_sockets(pid):
    """The sockets and pipes the process holds, by fd: 'socket:[inode]', one inode per end, so
    two processes hold the same only when one inherited it from the other."""
    found = {}
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith(("socket:", "pipe:")):
            found[int(fd)] = target
    return found


def inherited_files(build):
    """A spawned rank shares nothing with rank 0 but stdin, stdout and stderr: a copy of rank 0's
    store sockets kept them open after rank 0's store server closed them, and a failing rank 0
    waited out its store deadline."""
    job = subprocess.Popen([f"{build}/bench/all_reduce_perf", "-np", "2", "-b", "4K", "-e", "4K",
                            "-n", "1000000"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        child, _ = child_pid(job.pid, 1)
        if child is None:
            return ["all_reduce_perf -np 2: its rank 1 never started"]
        time.sleep(0.5)  # set up: rank 0's store and both ranks' connections are open
        rank0 = set(open_sockets(job.pid).values())
        shared = {fd: f for fd, f in open_sockets(child).items() if fd > 2 and f in rank0}
        return [f"all_reduce_perf -np 2: rank 1 holds rank 0's {f} (fd {fd})"
                for fd, f in sorted(shared.items())]
    finally:
        job.kill()
        job.wait()


def main():
    build, which = sys.argv[1], sys.argv[2]
    problems = ringlet(build) + model_column(build) + inherited_files(build) \
        if which == "ringlet" else nccl(build)
    if problems is None:
        return SKIP
    for p in problems:
        print("FAIL", p)
    print(f"{which} benchmark programs: {'OK' if not problems else 'FAILED'}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Every program answers the way the ringlet CLI does (a `meson test`).

usage: program_help.py BUILD_DIR

For `ringlet`, each of its commands, and every bench program built: `--help` and `-h` print
a usage on stdout and exit 0; an unknown flag exits 2 naming the flag on stderr, with no
source path in the message (those appear only under RINGLET_LOG=debug). An unknown
RINGLET_ISA exits 2 before anything starts.
"""
import os
import subprocess
import sys

BENCHES = ["all_reduce_perf", "all_gather_perf", "reduce_scatter_perf", "broadcast_perf",
           "p2p_perf", "ops_bench", "train_bench", "reduce_kernel_bench", "host_reduce_bench", "tensor_loops_bench",
           "core_probe",
           "nccl_all_reduce_perf", "nccl_all_gather_perf", "nccl_reduce_scatter_perf",
           "nccl_broadcast_perf"]
RINGLET_COMMANDS = [[], ["train"], ["eval"], ["launch"], ["trace"], ["trace", "merge"], ["trace", "report"], ["report"],
                    ["diagnose"], ["status"], ["model"], ["model", "predict"], ["model", "fit"],
                    ["model", "table"]]


def run(cmd, env=None):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=env)


def check(cmd):
    problems = []
    name = " ".join(os.path.basename(cmd[0]) if i == 0 else c for i, c in enumerate(cmd))
    for flag in ("--help", "-h"):
        proc = run(cmd + [flag])
        if proc.returncode != 0 or "usage" not in proc.stdout.lower():
            problems.append(f"{name} {flag}: exit {proc.returncode}, stdout {proc.stdout[:120]!r}")
    env = {k: v for k, v in os.environ.items() if k != "RINGLET_LOG"}
    proc = run(cmd + ["--no-such-flag"], env)
    if proc.returncode != 2:
        problems.append(f"{name} --no-such-flag: exit {proc.returncode}, expected 2")
    if "no-such-flag" not in proc.stderr and "no_such_flag" not in proc.stderr:
        problems.append(f"{name} --no-such-flag: the flag is not named: {proc.stderr[:200]!r}")
    if ".cpp:" in proc.stderr or ".h:" in proc.stderr:
        problems.append(f"{name} --no-such-flag: a source path in the message: {proc.stderr[:200]!r}")
    return problems


def main():
    build = sys.argv[1]
    programs = [[f"{build}/trainer/ringlet", *c] for c in RINGLET_COMMANDS]
    programs += [[f"{build}/bench/{b}"] for b in BENCHES if os.path.exists(f"{build}/bench/{b}")]
    problems = [p for cmd in programs for p in check(cmd)]
    # Under RINGLET_LOG=debug the message carries where it was raised.
    debug = run([f"{build}/bench/p2p_perf", "--reps", "x"], {**os.environ, "RINGLET_LOG": "debug"})
    if ".cpp:" not in debug.stderr:
        problems.append(f"RINGLET_LOG=debug: no source location: {debug.stderr[:200]!r}")
    # One bound on ranks per host, checked before anything starts (nothing left in /dev/shm).
    too_many = [
        ([f"{build}/bench/all_reduce_perf", "-np", "1000"], "more ranks than the 256"),
        ([f"{build}/trainer/ringlet", "launch", "--nproc-per-node", "1000", "true"],
         "must be in [1, 256]"),
        ([f"{build}/trainer/ringlet", "train", "--nproc", "1000"], "nproc must be in [1, 256]"),
    ]
    # A comm hook train_bench does not know (the hooks' names are listed).
    too_many.append(([f"{build}/bench/train_bench", "--comm-hook", "fp8"],
                     "valid: none, fp16_compress, bf16_compress"))
    for cmd, message in too_many:
        r = run(cmd)
        if r.returncode != 2 or message not in r.stderr:
            problems.append(f"{' '.join(cmd)}: exit {r.returncode}, {r.stderr[:200]!r}")
    # RINGLET_ISA names a level this CPU can run, or nothing starts (core/isa.h).
    bad_isa = {**os.environ, "RINGLET_ISA": "sse9"}
    for cmd in ([f"{build}/bench/all_reduce_perf", "-np", "2"], [f"{build}/trainer/ringlet", "train"],
                [f"{build}/bench/host_reduce_bench"], [f"{build}/bench/tensor_loops_bench"]):
        r = run(cmd, bad_isa)
        if r.returncode != 2 or "unknown instruction set 'sse9'" not in r.stderr:
            problems.append(f"RINGLET_ISA=sse9 {' '.join(cmd)}: exit {r.returncode}, {r.stderr[:200]!r}")
    for p in problems:
        print("FAIL:", p)
    print(f"{len(programs)} programs checked, {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())

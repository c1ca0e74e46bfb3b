#!/usr/bin/env python3
"""Checks how the build compiles its CUDA sources, from BUILD/compile_commands.json:
  - never with nvcc -G (device code unoptimized: the collectives' reduction ran at a quarter of
    the copy bandwidth and the training step was several times slower on a GPU);
  - always with a dependency file where ninja reads it (-MD -MF <object>.d), so that editing a
    kernel header rebuilds every .cu that includes it (a stale object crashed on a GPU).
Exits 77 (skip) for a build without CUDA sources.
usage: check_cuda_flags.py BUILD_DIR
"""
import json
import os
import shlex
import sys


def problems_of(entry):
    args = entry.get("arguments") or shlex.split(entry["command"])
    out = args[args.index("-o") + 1] if "-o" in args else None
    found = []
    if "-G" in args or "--device-debug" in args:
        found.append("compiled with -G (device code unoptimized)")
    if "-MD" not in args or "-MF" not in args:
        found.append("no -MD -MF: header changes would not rebuild it")
    else:
        depfile = args[args.index("-MF") + 1]
        want = os.path.join(entry["directory"], out + ".d") if out else None
        if want is None or os.path.normpath(depfile) != os.path.normpath(want):
            found.append(f"depfile {depfile} is not where ninja reads it ({want})")
    return found


def main():
    build = sys.argv[1]
    with open(os.path.join(build, "compile_commands.json")) as f:
        entries = [e for e in json.load(f) if e["file"].endswith(".cu")]
    if not entries:
        print("skipped: this build has no CUDA sources")
        return 77
    bad = 0
    for e in entries:
        for p in problems_of(e):
            print(f"{e['file']}: {p}")
            bad += 1
    print(f"{len(entries)} CUDA source(s) checked, {bad} problem(s)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

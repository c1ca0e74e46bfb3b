#!/usr/bin/env python3
"""Every program that can load the CUDA plugin exports what the plugin binds to (a `meson test`).

usage: plugin_bindings.py BUILD_DIR

The plugin, libringlet-cuda.so, leaves ringlet's own functions undefined (the counters, the
deadline, the dtype conversions) and binds to them, RTLD_NOW, in the program that loads it
(core/cuda_plugin.h). A program that links the loader but not one of those functions, or does
not export them (-rdynamic), cannot load it: on a GPU machine it then reports no GPU, and its
tests skip, its benchmarks run on the emulated device. This machine may have no GPU, so the
check reads the symbol tables: each program (and libringlet.so) whose dynamic symbols define
the loader must define every ringlet symbol the plugin leaves undefined. Exits 77 (skip) for a
build without CUDA.
"""
import os
import subprocess
import sys

LOADER = "_ZN7ringlet4core18cuda_plugin_symbolEPKc"  # ringlet::core::cuda_plugin_symbol


def dynamic_symbols(path, undefined):
    which = "--undefined-only" if undefined else "--defined-only"
    run = subprocess.run(["nm", "-D", which, path], capture_output=True, text=True)
    return {line.split()[-1] for line in run.stdout.splitlines() if line.strip()}


def is_elf(path):
    with open(path, "rb") as f:
        return f.read(4) == b"\x7fELF"


def programs(build):
    """The build's programs and shared libraries (not object files, not meson's .p folders)."""
    for top, dirs, files in os.walk(build):
        dirs[:] = [d for d in dirs if not d.endswith(".p") and not d.startswith("meson-")]
        for name in files:
            path = os.path.join(top, name)
            executable = os.access(path, os.X_OK) and not name.endswith((".a", ".o"))
            if (executable or ".so" in name) and not os.path.islink(path) and is_elf(path):
                yield path


def main():
    build = sys.argv[1]
    plugin = os.path.join(build, "libringlet-cuda.so")
    if not os.path.exists(plugin):
        print("skipped: this build has no CUDA plugin")
        return 77
    needs = {s for s in dynamic_symbols(plugin, True) if s.startswith("_ZN7ringlet")}
    checked, problems = 0, []
    for path in sorted(programs(build)):
        if os.path.samefile(path, plugin):
            continue
        exported = dynamic_symbols(path, False)
        if LOADER not in exported:
            continue
        checked += 1
        missing = sorted(needs - exported)
        if missing:
            names = subprocess.run(["c++filt"] + missing, capture_output=True, text=True).stdout
            problems.append(f"{os.path.relpath(path, build)} cannot load the plugin: it does not "
                            f"export {', '.join(names.split(chr(10))[:-1])}")
    print(f"{checked} programs load the plugin; it binds to {len(needs)} of ringlet's functions")
    for problem in problems:
        print(problem)
    if checked == 0:
        print("no program links the plugin's loader: the scan found nothing to check")
        return 1
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())

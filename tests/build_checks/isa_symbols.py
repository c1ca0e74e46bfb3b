#!/usr/bin/env python3
"""The per-level kernel libraries export nothing but their table (a `meson test`).

usage: isa_symbols.py LIBRARY...   (collectives/libringlet_reduce_<level>.a,
                                     tensor/libringlet_tensor_loops_<level>.a)

Each instruction-set level's loops are compiled with that level's -m flags (core/isa.h). If
such a library defined any other global or weak symbol (an inline function or template the
compiler emitted out of line), the linker could keep that AVX-512 copy for a caller at the
baseline level, which would then die with an illegal instruction on an older CPU; the suite
at RINGLET_ISA=baseline cannot notice on a machine that has AVX-512. So the only global code
symbol `nm -g --defined-only` may list is the table's accessor:
`ringlet::collectives::reduce_table_<level>()` or `ringlet::tensor::cpu::flat_loops_<level>()`.
Data symbols hold no instructions (UBSan's function checks add weak typeinfo objects).
"""
import os
import re
import subprocess
import sys


CODE_TYPES = "TWi"  # text, weak (not an object), indirect function


def defined_code(library):
    out = subprocess.run(["nm", "-g", "--defined-only", "-C", library], capture_output=True,
                         text=True, check=True).stdout
    symbols = []
    for line in out.splitlines():
        parts = line.split(maxsplit=2)
        if len(parts) == 3 and len(parts[1]) == 1 and parts[1] in CODE_TYPES:
            symbols.append((parts[1], parts[2]))
    return symbols


def main():
    if len(sys.argv) < 2:
        print("skipped: no per-level kernel library in this build (not x86-64)")
        return 77
    problems = []
    for library in sys.argv[1:]:
        name = os.path.basename(library)
        reduce = re.search(r"libringlet_reduce_(\w+)\.a$", name)
        loops = re.search(r"libringlet_tensor_loops_(\w+)\.a$", name)
        if reduce:
            want = f"ringlet::collectives::reduce_table_{reduce.group(1)}()"
        elif loops:
            want = f"ringlet::tensor::cpu::flat_loops_{loops.group(1)}()"
        else:
            problems.append(f"{library}: not a per-level kernel library")
            continue
        symbols = defined_code(library)
        names = [name for _, name in symbols]
        if names != [want]:
            problems.append(f"{library}: defines {len(symbols)} code symbols (first: "
                            f"{symbols[:5]}), expected only {want}")
        print(f"{os.path.basename(library)}: {len(symbols)} global code symbol(s): {names[:5]}")
    for p in problems:
        print("FAIL:", p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())

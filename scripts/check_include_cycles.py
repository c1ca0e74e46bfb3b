#!/usr/bin/env python3
"""Fails when the project's own includes form a loop (a.h includes b.h, which includes a.h,
directly or through others), naming the files of each loop. A loop makes the include order
decide what compiles and hides which file owns a concept.

usage: check_include_cycles.py SOURCE_ROOT
Looks at every .h/.hpp/.cpp/.cc/.cu/.cuh file under the layer folders and tests/, bench/;
includes are resolved against the source root (the project includes by "layer/file.h").
"""
import os
import re
import sys

FOLDERS = ["core", "transport", "device", "collectives", "tensor", "nn", "data", "checkpoint",
           "distributed", "trainer", "python", "bench", "tests", "examples"]
SUFFIXES = (".h", ".hpp", ".cpp", ".cc", ".cu", ".cuh")
INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.M)


def source_files(root):
    for folder in FOLDERS:
        for dirpath, _dirs, files in os.walk(os.path.join(root, folder)):
            for name in files:
                if name.endswith(SUFFIXES):
                    yield os.path.relpath(os.path.join(dirpath, name), root)


def include_graph(root):
    graph = {}
    for path in source_files(root):
        with open(os.path.join(root, path), encoding="utf-8", errors="replace") as f:
            text = f.read()
        here = os.path.dirname(path)
        edges = []
        for target in INCLUDE.findall(text):
            for candidate in (target, os.path.normpath(os.path.join(here, target))):
                if os.path.isfile(os.path.join(root, candidate)):
                    edges.append(candidate)
                    break
        graph[path] = edges
    return graph


def find_cycles(graph):
    """Every include loop, once each (iterative depth-first search; colours 0/1/2)."""
    colour = {node: 0 for node in graph}
    cycles = []
    for start in sorted(graph):
        if colour[start]:
            continue
        stack = [(start, iter(graph[start]))]
        path = [start]
        colour[start] = 1
        while stack:
            node, edges = stack[-1]
            nxt = next(edges, None)
            if nxt is None:
                colour[node] = 2
                stack.pop()
                path.pop()
                continue
            state = colour.get(nxt, 2)
            if state == 1:
                cycles.append(path[path.index(nxt):] + [nxt])
            elif state == 0:
                colour[nxt] = 1
                path.append(nxt)
                stack.append((nxt, iter(graph.get(nxt, []))))
    return cycles


def main():
    if len(sys.argv) != 2:
        print(__doc__.strip().splitlines()[3], file=sys.stderr)
        return 2
    graph = include_graph(sys.argv[1])
    cycles = find_cycles(graph)
    for cycle in cycles:
        print("include loop: " + " -> ".join(cycle), file=sys.stderr)
    if cycles:
        return 1
    print(f"no include loops among {len(graph)} files")
    return 0


if __name__ == "__main__":
    sys.exit(main())

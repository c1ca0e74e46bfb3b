#!/usr/bin/env python3
"""Installs ringlet's public headers (public_headers.txt) and the headers they include, under
<includedir>/ringlet/, each include of a ringlet header rewritten from the tree's
"layer/name.h" to <ringlet/layer/name.h>: a program includes <ringlet/nn/linear.h>, and no
generic path such as "core/error.h" can meet one of its own.

usage: install_headers.py SOURCE_ROOT INCLUDEDIR   (a meson install script: DESTDIR-aware)
       install_headers.py SOURCE_ROOT --list       (the installed set, one path a line)
"""
import os
import re
import sys

LAYERS = ("core", "transport", "device", "collectives", "tensor", "nn", "data", "checkpoint",
          "distributed", "trainer")
INCLUDE = re.compile(r'^(\s*#\s*include\s*)"((?:%s)/[^"]+)"' % "|".join(LAYERS), re.M)


def public_set(root):
    with open(os.path.join(root, "package", "public_headers.txt")) as f:
        return [line.strip() for line in f if line.strip() and not line.startswith("#")]


def closure(root):
    """The public headers and every ringlet header they include, transitively."""
    seen, todo = set(), list(public_set(root))
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        if not os.path.isfile(os.path.join(root, path)):
            sys.exit(f"install_headers: {path} (named or included) is not in {root}")
        seen.add(path)
        with open(os.path.join(root, path)) as f:
            todo += [m.group(2) for m in INCLUDE.finditer(f.read())]
    return sorted(seen)


def install(root, includedir):
    prefix = os.environ.get("MESON_INSTALL_DESTDIR_PREFIX", "")
    target = os.path.join(prefix, includedir, "ringlet") if prefix else os.path.join(includedir,
                                                                                     "ringlet")
    headers = closure(root)
    for path in headers:
        with open(os.path.join(root, path)) as f:
            text = INCLUDE.sub(r"\1<ringlet/\2>", f.read())
        out = os.path.join(target, path)
        os.makedirs(os.path.dirname(out), exist_ok=True)
        with open(out, "w") as f:
            f.write(text)
        os.chmod(out, 0o644)
    print(f"Installing {len(headers)} headers to {target}")


def main():
    root = sys.argv[1]
    if sys.argv[2] == "--list":
        print("\n".join(closure(root)))
    else:
        install(root, sys.argv[2])


if __name__ == "__main__":
    main()

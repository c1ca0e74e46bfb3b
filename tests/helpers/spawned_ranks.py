"""The ranks an `-np` benchmark's rank 0 spawned (`--child-rank K`), found through /proc."""
import os
import time


def child_pid(parent, rank):
    """The -np rank `rank` that `parent` spawned, once it exists (within 10 s), and its
    command line; (None, []) if it never does."""
    for _ in range(200):
        for pid in os.listdir("/proc"):
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    args = f.read().split(b"\0")
                with open(f"/proc/{pid}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError):
                continue
            if ppid == parent and b"--child-rank" in args and \
                    args[args.index(b"--child-rank") + 1] == str(rank).encode():
                return int(pid), [a.decode() for a in args]
        time.sleep(0.05)
    return None, []

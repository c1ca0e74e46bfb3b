#!/usr/bin/env python3
"""An unmodified torch.distributed gloo script under `ringlet launch`, as under torchrun (a meson
test).

usage: torchrun_gloo.py RINGLET_BINARY

The script calls init_process_group("gloo") with env:// (rank 0 hosts torch's own store at
MASTER_PORT), all-reduces, all-gathers, broadcasts and meets at a barrier, and checks the
values. It runs as `script.py` with 2 workers, with --standalone, with --rdzv-backend c10d at an
endpoint, and as `-m module` with --log-dir (each rank's stdout in its file). Exits 77 (meson's
SKIP), saying why, when this python has no torch (Debian's python3-torch).
"""
import glob
import os
import socket
import subprocess
import sys
import tempfile

SKIP = 77

SCRIPT = r'''
import os
import torch
import torch.distributed as dist

dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
assert rank == int(os.environ["RANK"]) and world == int(os.environ["WORLD_SIZE"])
t = torch.arange(4, dtype=torch.float32) * (rank + 1)
dist.all_reduce(t)
expected = torch.arange(4, dtype=torch.float32) * sum(r + 1 for r in range(world))
assert torch.equal(t, expected), (t, expected)
gathered = [torch.zeros(1) for _ in range(world)]
dist.all_gather(gathered, torch.tensor([float(rank)]))
assert [g.item() for g in gathered] == list(range(world))
b = torch.tensor([42.0 if rank == 0 else 0.0])
dist.broadcast(b, 0)
assert b.item() == 42.0
dist.barrier()
print(f"gloo ok rank {rank} of {world} run {os.environ['TORCHELASTIC_RUN_ID']}", flush=True)
dist.destroy_process_group()
'''


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(binary, args, env):
    cmd = [binary, "launch"] + args
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=180, env=env)
    if proc.returncode != 0:
        print(" ".join(cmd), "\n", proc.stdout[-3000:], proc.stderr[-3000:])
        raise AssertionError(f"ringlet launch exited {proc.returncode}")
    return proc.stdout


def main():
    try:
        import torch  # noqa: F401
    except ImportError:
        print("skipped: this python has no torch (apt-get install python3-torch)")
        return SKIP
    binary = sys.argv[1]
    env = dict(os.environ, RINGLET_PYTHON=sys.executable)
    with tempfile.TemporaryDirectory(prefix="ringlet_gloo_") as tmp:
        script = os.path.join(tmp, "gloo_job.py")
        with open(script, "w") as f:
            f.write(SCRIPT)
        runs = {
            "script.py": ["--nproc-per-node", "2", script],
            "--standalone": ["--standalone", "--nproc_per_node=2", script],
            "c10d": ["--rdzv-backend", "c10d", "--rdzv-endpoint", f"127.0.0.1:{free_port()}",
                     "--rdzv-id", "gloo7", "--nproc-per-node", "2", script],
        }
        for name, args in runs.items():
            out = launch(binary, args, env)
            for rank in range(2):
                assert f"[rank {rank}] gloo ok rank {rank} of 2" in out, (name, out)
            print(f"OK {name}")
        logs = os.path.join(tmp, "logs")
        out = launch(binary, ["-m", "--nproc-per-node", "2", "--rdzv-id", "mod", "--log-dir",
                              logs, "--redirects", "1", "gloo_job"],
                     dict(env, PYTHONPATH=tmp))
        assert "gloo ok" not in out, out  # redirected: in the files only
        for rank in range(2):
            [path] = glob.glob(os.path.join(logs, "mod_*", "attempt_0", str(rank), "stdout.log"))
            text = open(path).read()
            assert f"gloo ok rank {rank} of 2 run mod" in text, text
        print("OK -m module, --log-dir")
    return 0


if __name__ == "__main__":
    sys.exit(main())

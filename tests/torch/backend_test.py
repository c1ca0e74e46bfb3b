#!/usr/bin/env python3
"""ringlet_torch, the torch.distributed backend, end to end (a meson test).

usage: backend_test.py RINGLET_BINARY SOURCE_ROOT [JOB ...]

Starts each job's ranks as processes with torch's env:// variables on loopback and checks
what they print (backend_cases.py has the cases):
  ops2, ops3    every op x dtype x reduce op x count (1, 7, 1000003), 2 and 3 ranks
  algos         the same (counts up to 10007, 3 ranks) under RINGLET_ALGO=tree, rabenseifner
                (its all-reduce, halving reduce-scatter, doubling all-gather) and bruck
  inits         init_method file:// and tcp:// instead of env://, 2 ranks
  groups        new_group sub-communicators, 3 ranks
  async         async ops, Work.wait / is_completed, get_future().then
  ddp           10 steps of PyTorch DDP over ringlet, bitwise equal to the same over gloo
  mismatch      ranks all-reduce different counts: each raises ringlet's fingerprint error
  kill, stop    rank 1 SIGKILLed / SIGSTOPped: rank 0 raises RuntimeError naming rank 1 and the
                op within the group's timeout
  seeds         the DDP primer's demo_basic and the torchrun primer's loop (examples/torch)
                with backend="ringlet" under `ringlet launch --nproc-per-node 2`
Exits 77 (meson's SKIP), saying why, when this python has no torch or ringlet_torch was not
built (-Dtorch, python/README.md).
"""
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time

SKIP = 77
HERE = os.path.dirname(os.path.abspath(__file__))
CASES = os.path.join(HERE, "backend_cases.py")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(world, args, extra_env=None):
    port = free_port()
    procs = []
    for rank in range(world):
        env = dict(os.environ, RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank),
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), **(extra_env or {}))
        procs.append(subprocess.Popen([sys.executable, CASES] + args, env=env, text=True,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT))
    return procs


def finish(procs, timeout):
    outs = []
    deadline = time.monotonic() + timeout
    for p in procs:
        try:
            out, _ = p.communicate(timeout=max(1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            out, _ = p.communicate()
            out += f"\n[killed after {timeout} s]"
        outs.append(out)
    return outs


# torch's TCPStore could not bind the port free_port() found: another process took it first.
PORT_TAKEN = "failed to listen on any local network address"


def job(world, args, timeout=240, extra_env=None):
    for attempt in range(3):
        procs = start(world, args, extra_env)
        outs = finish(procs, timeout)
        if not any(PORT_TAKEN in out for out in outs):
            break
        print(f"  port taken by another process (attempt {attempt + 1}); again on a new one")
    for rank, (p, out) in enumerate(zip(procs, outs)):
        if p.returncode != 0 or f"{args[0]} ok rank {rank}" not in out:
            raise AssertionError(f"{args} rank {rank} exited {p.returncode}:\n{out[-4000:]}")
    return outs


def ddp_bitwise(tmp):
    import torch
    states = {}
    for backend in ("ringlet", "gloo"):
        path = os.path.join(tmp, f"ddp_{backend}.pt")
        job(2, ["ddp", backend, path])
        states[backend] = torch.load(path)
    for name, value in states["gloo"].items():
        mine = states["ringlet"][name]
        assert torch.equal(mine, value), f"{name}: ringlet and gloo differ by {(mine - value).abs().max()}"
    print(f"  {len(states['gloo'])} tensors bitwise equal to gloo's after 10 DDP steps")


def dead_peer(kind):
    timeout = 10
    for attempt in range(3):
        procs = start(2, ["dead", kind, str(timeout)])
        started = time.monotonic()
        try:
            out0, _ = procs[0].communicate(timeout=timeout + 50)
        finally:
            procs[1].kill()  # SIGSTOPped, or already dead
            procs[1].communicate()
        if PORT_TAKEN not in out0:
            break
        print(f"  port taken by another process (attempt {attempt + 1}); again on a new one")
    took = time.monotonic() - started
    match = re.search(r"raised after ([0-9.]+) s: (.*)", out0)
    assert procs[0].returncode == 0 and match, f"rank 0 exited {procs[0].returncode}:\n{out0[-3000:]}"
    message = match.group(2)
    assert "rank 1" in message and "all_reduce" in message and "seq" in message, message
    assert float(match.group(1)) <= timeout + 5, f"raised after {match.group(1)} s (timeout {timeout} s)"
    print(f"  rank 1 {kind}: rank 0 raised after {match.group(1)} s ({took:.1f} s in all): {message[:160]}")


def seeds(binary, root, tmp):
    env = dict(os.environ, RINGLET_PYTHON=sys.executable)
    runs = {
        "ddp_demo_basic": [os.path.join(root, "examples/torch/ddp_demo_basic.py")],
        "multinode_torchrun": [os.path.join(root, "examples/torch/multinode_torchrun.py"), "2", "1",
                               "--snapshot", os.path.join(tmp, "snapshot.pt")],
    }
    for name, args in runs.items():
        cmd = [binary, "launch", "--nproc-per-node", "2"] + args
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=180, env=env)
        out = proc.stdout + proc.stderr
        assert proc.returncode == 0, f"{' '.join(cmd)} exited {proc.returncode}:\n{out[-4000:]}"
        if name == "ddp_demo_basic":
            for rank in range(2):
                assert f"Finished running basic DDP example on rank {rank}." in out, out
        else:
            assert "Epoch 1 | Training snapshot saved" in out and "[RANK1] Epoch 1 | loss" in out, out
        print(f"  {name}: ok")


def main():
    try:
        import torch  # noqa: F401
    except ImportError:
        print("skipped: this python has no torch (apt-get install python3-torch)")
        return SKIP
    try:
        import ringlet_torch  # noqa: F401
    except ImportError as e:
        print(f"skipped: ringlet_torch is not built or not on PYTHONPATH ({e}); see python/README.md")
        return SKIP
    binary, root = sys.argv[1], sys.argv[2]
    jobs = sys.argv[3:] or ["ops2", "ops3", "algos", "inits", "groups", "async", "mismatch", "ddp", "kill",
                            "stop", "seeds"]
    with tempfile.TemporaryDirectory(prefix="ringlet_torch_") as tmp:
        for name in jobs:
            started = time.monotonic()
            if name in ("ops2", "ops3"):
                job(int(name[-1]), ["ops"])
            elif name == "algos":
                for algo in ("tree", "rabenseifner", "bruck"):
                    job(3, ["algo"], extra_env={"RINGLET_ALGO": algo})
            elif name == "inits":
                job(2, ["init", "file://" + os.path.join(tmp, "rendezvous")])
                job(2, ["init", f"tcp://127.0.0.1:{free_port()}"])
            elif name == "groups":
                job(3, ["groups"])
            elif name == "async":
                job(2, ["async"])
            elif name == "mismatch":
                for out in job(2, ["mismatch"], timeout=120):
                    print("  " + next(line for line in out.splitlines() if line.startswith("raised"))[:200])
            elif name == "ddp":
                ddp_bitwise(tmp)
            elif name in ("kill", "stop"):
                dead_peer(name)
            elif name == "seeds":
                seeds(binary, root, tmp)
            else:
                raise SystemExit(f"unknown job {name}")
            print(f"OK {name} ({time.monotonic() - started:.1f} s)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

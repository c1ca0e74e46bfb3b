#!/usr/bin/env python3
"""Bad inputs get errors that name the file, the key and the unit: each case runs `ringlet`
with one mistake and checks the exit status and that the message names what it must.

usage: bad_inputs.py RINGLET ALL_REDUCE_PERF
The collectives' deadline message (RINGLET_TIMEOUT in milliseconds) is checked where a peer can
be held back deterministically: tests/collectives/test_collectives_faults.cpp.
The last line is `N passed, N failed`.
"""
import gzip
import json
import os
import socket
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def run(ringlet, args, env=None, timeout=120):
    full_env = dict(os.environ, **(env or {}))
    r = subprocess.run([ringlet] + args, capture_output=True, text=True, timeout=timeout,
                       env=full_env)
    return r.returncode, r.stdout + r.stderr


def write_idx(path, magic, dims, payload):
    with gzip.open(path, "wb") as f:
        f.write(struct.pack(">I", magic) + b"".join(struct.pack(">I", d) for d in dims) + payload)


def small_images(directory, side, bad_label_at=None):
    """Fashion-MNIST-named IDX files holding 64 images of side x side pixels; the train
    example `bad_label_at` labelled 200."""
    directory.mkdir(parents=True, exist_ok=True)
    for split in ("train", "t10k"):
        write_idx(directory / f"{split}-images-idx3-ubyte.gz", 0x803, [64, side, side],
                  bytes((i * 7) % 256 for i in range(64 * side * side)))
        labels = [i % 10 for i in range(64)]
        if split == "train" and bad_label_at is not None:
            labels[bad_label_at] = 200
        write_idx(directory / f"{split}-labels-idx1-ubyte.gz", 0x801, [64], bytes(labels))


def checkpoint_with_config(path, config_text):
    """A one-tensor safetensors file whose metadata 'config' is `config_text`."""
    header = {"__metadata__": {"config": config_text, "epoch": "1", "step": "1"},
              "w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    path.write_bytes(struct.pack("<Q", len(text)) + text + b"\0\0\0\0")


def mem_available_gib():
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) / (1 << 20)
    return 0


def timed(fn):
    start = time.monotonic()
    result = fn()
    return result, time.monotonic() - start


def too_large(ringlet, all_reduce_perf, tmp):
    """Jobs the machine's memory cannot hold: refused within seconds, naming the figures."""
    (status, output), took = timed(lambda: run(all_reduce_perf, ["-np", "256"], timeout=60))
    output += f" [took {took:.2f} s]" if took > 5 else ""
    yield ("all_reduce_perf -np 256", (status, output), 1,
           ["-np 256", "needs about", "32640 rank pairs", "/dev/shm has"])
    # 65 ranks of fashion-mnist: ~16 GiB of segments and ~20 GiB in all; a machine with far more
    # memory runs it (nothing to refuse there).
    if mem_available_gib() > 40:
        print("skip ringlet train --nproc 65: this machine has more than 40 GiB available")
        return
    (status, output), took = timed(lambda: run(
        ringlet, ["train", "--nproc", "65", "--out", str(tmp / "big_run")], timeout=60))
    output += f" [took {took:.2f} s]" if took > 5 else ""
    yield ("ringlet train --nproc 65", (status, output), 1,
           ["ringlet train --nproc 65 needs about", "2080 rank pairs", "available"])
    if (tmp / "big_run").exists():
        yield ("a refused job leaves no run directory", (1, "big_run exists"), 0, ["never"])


def cases(ringlet, tmp):
    tiny = ["--epochs", "1", "--limit_train", "64", "--limit_test", "64", "--threads", "1",
            "--workers", "1"]
    yield ("--config naming a directory", run(ringlet, ["train", "--config", str(tmp)]),
           1, [f"config file {tmp} is a directory", ".json, .yaml or .yml"])

    ckpt = tmp / "bad_config.safetensors"
    checkpoint_with_config(ckpt, "{not json")
    yield ("a checkpoint whose config is not JSON",
           run(ringlet, ["eval", "--checkpoint", str(ckpt)]), 1,
           [f"checkpoint {ckpt}: metadata 'config' is not valid JSON", "parse error"])

    yield ("--batch_size past an int", run(ringlet, ["train", "--batch_size", "3000000000"]), 2,
           ["--batch_size takes a whole number in [1, 2147483647], got 3000000000"])
    yaml = tmp / "big.yaml"
    yaml.write_text("batch_size: 3000000000\n")
    yield ("batch_size past an int in a config file",
           run(ringlet, ["train", "--config", str(yaml)]), 1,
           [f"{yaml}: key 'batch_size' takes a whole number in [1, 2147483647], got 3000000000"])
    yield ("--nproc out of range", run(ringlet, ["train", "--nproc", "1000"]), 2,
           ["nproc must be in [1, 256], got 1000"])

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        yield ("--rdzv-endpoint on a taken port",
               run(ringlet, ["launch", "--nproc-per-node", "2", "--rdzv-backend", "c10d",
                             "--rdzv-endpoint", f"127.0.0.1:{port}", "true"]), 1,
               [f"127.0.0.1:{port}", "choose another --rdzv-endpoint port"])

    yield ("--mean 1e308", run(ringlet, ["train", "--mean", "1e308", "--out",
                                         str(tmp / "mean_run")] + tiny), 1,
           ["--mean 1e+308", "normalize pixels to magnitudes past double's range",
            "check them"])

    failed_start = tmp / "failed_start"
    status, output = run(ringlet, ["train", "--data_dir", str(tmp / "missing"), "--out",
                                   str(failed_start)] + tiny)
    if failed_start.exists():
        output += f" [left {sorted(p.name for p in failed_start.iterdir())} in --out]"
    yield ("a start that fails leaves no run directory", (status, output), 1,
           [f"{tmp / 'missing'}/train-images-idx3-ubyte.gz not found"]
           + ([] if not failed_start.exists() else ["no files left in --out"]))

    yield ("ringlet status on a directory that is not a training run",
           run(ringlet, ["status", str(tmp)]), 1,
           [f"status: {tmp} has no file 'store'", "not a run directory of a job training now"])
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]  # bound, never listening: refused
        yield ("ringlet status on an address nobody serves",
               run(ringlet, ["status", f"127.0.0.1:{port}"]), 1,
               [f"127.0.0.1:{port}"])
    yield ("ringlet status --stuck-after not a number",
           run(ringlet, ["status", "127.0.0.1:1", "--stuck-after", "soon"]), 2,
           ["status: --stuck-after 'soon' is not a number of seconds in (0, 86400]"])

    small = tmp / "27px"
    small_images(small, 27)
    yield ("27x27 images for fashion-mnist",
           run(ringlet, ["train", "--data_dir", str(small), "--out", str(tmp / "small_run")]
               + tiny), 1,
           [f"{small}: the train images are 27x27 pixels", "take 28x28 images"])

    labelled = tmp / "label200"
    small_images(labelled, 28, bad_label_at=37)
    yield ("a label out of the dataset's range, named when the data opens",
           run(ringlet, ["train", "--data_dir", str(labelled), "--out", str(tmp / "label_run")]
               + tiny), 1,
           [f"{labelled}/train-labels-idx1-ubyte.gz: example 37 has label 200",
            "outside fashion-mnist's 10 classes (0..9)"])


def worker_environ(launcher_pid, rank):
    """The environment of the launcher's worker of `rank` (within 20 s), or None."""
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                stat = (entry / "stat").read_text()
                env = (entry / "environ").read_bytes().split(b"\0")
            except OSError:
                continue
            parent = int(stat.rsplit(")", 1)[1].split()[1])
            values = dict(e.decode(errors="replace").split("=", 1) for e in env if b"=" in e)
            if parent == launcher_pid and values.get("RANK") == str(rank):
                return values
        time.sleep(0.05)
    return None


def stranger(all_reduce_perf, ringlet):
    """A process started by hand as rank 1 of a running job: refused, naming the job, while the
    job goes on."""
    job = subprocess.Popen([ringlet, "launch", "--nproc-per-node", "2", all_reduce_perf, "-b",
                            "64K", "-e", "64K", "-n", "10000000", "-w", "1"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        env = worker_environ(job.pid, 1)
        if env is None:
            yield ("a stranger rank in a job's store", (1, "no worker of the job found"), 1,
                   ["worker found"])
            return
        time.sleep(1)  # the job's ranks have joined
        # The job's variables (its store's address among them), as a user would copy them.
        joined = {k: v for k, v in env.items() if k.startswith(("MASTER_", "RINGLET_STORE", "WORLD"))}
        status, output = run(all_reduce_perf, ["-b", "64K", "-e", "64K", "-n", "10"],
                             env=dict(joined, RANK="1", LOCAL_RANK="1"), timeout=60)
        if job.poll() is not None:
            output += f" [the job ended with status {job.returncode}]"
            status = -1
        yield ("a stranger rank in a job's store", (status, output), 1,
               ["rank 1 of the job", "(2 ranks, store on 127.0.0.1) is already held by process",
                "cannot join a job under way"])
    finally:
        job.terminate()
        job.wait(timeout=60)


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    ringlet, all_reduce_perf = sys.argv[1], sys.argv[2]
    passed = failed = 0
    with tempfile.TemporaryDirectory(prefix="ringlet_bad_inputs_") as tmp_text:
        tmp = Path(tmp_text)
        every = (list(cases(ringlet, tmp)) + list(too_large(ringlet, all_reduce_perf, tmp)) +
                 list(stranger(all_reduce_perf, ringlet)))
        for name, (status, output), want_status, parts in every:
            missing = [p for p in parts if p not in output]
            if "[took" in output:
                missing.append("an answer within 5 s")
            if missing or status != want_status:
                failed += 1
                print(f"FAIL {name}: exit {status} (expected {want_status}), missing {missing}\n"
                      f"  output: {output.strip()[-600:]}")
            else:
                passed += 1
                print(f"ok   {name}: {output.strip().splitlines()[-1][:150]}")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

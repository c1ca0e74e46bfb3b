"""What a ringlet run leaves, read for the tests that drive the binary from Python
(chaos_drill.py, slurm_test.py): a checkpoint's tensors and metadata, the epochs metrics.jsonl
records, how two checkpoints differ, and the processes still working on a run directory."""
import json
import os
import struct
from pathlib import Path


class Unreadable(Exception):
    pass


def read_checkpoint(path):
    """(metadata, {name: bytes}) of a safetensors file; Unreadable when it is not one."""
    try:
        data = Path(path).read_bytes()
        (n,) = struct.unpack("<Q", data[:8])
        if n > len(data) - 8:
            raise ValueError(f"header of {n} bytes in a file of {len(data)}")
        header = json.loads(data[8:8 + n])
        body = data[8 + n:]
        meta = header.pop("__metadata__", {})
        tensors, covered = {}, 0
        for name, info in header.items():
            begin, end = info["data_offsets"]
            if not 0 <= begin <= end <= len(body):
                raise ValueError(f"tensor {name} at [{begin}, {end}) outside {len(body)} bytes")
            tensors[name] = body[begin:end]
            covered += end - begin
        if covered != len(body):
            raise ValueError(f"tensors cover {covered} of {len(body)} data bytes")
        return meta, tensors
    except (OSError, ValueError, KeyError, TypeError, json.JSONDecodeError, struct.error) as e:
        raise Unreadable(f"unreadable checkpoint {path}: {e}")


def difference(a, b):
    """'' when two read_checkpoint results hold the same epoch, step and tensors bit for bit;
    otherwise what differs."""
    (meta_a, tensors_a), (meta_b, tensors_b) = a, b
    for key in ("epoch", "step"):
        if meta_a.get(key) != meta_b.get(key):
            return f"{key} {meta_a.get(key)} against {meta_b.get(key)}"
    if sorted(tensors_a) != sorted(tensors_b):
        return "the tensors' names"
    differ = [name for name in tensors_a if tensors_a[name] != tensors_b[name]]
    return f"tensors {differ[:5]}" if differ else ""


def recorded_epochs(run_dir):
    """The epochs metrics.jsonl records, in order."""
    text = (Path(run_dir) / "metrics.jsonl").read_text()
    return [json.loads(line)["epoch"] for line in text.splitlines()]


def processes_of(out):
    """{pid: rank or None (the launcher)} of every live process whose command names `out`."""
    found = {}
    marker = str(out).encode()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmdline = Path("/proc", entry, "cmdline").read_bytes()
            if marker not in cmdline.split(b"\0"):
                continue
            state = Path("/proc", entry, "stat").read_text().rsplit(")", 1)[1].split()[0]
            if state == "Z":
                continue
            env = Path("/proc", entry, "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        rank = None
        for item in env:
            if item.startswith(b"RANK="):
                rank = int(item[5:])
        found[int(entry)] = rank
    return found

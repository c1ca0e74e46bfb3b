#!/usr/bin/env python3
"""Reads a safetensors file with PyTorch alone and prints what it holds as one JSON object:
{"metadata": {...}, "tensors": {name: {"dtype": "torch.float32", "shape": [...], "sum": x}}}.

Debian's PyTorch 1.13 has no `safetensors` package, so the format is parsed here with struct
and json (8-byte little-endian header length, JSON header, raw little-endian data) and the
tensors are built with torch.frombuffer. test_checkpoint.cpp runs it on a ringlet checkpoint
to show that PyTorch opens it. Usage: /usr/bin/python3 read_safetensors.py FILE
"""
import json
import struct
import sys

import torch

DTYPES = {
    "F64": torch.float64,
    "F32": torch.float32,
    "F16": torch.float16,
    "BF16": torch.bfloat16,
    "I64": torch.int64,
    "I32": torch.int32,
    "I16": torch.int16,
    "I8": torch.int8,
    "U8": torch.uint8,
    "BOOL": torch.bool,
}


def load(path):
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    if n > len(blob) - 8:
        raise ValueError(f"{path}: header length {n} exceeds the file")
    header = json.loads(blob[8 : 8 + n])
    metadata = header.pop("__metadata__", {})
    data = memoryview(blob)[8 + n :]
    tensors = {}
    for name, info in header.items():
        begin, end = info["data_offsets"]
        dtype = DTYPES[info["dtype"]]
        if end > begin:
            flat = torch.frombuffer(bytearray(data[begin:end]), dtype=dtype)
        else:
            flat = torch.empty(0, dtype=dtype)  # frombuffer rejects an empty buffer
        tensors[name] = flat.reshape(info["shape"])
    return tensors, metadata


def main():
    tensors, metadata = load(sys.argv[1])
    out = {"metadata": metadata, "tensors": {}}
    for name, t in tensors.items():
        out["tensors"][name] = {
            "dtype": str(t.dtype),
            "shape": list(t.shape),
            "sum": t.double().sum().item(),
        }
    print(json.dumps(out, sort_keys=True))


if __name__ == "__main__":
    main()

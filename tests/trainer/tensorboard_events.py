#!/usr/bin/env python3
"""TensorBoard event files of `ringlet train`, read back by an independent reader (a meson test).

usage: tensorboard_events.py RINGLET_BINARY

Trains 2 short epochs (log_every 4) and reads runs' events.out.tfevents.* as TensorBoard would:
the TFRecord framing with both masked CRC-32Cs (computed here, bit by bit), then each record as
a tensorflow.Event through python3-protobuf, with the Event, Summary and Summary.Value messages
declared here from TensorFlow's event.proto / summary.proto field numbers. The first event must
carry file_version "brain.Event:2"; the train/* scalars must be steps.jsonl's records and the
epoch/* ones metrics.jsonl's, at the same steps. Exits 77 (meson's SKIP), saying why, without
python3-protobuf.
"""
import glob
import json
import math
import os
import struct
import subprocess
import sys
import tempfile

SKIP = 77


def crc32c(data):
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
    return crc ^ 0xFFFFFFFF


def masked(crc):
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def records(path):
    data = open(path, "rb").read()
    at = 0
    while at < len(data):
        header = data[at:at + 8]
        (length,) = struct.unpack("<Q", header)
        (length_crc,) = struct.unpack("<I", data[at + 8:at + 12])
        assert length_crc == masked(crc32c(header)), f"length CRC wrong at byte {at}"
        body = data[at + 12:at + 12 + length]
        (body_crc,) = struct.unpack("<I", data[at + 12 + length:at + 16 + length])
        assert body_crc == masked(crc32c(body)), f"data CRC wrong at byte {at}"
        yield body
        at += 16 + length
    assert at == len(data), "a torn record at the end"


def event_class():
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
    F = descriptor_pb2.FieldDescriptorProto
    proto = descriptor_pb2.FileDescriptorProto(name="ringlet_event_check.proto",
                                               package="tensorflow", syntax="proto3")
    summary = proto.message_type.add(name="Summary")
    value = summary.nested_type.add(name="Value")
    value.field.add(name="tag", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    value.field.add(name="simple_value", number=2, type=F.TYPE_FLOAT, label=F.LABEL_OPTIONAL)
    summary.field.add(name="value", number=1, type=F.TYPE_MESSAGE, label=F.LABEL_REPEATED,
                      type_name=".tensorflow.Summary.Value")
    event = proto.message_type.add(name="Event")
    event.field.add(name="wall_time", number=1, type=F.TYPE_DOUBLE, label=F.LABEL_OPTIONAL)
    event.field.add(name="step", number=2, type=F.TYPE_INT64, label=F.LABEL_OPTIONAL)
    event.field.add(name="file_version", number=3, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    event.field.add(name="summary", number=5, type=F.TYPE_MESSAGE, label=F.LABEL_OPTIONAL,
                    type_name=".tensorflow.Summary")
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    return message_factory.MessageFactory(pool).GetPrototype(
        pool.FindMessageTypeByName("tensorflow.Event"))


def close(a, b):
    return math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-6)  # the file holds float32


def check(out):
    files = glob.glob(os.path.join(out, "events.out.tfevents.*"))
    assert len(files) == 1, f"expected one event file, found {files}"
    Event = event_class()
    events = [Event.FromString(body) for body in records(files[0])]
    assert events[0].file_version == "brain.Event:2", events[0]
    scalars = {}
    last_time = 0.0
    for e in events[1:]:
        assert e.wall_time >= last_time, "wall times go back"
        last_time = e.wall_time
        assert len(e.summary.value) == 1, e
        v = e.summary.value[0]
        scalars[(v.tag, e.step)] = v.simple_value
    steps = [json.loads(l) for l in open(os.path.join(out, "steps.jsonl"))]
    epochs = [json.loads(l) for l in open(os.path.join(out, "metrics.jsonl"))]
    assert len(steps) == 6 and len(epochs) == 2, (len(steps), len(epochs))
    expected = {}
    for r in steps:
        for key in ("loss", "lr", "grad_norm", "images_per_s"):
            if r.get(key) is not None:  # a window of skipped steps has no loss
                expected[(f"train/{key}", r["step"])] = r[key]
    for r in epochs:
        for key in ("loss", "test_loss", "accuracy", "lr", "images_per_s", "seconds"):
            expected[(f"epoch/{key}", r["step"])] = r[key]
    missing = sorted(set(expected) - set(scalars))
    extra = sorted(set(scalars) - set(expected))
    assert not missing and not extra, f"missing {missing[:4]}, unexpected {extra[:4]}"
    wrong = [(k, scalars[k], expected[k]) for k in expected if not close(scalars[k], expected[k])]
    assert not wrong, f"values differ: {wrong[:4]}"
    return len(events)


def main():
    try:
        import google.protobuf  # noqa: F401
    except ImportError:
        print("skipped: python3-protobuf is not installed (apt-get install python3-protobuf)")
        return SKIP
    assert crc32c(b"123456789") == 0xE3069283  # the reader's own CRC-32C, on its check value
    binary = sys.argv[1]
    with tempfile.TemporaryDirectory(prefix="ringlet_tb_") as tmp:
        out = os.path.join(tmp, "run")
        cmd = [binary, "train", "--epochs", "2", "--limit_train", "640", "--limit_test", "100",
               "--log_every", "4", "--threads", "1", "--workers", "1", "--out", out]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        if proc.returncode != 0:
            print(proc.stdout[-2000:], proc.stderr[-2000:])
            print("FAIL: ringlet train exited", proc.returncode)
            return 1
        try:
            n = check(out)
        except AssertionError as e:
            print("FAIL:", e)
            return 1
    print(f"OK: {n} events, framing and CRCs valid, scalars equal steps.jsonl and metrics.jsonl")
    return 0


if __name__ == "__main__":
    sys.exit(main())

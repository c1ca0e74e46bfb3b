#!/usr/bin/env python3
"""The last table of bench/gpu_check.sh: reads the run's logs in OUT (NAME.log, status.txt),
prints one table of what passed and what each side measured, with the ratios the GPU issues
judge, and writes everything as OUT/results.json.

usage: gpu_check_table.py OUT
"""
import json
import os
import re
import sys


def json_lines(path):
    """The JSON objects of a log, each from the first '{' of its line ('[rank 0] {...}' too)."""
    found = []
    if not os.path.exists(path):
        return found
    for line in open(path, errors="replace"):
        at = line.find("{")
        if at < 0:
            continue
        try:
            found.append(json.loads(line[at:]))
        except ValueError:
            pass
    return found


def first(out, name, **match):
    for record in json_lines(os.path.join(out, name + ".log")):
        if all(record.get(k) == v for k, v in match.items()):
            return record
    return None


def fmt(value, digits=2):
    return "-" if value is None else f"{value:.{digits}f}"


def ratio(a, b):
    return None if a is None or b is None or b == 0 else a / b


def statuses(out):
    path = os.path.join(out, "status.txt")
    result = {}
    if os.path.exists(path):
        for line in open(path):
            name, status = line.split()
            result[name] = int(status)
    return result


def step_rows(out):
    rows = []
    for model in ("fmnist_cnn", "resnet20"):
        for form in ("eager", "tuned", "graphed"):
            ours = first(out, f"step_{model}_{form}", bench="train_bench")
            torch = first(out, f"torch_{model}_{form}", framework="torch")
            rows.append({"model": model, "batch": ours and ours.get("batch"), "form": form,
                         "ringlet_ms": ours and ours.get("step_ms"),
                         "torch_ms": torch and torch.get("step_ms"),
                         "per_step": ours and ours.get("per_step")})
    for row in rows:
        row["ratio"] = ratio(row["ringlet_ms"], row["torch_ms"])
    return rows


# all_reduce_np<NAME>.log: 1, 2, 4 ranks in processes, 2 as threads, 4 as threads per algorithm.
ALL_REDUCE_RUNS = (1, 2, 4, "2_threads", "4_ring", "4_rd", "4_rabenseifner", "4_tree")


def rank0_device(path):
    """The device of rank 0 in a benchmark's header ('#  Rank  0 ... device cuda:0 [...]'): the
    emulated one where CUDA did not load."""
    if os.path.exists(path):
        for line in open(path, errors="replace"):
            match = re.match(r"#\s+Rank\s+0 .* device (\S+) \[", line)
            if match:
                return match.group(1)
    return None


def size_text(size):
    return next(f"{size >> s} {unit}" for s, unit in ((30, "GiB"), (20, "MiB"), (10, "KiB"), (0, "B"))
                if size >> s or s == 0)


def run_label(name):
    """'2_threads' -> '2 ranks as threads'; '4_tree' -> '4 ranks as threads, tree'."""
    ranks, _, form = str(name).partition("_")
    label = f"{ranks} rank" + ("" if ranks == "1" else "s")
    return label if not form else label + " as threads" + ("" if form == "threads" else ", " + form)


def all_reduce_rows(out):
    rows = {}
    for np in ALL_REDUCE_RUNS:
        records = first_all(out, f"all_reduce_np{np}")
        small = [r["ip_us"] for r in records if r.get("size", 1 << 40) <= 64 * 1024]
        sized = [r for r in records if "size" in r and "ip_busbw" in r]
        largest = max(sized, key=lambda r: r["size"]) if sized else None
        waits = [r[k] for r in records for k in ("ip_host_waits", "oop_host_waits") if k in r]
        messages = [r[k] for r in records for k in ("ip_host_messages", "oop_host_messages")
                    if k in r]
        rows[np] = {"small_max_us": max(small) if small else None,
                    "largest_bytes": largest and largest["size"],
                    "busbw_largest": largest and largest["ip_busbw"],
                    "device": rank0_device(os.path.join(out, f"all_reduce_np{np}.log")),
                    "wrong": sum(r.get("ip_wrong", 0) + r.get("oop_wrong", 0) for r in records),
                    "max_host_waits_per_op": max(waits, default=None),
                    "max_host_messages_per_op": max(messages, default=None)}
    nccl = first_all(out, "nccl_np1")
    rows["nccl_np1_small_max_us"] = max((r["ip_us"] for r in nccl if r.get("size", 0) <= 65536),
                                        default=None)
    copy = [r for r in first_all(out, "copy_bandwidth") if "copy_gbps" in r]
    rows["copy_gbps"] = max((r["copy_gbps"] for r in copy), default=None)
    return rows


def first_all(out, name):
    return json_lines(os.path.join(out, name + ".log"))


def ddp_row(out):
    ours = first(out, "ddp_np2", bench="train_bench")
    one = first(out, "step_fmnist_cnn_eager", bench="train_bench")
    gloo = first(out, "torch_ddp_gloo", bench="torch_train_step")
    nccl = first(out, "torch_ddp_nccl", bench="torch_train_step")
    row = {"ringlet_np2_images_s": ours and ours.get("images_per_s"),
           "ringlet_np1_images_s": one and one.get("images_per_s"),
           "torch_gloo_images_s": gloo and gloo.get("images_per_s"),
           "torch_nccl": nccl and (nccl.get("error") or nccl.get("images_per_s"))}
    row["np2_over_np1"] = ratio(row["ringlet_np2_images_s"], row["ringlet_np1_images_s"])
    row["over_torch_gloo"] = ratio(row["ringlet_np2_images_s"], row["torch_gloo_images_s"])
    return row


def training_row(out):
    """The last epoch of ringlet train on the device (its run directory's metrics.jsonl)."""
    records = json_lines(os.path.join(out, "train_device", "metrics.jsonl"))
    epochs = [r for r in records if "accuracy" in r]
    if not epochs:
        return None
    last = epochs[-1]
    return {"epochs": last.get("epoch"), "accuracy": last.get("accuracy"),
            "seconds": sum(r.get("seconds", 0) for r in epochs),
            "images_per_s": last.get("images_per_s")}


def tensor_core_kernels(out):
    path = os.path.join(out, "tensor_core_kernels.txt")
    return [line.strip() for line in open(path)] if os.path.exists(path) else None


def print_training(training):
    if training is None:
        print("\ntraining: not run (no dataset, or it failed: see train_device.log)")
        return
    print(f"\ntraining, ringlet train on the device, {training['epochs']} epoch(s):"
          f" test accuracy {fmt(training['accuracy'], 4)} (the bar on a GPU: >= 0.89 after 3),"
          f" {fmt(training['seconds'], 1)} s training, {fmt(training['images_per_s'], 0)} images/s")


def print_table(tests, steps, reduce, ddp, kernels):
    print("tests (exit status: 0 pass, 77 skipped):")
    for name, status in tests.items():
        print(f"  {name:28} {status}")
    print("\ntraining step, ms (ringlet / PyTorch on the same GPU):")
    print(f"  {'model':11} {'batch':>5} {'form':8} {'ringlet':>9} {'torch':>9} {'ratio':>6}"
          f" {'ops/step':>8} {'syncs':>6}")
    for r in steps:
        per = r["per_step"] or {}
        print(f"  {r['model']:11} {str(r['batch'] or '-'):>5} {r['form']:8}"
              f" {fmt(r['ringlet_ms'], 3):>9} {fmt(r['torch_ms'], 3):>9} {fmt(r['ratio']):>6}"
              f" {fmt(per.get('stream_ops'), 1):>8} {fmt(per.get('host_syncs')):>6}")
    if kernels is None:
        print("  tensor-core kernels: not profiled (no GPU or no nsys)")
    else:
        print(f"  tensor-core kernels in the tuned resnet20 step: {len(kernels)} kinds"
              + (f", e.g. {kernels[0][:90]}" if kernels else ""))
    print("\nall-reduce on device buffers (-g 1, ipc):")
    for np in ALL_REDUCE_RUNS:
        r = reduce[np]
        largest = r["largest_bytes"] and size_text(r["largest_bytes"])
        print(f"  {run_label(np)} on {r['device'] or '-'}: slowest of 8 B-64 KiB"
              f" {fmt(r['small_max_us'], 1)} us, busbw at {largest or '-'}"
              f" {fmt(r['busbw_largest'])} GB/s, #wrong {r['wrong']},"
              f" host waits / messages per op at most {fmt(r['max_host_waits_per_op'], 1)}"
              f" / {fmt(r['max_host_messages_per_op'], 1)}")
    print(f"  NCCL, 1 rank: slowest of 8 B-64 KiB {fmt(reduce['nccl_np1_small_max_us'], 1)} us;"
          f" device-to-device copy {fmt(reduce['copy_gbps'], 0)} GB/s")
    print("\nDDP, fmnist_cnn batch 64 per rank, 2 ranks on one GPU:")
    print(f"  ringlet {fmt(ddp['ringlet_np2_images_s'], 0)} images/s"
          f" = {fmt(ddp['np2_over_np1'])}x one rank ({fmt(ddp['ringlet_np1_images_s'], 0)}),"
          f" {fmt(ddp['over_torch_gloo'])}x PyTorch DDP over gloo"
          f" ({fmt(ddp['torch_gloo_images_s'], 0)}); NCCL: {ddp['torch_nccl'] or '-'}")


def main():
    out = sys.argv[1]
    tests = statuses(out)
    steps, reduce, ddp = step_rows(out), all_reduce_rows(out), ddp_row(out)
    kernels, training = tensor_core_kernels(out), training_row(out)
    print_table(tests, steps, reduce, ddp, kernels)
    print_training(training)
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump({"statuses": tests, "steps": steps, "tensor_core_kernels": kernels,
                   "training": training,
                   "all_reduce": {str(k): v for k, v in reduce.items()}, "ddp": ddp}, f, indent=1)
    failed = [n for n, s in tests.items() if s not in (0, 77)]
    if os.environ.get("GPU_CHECK_GPU") == "1":  # on a GPU, a device run on emu lost its GPU
        failed += [f"all_reduce_np{np} (on {r['device']}, not the GPU)" for np, r in reduce.items()
                   if isinstance(r, dict) and str(r.get("device")).startswith("emu")]
    if failed:
        print(f"\ngpu_check: failed or stopped: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

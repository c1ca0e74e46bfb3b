#!/usr/bin/env python3
"""bench/gpu_check.sh's CPU-side part (a meson test): the script run with GPU_CHECK_DRY=1 on the
emulated device, a few steps each. Every run it makes must pass (or skip, saying why), the last
table must come out, and results.json must hold ringlet's six training-step figures (two models
x three forms), the all-reduce rows with no wrong element, the DDP row and, where the dataset is
installed, a short ringlet train on the device with its accuracy.

usage: gpu_check_dry.py SOURCE_ROOT BUILD_DIR
"""
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "helpers"))
from checks import check, finish  # tests/helpers/checks.py  # noqa: E402


def main():
    source, build = sys.argv[1], sys.argv[2]
    with tempfile.TemporaryDirectory(prefix="ringlet_gpu_check_") as out:
        env = dict(os.environ, GPU_CHECK_DRY="1", OUT=out)
        proc = subprocess.run(["bash", os.path.join(source, "bench", "gpu_check.sh"), build],
                              capture_output=True, text=True, env=env, timeout=240)
        text = proc.stdout + proc.stderr
        check(proc.returncode == 0, f"gpu_check.sh exits 0 (got {proc.returncode}):\n{text[-3000:]}")
        check("no GPU here (or GPU_CHECK_DRY=1)" in text, "it says it runs the CPU-side part")
        check("skipped: PyTorch's fmnist_cnn eager step (no GPU)" in text,
              "PyTorch's runs are skipped, saying why")
        check(text.rstrip().splitlines()[-1].startswith("gpu_check: done in"), "it ends")
        check("training step, ms (ringlet / PyTorch on the same GPU):" in text, "the table")
        results = json.load(open(os.path.join(out, "results.json")))
        steps = results["steps"]
        check(len(steps) == 6, f"six training-step rows, got {len(steps)}")
        for row in steps:
            check(row["ringlet_ms"] is not None and row["ringlet_ms"] > 0,
                  f"ringlet's {row['model']} {row['form']} step measured: {row}")
            check(row["torch_ms"] is None, "no PyTorch figure without a GPU")
        graphed = [r for r in steps if r["form"] == "graphed"]
        check(all(r["per_step"]["host_syncs"] <= 1 for r in graphed),
              f"a graphed step waits at most once: {graphed}")
        for np in ("1", "2", "4"):
            check(results["all_reduce"][np]["wrong"] == 0, f"all-reduce on {np} rank(s): 0 wrong")
        check(results["ddp"]["ringlet_np2_images_s"] is not None, "the DDP row")
        if os.path.exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz"):
            training = results["training"]
            check(training is not None and 0 <= training["accuracy"] <= 1,
                  f"ringlet train ran on the device and reported its accuracy: {training}")
        else:
            check("skipped: ringlet train on the device" in text, "the training run skips")
        check(all(s in (0, 77) for s in results["statuses"].values()),
              f"every run passed or skipped: {results['statuses']}")
    return finish()


if __name__ == "__main__":
    sys.exit(main())

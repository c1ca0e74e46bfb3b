#!/usr/bin/env python3
"""DDP scaling on one machine: how much faster 2 ranks train than 1, and where the rest goes.

Interleaved for --rounds rounds, each step time the median of --steps full steps (forward,
backward, gradient sync, SGD) of fmnist_cnn at batch 64 per rank, 1 thread per rank:
  one    bench/train_bench: 1 rank
  pair      two 1-rank train_bench runs at once, nothing shared: what running two processes
            on this machine costs by itself (cores, caches and memory bandwidth they contend
            for), the ceiling for DDP
  lockstep  bench/train_bench --nproc 2 --sync barrier: 2 local ranks, no DDP, waiting for
            each other once a step (a barrier where DDP's gradient sync ends): what ranks in
            lockstep cost before any gradient moves, the ceiling for any synchronous data
            parallelism here
  ddp       bench/train_bench --nproc 2: DDP over 2 local ranks (the slowest rank's median)
and, with Debian's PyTorch and Fashion-MNIST (/usr/bin/python3 with python3-torch, and
dataset-fashion-mnist; skipped, saying so, without either):
  torch_one  bench/peers/src/train_fmnist.py step (1 thread)
  torch_ddp  bench/peers/src/train_fmnist.py ddp_step (DDP over gloo, 2 x 1 thread)
PyTorch's runs always take the median of 50 steps (train_fmnist.py's own count).

The table gives the median of each over the rounds and images/s; then the scaling of ddp over
one (2 x one / ddp), the ceilings pair and lockstep set (2 x one / pair, 2 x one / lockstep),
where the gap goes (pair - one: contention of two processes; lockstep - pair: waiting for each
other once a step; ddp - lockstep: DDP's gradient sync, its all-reduces and copies; the last
two also round by round, by_round), what lockstep would cost if the ranks' steps were
independent (lockstep_ms: the pair's step times, train_bench's step_samples_ms, paired at
random, each step taking the slower rank's time), where the runs' steps went as measured in
one, pair, lockstep and ddp (train_bench's time_split, mean over the ranks or processes, median
over the rounds: computing, preempted, blocked, other threads' CPU; and how far the ranks'
computing lay apart), and ddp against torch_ddp. The last line is JSON.

Placement: bench/core_probe runs beside the runs as a monitor (when built), and each run is
labelled with where the host had the two virtual CPUs meanwhile (near: sharing a core or a
cache; apart; mixed), as bench/compare_peers.py does; the scaling is also given over the rounds
of each placement in which one, pair and ddp all ran there ("by_placement" in the JSON).

usage: bench/ddp_scaling.py [--rounds 3] [--steps 50] [--build DIR] [--no-torch] [--json FILE]
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))
import compare_peers  # noqa: E402  (the placement labels)
from placement_monitor import PlacementMonitor  # noqa: E402
TORCH_PY = "/usr/bin/python3"
TRAIN_FMNIST = os.path.join(ROOT, "bench", "peers", "src", "train_fmnist.py")
FMNIST = "/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz"
BATCH = 64


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--no-torch", action="store_true", help="leave PyTorch's runs out")
    ap.add_argument("--json", help="also write the JSON summary to this file")
    args = ap.parse_args()
    if args.rounds < 1 or args.steps < 1:
        ap.error("--rounds and --steps must be >= 1")
    return args


def train_bench_cmd(args, nproc, sync="ddp"):
    cmd = [os.path.join(args.build, "bench", "train_bench"), "--threads", "1", "--steps",
           str(args.steps)]
    return cmd + (["--nproc", str(nproc), "--sync", sync] if nproc > 1 else [])


def bench_line(output, cmd):
    """train_bench's JSON line (with --nproc, rank 0's, whose medians are the slowest rank's)."""
    for line in reversed(output.splitlines()):
        start = line.find("{")
        if start >= 0 and '"step_ms"' in line:
            return json.loads(line[start:])
    raise RuntimeError(f"no step_ms in the output of {' '.join(cmd)}:\n{output[-2000:]}")


def lockstep_ms(a, b):
    """What waiting for each other would add to two ranks' median step if their step times
    were those of a and b, independent of each other: every step then takes the slower rank's
    time, so the median of max(x, y) over every pairing of a step of a with one of b, less the
    slower one's own median (the pair's figure)."""
    slower = [max(x, y) for x in a for y in b]
    return statistics.median(slower) - max(statistics.median(a), statistics.median(b))


def run_one(cmd, env=None):
    done = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          timeout=600, env=env)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {done.returncode}:\n{done.stdout[-2000:]}")
    return done.stdout


SPLIT_FIELDS = ("computing_ms", "preempted_ms", "blocked_ms", "other_threads_ms")


def mean_split(splits):
    """Each field of train_bench's time_split entries averaged over them (ranks or processes),
    and "apart_ms": the largest computing_ms less the smallest, how far the ranks' own work
    lay apart. A field some entry lacks (null: the kernel keeps no run-queue wait) is None."""
    out = {}
    for field in SPLIT_FIELDS:
        values = [s.get(field) for s in splits]
        out[field] = None if None in values else sum(values) / len(values)
    computing = [s["computing_ms"] for s in splits]
    out["apart_ms"] = max(computing) - min(computing)
    return out


def median_split(per_round):
    """The median over the rounds of each field of mean_split's results (None if any is)."""
    out = {}
    for field in SPLIT_FIELDS + ("apart_ms",):
        values = [r[field] for r in per_round]
        out[field] = None if None in values else statistics.median(values)
    return out


def ringlet_step(args, nproc, splits, sync="ddp"):
    """train_bench's step over nproc local ranks (the slowest rank's median), synchronized by
    DDP or only by a barrier a step (sync). Appends to splits where the ranks' steps went
    (mean_split)."""
    cmd = train_bench_cmd(args, nproc, sync)
    line = bench_line(run_one(cmd), cmd)
    splits.append(mean_split(line["time_split"]))
    return line["step_ms"]


def ringlet_pair(args, lockstep, splits):
    """Two independent 1-rank runs started together; the slower one's step. Appends to
    lockstep what waiting for each other would have added to it (lockstep_ms), and to splits
    where the two processes' steps went (mean_split)."""
    cmd = train_bench_cmd(args, 1)
    procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for _ in range(2)]
    try:
        outs = [p.communicate(timeout=600)[0] for p in procs]
    finally:
        for p in procs:  # none outlives the pair (a timeout, an interrupt)
            if p.poll() is None:
                p.kill()
                p.wait()
    for p, out in zip(procs, outs):
        if p.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} exited {p.returncode}:\n{out[-2000:]}")
    lines = [bench_line(out, cmd) for out in outs]
    lockstep.append(lockstep_ms(*(line["step_samples_ms"] for line in lines)))
    splits.append(mean_split([line["time_split"][0] for line in lines]))
    return max(line["step_ms"] for line in lines)


def torch_step(mode):
    """PyTorch's step: the last fwd+bwd+sgd STEP line (step) or the DDPSTEP line (ddp_step)."""
    env = dict(os.environ, OMP_NUM_THREADS="1")
    out = run_one([TORCH_PY, TRAIN_FMNIST, mode], env=env)
    pattern = r"DDPSTEP .*median_ms=([0-9.]+)" if mode == "ddp_step" else \
        r"STEP round=\d+ fwd\+bwd\+sgd +median_ms=([0-9.]+)"
    found = re.findall(pattern, out)
    if not found:
        raise RuntimeError(f"no step time in train_fmnist.py {mode}:\n{out[-2000:]}")
    return float(found[-1])


def torch_missing():
    """Why PyTorch's runs cannot happen here, or None when they can."""
    if not os.path.exists(TORCH_PY):
        return f"no {TORCH_PY}"
    if subprocess.run([TORCH_PY, "-c", "import torch"], stdout=subprocess.DEVNULL,
                      stderr=subprocess.DEVNULL).returncode != 0:
        return f"{TORCH_PY} cannot import torch (apt-get install python3-torch)"
    if not os.path.exists(FMNIST):
        return f"no {FMNIST} (apt-get install dataset-fashion-mnist)"
    return None


def measure(args, with_torch):
    """({name: [step ms per round]}, {name: [placement per round]}, [the pair's lockstep_ms
    per round], {"one"/"pair"/"lockstep"/"ddp": [mean_split per round]}), the runs of each round
    interleaved."""
    lockstep = []
    splits = {"one": [], "pair": [], "lockstep": [], "ddp": []}
    runs = {
        "one": lambda: ringlet_step(args, 1, splits["one"]),
        "pair": lambda: ringlet_pair(args, lockstep, splits["pair"]),
        "lockstep": lambda: ringlet_step(args, 2, splits["lockstep"], sync="barrier"),
        "ddp": lambda: ringlet_step(args, 2, splits["ddp"]),
    }
    if with_torch:
        runs["torch_one"] = lambda: torch_step("step")
        runs["torch_ddp"] = lambda: torch_step("ddp_step")
    results = {name: [] for name in runs}
    spans = {name: [] for name in runs}
    placement = PlacementMonitor(args.build)
    try:
        for r in range(args.rounds):
            for name, fn in runs.items():
                start = time.time()
                results[name].append(fn())
                spans[name].append((start, time.time()))
            print(f"# round {r + 1}: " + ", ".join(f"{n} {v[-1]:.2f} ms" for n, v in
                                                    results.items()), flush=True)
    finally:
        samples = placement.stop()
    states = {name: [compare_peers.state_of(span, samples) for span in v]
              for name, v in spans.items()}
    if samples is not None:
        for r in range(args.rounds):
            print(f"# round {r + 1} placement: " +
                  ", ".join(f"{n} {states[n][r]}" for n in runs), flush=True)
    return results, states, lockstep, splits


def by_placement(results, states):
    """{state: scaling, ceiling and the rounds} over the runs of one, pair and ddp in each
    placement (each median over its own runs there)."""
    out = {}
    for state in compare_peers.STATES:
        med = {}
        for name in ("one", "pair", "ddp"):
            there = [v for v, s in zip(results[name], states[name]) if s == state]
            if not there:
                break
            med[name] = (statistics.median(there), len(there))
        if len(med) == 3:
            out[state] = {"step_ms": {n: m for n, (m, _) in med.items()},
                          "runs": {n: k for n, (_, k) in med.items()},
                          "scaling": 2 * med["one"][0] / med["ddp"][0],
                          "ceiling": 2 * med["one"][0] / med["pair"][0]}
    return out


def by_round(results):
    """The medians over the rounds of lockstep - pair and ddp - lockstep within each round: the
    runs of one round ran back to back, so the machine's drift between rounds cancels."""
    def median_gap(later, earlier):
        return statistics.median(b - a for a, b in zip(results[earlier], results[later]))
    return {"lockstep_cost_ms": median_gap("lockstep", "pair"),
            "gradient_sync_ms": median_gap("ddp", "lockstep")}


def report(measured):
    results, states, lockstep, splits = measured
    med = {name: statistics.median(v) for name, v in results.items()}
    ranks = {"one": 1, "pair": 2, "lockstep": 2, "ddp": 2, "torch_one": 1, "torch_ddp": 2}
    print("| run | ranks | step ms (median) | images/s |")
    print("|---|---|---|---|")
    for name, ms in med.items():
        print(f"| {name} | {ranks[name]} | {ms:.2f} | {ranks[name] * BATCH / ms * 1e3:.0f} |")
    summary = {"bench": "ddp_scaling", "step_ms": med,
               "scaling": 2 * med["one"] / med["ddp"],
               "ceiling": 2 * med["one"] / med["pair"],
               "lockstep_ceiling": 2 * med["one"] / med["lockstep"],
               "contention_ms": med["pair"] - med["one"],
               "ddp_cost_ms": med["ddp"] - med["pair"],
               "lockstep_cost_ms": med["lockstep"] - med["pair"],
               "gradient_sync_ms": med["ddp"] - med["lockstep"],
               "lockstep_ms": statistics.median(lockstep)}
    print(f"# ddp / one: {summary['scaling']:.3f}x (target 1.9); two bare processes allow "
          f"{summary['ceiling']:.3f}x, two ranks in lockstep without DDP "
          f"{summary['lockstep_ceiling']:.3f}x")
    print(f"# where the step grows from one to ddp: {summary['contention_ms']:+.2f} ms two "
          f"processes on this machine, {summary['lockstep_cost_ms']:+.2f} ms waiting for each "
          f"other once a step (lockstep - pair), {summary['gradient_sync_ms']:+.2f} ms DDP's "
          f"gradient sync (ddp - lockstep)")
    summary["by_round"] = by_round(results)
    print(f"# round by round (the runs back to back), medians: lockstep - pair "
          f"{summary['by_round']['lockstep_cost_ms']:+.2f} ms, ddp - lockstep "
          f"{summary['by_round']['gradient_sync_ms']:+.2f} ms")
    print(f"# waiting in lockstep as the pair's steps paired at random would have it: about "
          f"{summary['lockstep_ms']:.2f} ms (each step takes the slower rank's time)")
    summary["time_split"] = {name: median_split(v) for name, v in splits.items()}
    print_time_split(summary["time_split"])
    summary["by_placement"] = by_placement(results, states)
    for state, v in summary["by_placement"].items():
        print(f"# {state} only (one/pair/ddp runs {v['runs']['one']}/{v['runs']['pair']}/"
              f"{v['runs']['ddp']}): ddp / one {v['scaling']:.3f}x, two bare processes allow "
              f"{v['ceiling']:.3f}x")
    if "torch_ddp" in med:
        summary["vs_torch_ddp"] = med["torch_ddp"] / med["ddp"]
        summary["torch_scaling"] = 2 * med["torch_one"] / med["torch_ddp"]
        print(f"# ddp / PyTorch DDP (gloo): {summary['vs_torch_ddp']:.3f}x (target 1.5); PyTorch's "
              f"own scaling {summary['torch_scaling']:.3f}x")
    return summary


def print_time_split(split):
    """Where a full step of one, of the pair's processes and of lockstep's and ddp's ranks went
    (train_bench's time_split), side by side."""
    def ms(field):
        return " / ".join("unknown" if split[n][field] is None else f"{split[n][field]:.2f}"
                          for n in ("one", "pair", "lockstep", "ddp"))
    print(f"# a step of one / the pair (mean of its processes) / lockstep / ddp (means of their "
          f"ranks), median over rounds: computing {ms('computing_ms')}, preempted "
          f"{ms('preempted_ms')}, blocked {ms('blocked_ms')} ms; other threads' CPU "
          f"{ms('other_threads_ms')} ms")
    print(f"# the ranks' computing lay {split['ddp']['apart_ms']:.2f} ms apart in ddp, "
          f"{split['lockstep']['apart_ms']:.2f} in lockstep (the pair's processes' "
          f"{split['pair']['apart_ms']:.2f}): the faster rank waits that long, blocked")


def main():
    args = parse_args()
    missing = None if args.no_torch else torch_missing()
    with_torch = not args.no_torch and missing is None
    if missing:
        print(f"# PyTorch skipped: {missing}")
    print(f"# ddp_scaling: fmnist_cnn, batch {BATCH} per rank, 1 thread per rank, "
          f"{args.steps} steps, {args.rounds} round(s), {os.cpu_count()} CPU(s)", flush=True)
    try:
        summary = report(measure(args, with_torch))
    except (RuntimeError, OSError, subprocess.TimeoutExpired) as e:
        print(f"ddp_scaling: {e}", file=sys.stderr)
        return 1
    line = json.dumps(summary, sort_keys=True)
    print(line)
    if args.json:
        with open(args.json, "w") as f:
            f.write(line + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

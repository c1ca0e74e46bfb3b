#!/usr/bin/env python3
"""All-reduce and DDP training across simulated hosts.

Two network namespaces are the two hosts, joined by a veth pair whose both ends are limited
with `tc tbf` (default 2 Gbit/s each way). In each, `ringlet launch` starts --nproc-per-node
ranks (node 0 hosts the store); the ranks of a namespace share a host (shm), the namespaces
talk over tcp across the veth. Everything is torn down at the end. Needs root (CAP_NET_ADMIN),
ip and tc (iperf3 for the link's limit); exits 77, saying why, without them.

all-reduce: bench/all_reduce_perf under each RINGLET_ALGO of --algos (default: the flat ring,
and auto, which picks the hierarchical all-reduce here), interleaved for --rounds rounds; the
table gives the median busbw of each, their ratio, and the link's limit from the same run:
iperf3 across the veth, both ways at once, and what that allows each algorithm (the flat ring
sends 2(n-1)/n of the buffer over the ring link out of each host, the hierarchical all-reduce
2(h-1)/h, so its busbw can exceed the link's rate by their ratio).

train: bench/train_bench (DDP, synthetic data) under each --comm-hook of --hooks, interleaved:
median step time and gradient sync wait, and the ratio to no hook.

usage: bench/simulated_hosts.py [all-reduce|train|both] [--rate 2gbit] [--sizes 1M,64M]
           [--rounds 3] [--nproc-per-node 2] [--iters 5] [--warmup 1] [--algos ring,auto]
           [--hooks none,fp16_compress,bf16_compress] [--model fmnist_cnn] [--steps 20]
           [--build DIR] [--no-iperf] [--json FILE]
"""
import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ADDR = ("10.79.0.1", "10.79.0.2")


def run(cmd, check=True, **kw):
    return subprocess.run(cmd, check=check, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, **kw)


class CannotBuildHosts(Exception):
    """The namespaces, veth pair or qdisc could not be made (no CAP_NET_ADMIN, no veth...)."""


class Hosts:
    """Two namespaces joined by a veth pair, each end shaped by tbf; removed on exit."""

    def __init__(self, rate, burst):
        tag = str(os.getpid())
        self.ns = ("rglh0_" + tag, "rglh1_" + tag)
        self.veth = ("rgh0_" + tag, "rgh1_" + tag)
        self.rate, self.burst = rate, burst

    def __enter__(self):
        try:
            for ns in self.ns:
                run(["ip", "netns", "add", ns])
            run(["ip", "link", "add", self.veth[0], "type", "veth", "peer", "name", self.veth[1]])
            for i in (0, 1):
                ns, dev = self.ns[i], self.veth[i]
                run(["ip", "link", "set", dev, "netns", ns])
                run(["ip", "-n", ns, "addr", "add", ADDR[i] + "/24", "dev", dev])
                run(["ip", "-n", ns, "link", "set", dev, "up"])
                run(["ip", "-n", ns, "link", "set", "lo", "up"])
                run(["tc", "-n", ns, "qdisc", "add", "dev", dev, "root", "tbf", "rate", self.rate,
                     "burst", self.burst, "latency", "50ms"])
        except subprocess.CalledProcessError as e:
            self.__exit__(None, None, None)
            raise CannotBuildHosts(f"{' '.join(e.cmd)}: {e.stdout.strip()}") from e
        return self

    def __exit__(self, *exc):
        for ns in self.ns:
            run(["ip", "netns", "del", ns], check=False)  # takes its veth end along

    def exec(self, host, cmd):
        return ["ip", "netns", "exec", self.ns[host]] + cmd


def link_limit(hosts):
    """iperf3 across the veth, both ways at once: the slower direction's GB/s (1e9 B/s)."""
    server = subprocess.Popen(hosts.exec(1, ["iperf3", "-s", "-1", "-B", ADDR[1]]),
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(50):  # until the server listens
            probe = run(hosts.exec(0, ["iperf3", "-c", ADDR[1], "-t", "3", "--bidir", "-J"]),
                        check=False, timeout=60)
            if probe.returncode == 0:
                break
            time.sleep(0.1)
        else:
            raise RuntimeError("iperf3 across the veth did not run: " + probe.stdout[-300:])
        end = json.loads(probe.stdout)["end"]
        rates = [end["sum_received"]["bits_per_second"],
                 end["sum_received_bidir_reverse"]["bits_per_second"]]
        return min(rates) / 8 / 1e9
    finally:
        server.kill()
        server.wait()


def launch_both(hosts, args, env, command, port, what):
    """One job of 2 x nproc ranks running `command` (under `env`); node 0's output."""
    procs = []
    for node in (1, 0):
        cmd = ["env"] + env + ["timeout", str(args.job_timeout), os.path.join(args.build, "trainer", "ringlet"),
                               "launch", "--nnodes", "2", "--nproc-per-node",
                               str(args.nproc_per_node), "--node-rank", str(node),
                               "--master-addr", ADDR[0], "--master-port", str(port),
                               "--rdzv-timeout", "60", "--quiet-others", "--"] + command
        procs.append(subprocess.Popen(hosts.exec(node, cmd), stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True))
    try:
        outputs = [p.communicate(timeout=args.job_timeout)[0] for p in procs]
    except subprocess.TimeoutExpired:
        for p in procs:
            p.kill()
            p.wait()
        raise RuntimeError(f"{what}: not done after {args.job_timeout} s; stopped")
    if any(p.returncode != 0 for p in procs):
        raise RuntimeError(f"{what}: a node failed:\n" + "\n".join(o[-2000:] for o in outputs))
    records = []
    for line in outputs[1].splitlines():
        line = re.sub(r"^\[rank \d+\] ", "", line)
        if line.startswith("{"):
            records.append(json.loads(line))
    if not records:
        raise RuntimeError(f"{what}: no results in node 0's output:\n" + outputs[1][-2000:])
    return records


class Ports:
    """A fresh store port per job (no TIME_WAIT leftovers in the way)."""

    def __init__(self):
        self.next = 29611

    def take(self):
        self.next += 1
        return self.next


def all_reduce_round(hosts, args, ports, results):
    """One run per RINGLET_ALGO: results[algo][size] gets (in-place, out-of-place busbw, algo
    actually run)."""
    perf = os.path.join(args.build, "bench", "all_reduce_perf")
    for algo in args.algos.split(","):
        command = [perf, "-b", str(args.size_list[0]), "-e", str(args.size_list[-1]), "-f", "2",
                   "-n", str(args.iters), "-w", str(args.warmup)]
        what = f"all_reduce_perf with RINGLET_ALGO={algo}"
        for rec in launch_both(hosts, args, ["RINGLET_ALGO=" + algo], command, ports.take(), what):
            if rec["ip_wrong"] or rec["oop_wrong"]:
                raise RuntimeError(f"{what}: wrong results at {rec['size']} B")
            results.setdefault(algo, {}).setdefault(rec["size"], []).append(
                (rec["ip_busbw"], rec["oop_busbw"], rec["algo"]))


def train_round(hosts, args, ports, results):
    """One train_bench job per hook: results[hook] gets its JSON line."""
    bench = os.path.join(args.build, "bench", "train_bench")
    for hook in args.hooks.split(","):
        command = [bench, "--model", args.model, "--steps", str(args.steps), "--warmup", "3",
                   "--comm-hook", hook]
        rec = launch_both(hosts, args, [], command, ports.take(), f"train_bench --comm-hook {hook}")
        results.setdefault(hook, []).append(rec[-1])


def size_list(text):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    out = []
    for item in text.split(","):
        m = re.fullmatch(r"(\d+)([KMG]?)", item.strip().upper())
        if not m:
            raise SystemExit(f"simulated_hosts: --sizes: '{item}' is not a size (e.g. 64M)")
        out.append(int(m.group(1)) * units.get(m.group(2), 1))
    return sorted(out)


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("what", nargs="?", default="both", choices=["all-reduce", "train", "both"])
    ap.add_argument("--rate", default="2gbit", help="tc tbf rate of each veth end (2gbit)")
    ap.add_argument("--burst", default="1mb", help="tc tbf burst (1mb)")
    ap.add_argument("--sizes", default="1M,64M",
                    help="smallest and largest bytes per rank; every power of two between")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--nproc-per-node", type=int, default=2)
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--algos", default="ring,auto")
    ap.add_argument("--hooks", default="none,fp16_compress,bf16_compress")
    ap.add_argument("--model", default="fmnist_cnn")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--no-iperf", action="store_true")
    ap.add_argument("--job-timeout", type=int, default=600, help="seconds per job (600)")
    ap.add_argument("--json", help="also write the summary line here")
    args = ap.parse_args()
    args.size_list = size_list(args.sizes)
    if min(args.rounds, args.nproc_per_node, args.iters, args.steps) < 1:
        ap.error("--rounds, --nproc-per-node, --iters and --steps must be at least 1")
    return args


def main():
    args = parse_args()
    if os.geteuid() != 0 or not shutil.which("ip") or not shutil.which("tc"):
        print("skipped: needs root (CAP_NET_ADMIN), ip and tc to build the simulated hosts")
        return 77
    ports = Ports()
    summary = {"bench": "simulated_hosts", "rate": args.rate, "hosts": 2,
               "ranks_per_host": args.nproc_per_node, "rounds": args.rounds}
    with Hosts(args.rate, args.burst) as hosts:
        limit = None
        if not args.no_iperf and shutil.which("iperf3"):
            limit = link_limit(hosts)
        summary["link_gbps"] = limit
        all_reduce, train = {}, {}
        for _ in range(args.rounds):
            if args.what in ("all-reduce", "both"):
                all_reduce_round(hosts, args, ports, all_reduce)
            if args.what in ("train", "both"):
                train_round(hosts, args, ports, train)
    header(args, limit)
    if all_reduce:
        summary["all_reduce"] = report_all_reduce(all_reduce, limit, 2 * args.nproc_per_node, 2)
    if train:
        summary["train"] = report_train(args, train)
    line = json.dumps(summary, sort_keys=True)
    print(line)
    if args.json:
        with open(args.json, "w") as f:
            f.write(line + "\n")
    return 0


def header(args, limit):
    print(f"# 2 simulated hosts x {args.nproc_per_node} ranks, veth limited to {args.rate} each "
          f"way (tc tbf), medians of {args.rounds} round(s); GB/s = 1e9 B/s")
    if limit is not None:
        print(f"# link, iperf3 both ways at once: {limit:.3f} GB/s each way")


def report_all_reduce(results, limit, n, h):
    flat_share, hier_share = 2 * (n - 1) / n, 2 * (h - 1) / h
    if limit is not None:
        print(f"# busbw bound: flat ring {limit:.3f} (its link out of a host carries "
              f"{flat_share:.2f} x the buffer), hierarchical {limit * flat_share / hier_share:.3f}"
              f" (a host sends {hier_share:.2f} x the buffer)")
    print(f"{'size':>10} {'RINGLET_ALGO':>12} {'ran':>13} {'in-place':>9} {'out-of-pl':>9}"
          f" {'vs ring':>8} {'of bound':>9}")
    rows = []
    for size in sorted(next(iter(results.values())).keys()):
        base = None
        for algo, by_size in results.items():
            runs = by_size[size]
            ip = statistics.median(r[0] for r in runs)
            oop = statistics.median(r[1] for r in runs)
            ran = "/".join(sorted({r[2] for r in runs}))
            base = ip if algo == "ring" else base
            bound = None
            if limit is not None:
                bound = limit * (flat_share / hier_share if ran == "hierarchical" else 1)
            ratio = f"{ip / base:8.2f}" if base else f"{'':>8}"
            of_bound = f"{ip / bound:9.2f}" if bound else f"{'':>9}"
            print(f"{size:>10} {algo:>12} {ran:>13} {ip:9.3f} {oop:9.3f} {ratio} {of_bound}")
            rows.append({"size": size, "algo": algo, "ran": ran, "ip_busbw": ip,
                         "oop_busbw": oop, "vs_ring": ip / base if base else None,
                         "bound": bound})
    return rows


def report_train(args, results):
    print(f"# train_bench --model {args.model}, {args.steps} steps: median step and gradient "
          f"sync wait (ms, slowest rank), images/s over all ranks")
    print(f"{'comm hook':>14} {'step ms':>9} {'sync ms':>9} {'images/s':>9} {'vs none':>8}")
    rows, base = [], None
    for hook, runs in results.items():
        step = statistics.median(r["step_ms"] for r in runs)
        sync = statistics.median(r["sync_ms"] for r in runs)
        images = statistics.median(r["images_per_s"] for r in runs)
        base = step if hook == "none" else base
        ratio = f"{step / base:8.2f}" if base else f"{'':>8}"
        print(f"{hook:>14} {step:9.2f} {sync:9.2f} {images:9.0f} {ratio}")
        rows.append({"hook": hook, "comm_hook": "/".join(sorted({r["comm_hook"] for r in runs})),
                     "step_ms": step, "sync_ms": sync, "images_per_s": images,
                     "vs_none": step / base if base else None})
    return rows


if __name__ == "__main__":
    try:
        sys.exit(main())
    except CannotBuildHosts as e:
        print(f"skipped: cannot build the simulated hosts: {e}")
        sys.exit(77)
    except RuntimeError as e:
        print(f"simulated_hosts: {e}", file=sys.stderr)
        sys.exit(1)

#!/usr/bin/env python3
"""The model against measurement, in one sitting: in each round, for each transport, `ringlet
model fit` measures this machine, then all_reduce_perf runs the ring (RINGLET_ALGO=ring: the model
simulates the algorithm that ran) at 2, 4 and 8 local ranks over it (shm, then tcp), 64 KiB -
64 MiB; `ringlet model predict` simulates each row with the profile fitted right before its runs
(for tcp, the profile's link within the host is the tcp one), in place and out of place, as the
row measures both. A fit takes forty seconds and the machine's load moves over minutes, so each
row is predicted from a fit of the same minute. Prints one table: measured median
(of the rounds; each round's time the mean of the in-place and out-of-place ones), the rounds'
spread (the slowest / the fastest: how far the measurement agrees with itself), predicted (the
median of the rounds' profiles' predictions), the fits' spread (the rounds' largest prediction /
their smallest: how far the fits agree with each other), predicted / measured, and whether that is
within 25%; then round by round, the median of each round's prediction over that round's time, and
whether that is within 25% (where the load moved between rounds, the medians of the two columns
before can come from different rounds).

"hosts" (in the default --transports when this runs as root with ip and tc): 2 x 2 ranks on two
network namespaces joined by a veth pair shaped with tc tbf (bench/simulated_hosts.py's, --rate
2gbit): `ringlet model fit --between-ranks`, launched with a rank in each namespace, measures the
link between them; the ring runs as one job of 2 x 2 ranks (shm within a namespace, tcp across);
the model gets 2 hosts of 2 ranks, each host half of this machine's cores (the namespaces share
them).

Where bench/core_probe is built and two CPUs are there, a placement monitor runs beside the
sitting (placement_monitor.py): on a VM the host moves the two virtual CPUs, and shm's times move
2-3x with them (bench/RESULTS.md, 2026-11-26 "Placement"). Each row then says where each round's
fit and its measurement ran (n near, a apart, m mixed: compare_peers.py's labels), and a last line
counts the rows within 25% over the rounds whose fit and measurement ran in one placement.

--keep DIR writes each round's fitted profiles (DIR/roundN/), the measured times and the
placements to DIR; --replay DIR predicts those rows again, with no fit and no measurement (to
compare two builds' models on one sitting).

usage: bench/model_check.py [--rounds N (default 5)] [--build DIR] [--ranks 2,4,8]
           [--transports shm,tcp,hosts] [--rate 2gbit] [--keep DIR | --replay DIR]
"""
import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import types

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare_peers  # noqa: E402  (the placement labels)
import simulated_hosts  # noqa: E402  (the namespaces and the launches across them)
from placement_monitor import PlacementMonitor  # noqa: E402

# The ranks settle onto their CPUs first: the model's costs are of ranks that run where they
# will stay (two ranks started on one CPU share it for about 0.1 s). Each size's timed loop lasts
# 0.3 s: the model's times are of a ring that runs on, and loops of 0.05 s caught slow stretches
# (8 ranks over shm, four sweeps each: 256 KiB 444-649 us, 1 MiB 1272-1684; at 0.3 s, 429-522
# and 1426-1461).
SIZES = ["-b", "64K", "-e", "64M", "-f", "4", "--warmup-time", "0.3", "--min-time", "0.3"]


def measure(build, ranks, transport):
    """{size: us} of one all_reduce_perf sweep of the ring."""
    env = dict(os.environ, RINGLET_ALGO="ring")
    cmd = [os.path.join(build, "bench", "all_reduce_perf"), "-np", str(ranks), "-t",
           transport] + SIZES
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600, check=True)
    return rows_of([json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")])


def rows_of(records):
    rows = {}
    for j in records:
        assert j["algo"] == "ring", j["algo"]
        rows[j["size"]] = (j["oop_us"] + j["ip_us"]) / 2
    return rows


def hosts_args(build):
    """What simulated_hosts.launch_both needs of its options."""
    return types.SimpleNamespace(build=build, job_timeout=600, nproc_per_node=2)


def measure_hosts(hosts, build, ports):
    """{size: us} of one all_reduce_perf sweep of the ring over 2 x 2 ranks on the namespaces."""
    perf = os.path.join(build, "bench", "all_reduce_perf")
    return rows_of(simulated_hosts.launch_both(hosts, hosts_args(build), ["RINGLET_ALGO=ring"],
                                               [perf] + SIZES, ports.take(),
                                               "all_reduce_perf across the namespaces"))


def fit_hosts(hosts, build, ports, folder):
    """A profile whose link between hosts is the veth's, measured by a rank in each namespace."""
    path = os.path.join(folder, "hosts.json")
    ringlet = os.path.join(build, "trainer", "ringlet")
    port = ports.take()
    procs = []
    for node in (1, 0):
        cmd = ["timeout", "300", ringlet, "launch", "--nnodes", "2", "--nproc-per-node", "1",
               "--node-rank", str(node), "--master-addr", simulated_hosts.ADDR[0],
               "--master-port", str(port), "--rdzv-timeout", "60", "--",
               ringlet, "model", "fit", "--between-ranks", "--out", path]
        procs.append(subprocess.Popen(hosts.exec(node, cmd), stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True))
    outputs = [p.communicate(timeout=330)[0] for p in procs]
    if any(p.returncode != 0 for p in procs):
        raise RuntimeError("model fit --between-ranks failed:\n" + "\n".join(outputs))
    lines = [re.sub(r"^\[rank \d+\] ", "", line) for line in outputs[1].splitlines()]
    print("\n".join(line for line in lines if not line.startswith(("[ringlet", "*", "Setting"))))
    with open(path) as f:
        p = json.load(f)
    # The two namespaces are one machine: each "host" has half of its cores.
    p["cores_per_host"] = max(1, p["cores_per_host"] // 2)
    with open(path, "w") as f:
        json.dump(p, f)
    return path


def predict(build, ranks, size, profile, per_host):
    """The ring's simulated time: the mean of its in-place and out-of-place runs, as a measured
    row's."""
    return statistics.mean(predict_ring(build, ranks, size, profile, per_host, place)
                           for place in ([], ["--out-of-place"]))


def predict_ring(build, ranks, size, profile, per_host, extra):
    cmd = [os.path.join(build, "trainer", "ringlet"), "model", "predict", "--ranks", str(ranks),
           "--size", str(size), "--profile", profile, "--no-sweep"] + extra
    if per_host:
        cmd += ["--per-host", str(per_host)]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=True).stdout
    for line in out.splitlines():
        cells = line.split()
        if cells and cells[0] == "ring":
            return float(cells[1])
    raise RuntimeError("no ring row in:\n" + out)


def fit_machine(build, folder, transport):
    """This machine's fitted profile, for `transport`'s rows: for tcp, the profile's link within
    a host is its tcp one."""
    path = os.path.join(folder, f"{transport}.json")
    fit = subprocess.run([os.path.join(build, "trainer", "ringlet"), "model", "fit", "--out", path],
                         capture_output=True, text=True, timeout=300, check=True).stdout
    print(fit)
    if transport == "tcp":
        with open(path) as f:
            p = json.load(f)
        p["intra"] = p["inter"]
        with open(path, "w") as f:
            json.dump(p, f)
    return path


def can_build_hosts():
    return os.geteuid() == 0 and shutil.which("ip") and shutil.which("tc")


def fit_for(args, folder, transport, hosts, ports):
    """The profile (in `folder`) that predicts `transport`'s rows, fitted right before its runs:
    the machine's, or for hosts the namespaces' link."""
    os.makedirs(folder, exist_ok=True)
    if transport == "hosts":
        return fit_hosts(hosts, args.build, ports, folder)
    return fit_machine(args.build, folder, transport)


def timed(spans, key, step):
    """step()'s result; its (start, end) unix times appended to spans[key]."""
    start = time.time()
    result = step()
    spans.setdefault(key, []).append((start, time.time()))
    return result


def sweep(args, transport, ranks, hosts, ports):
    """{size: us} for one transport at one rank count: the 2x2 netns hosts for "hosts", else
    ranks local processes."""
    if transport == "hosts":
        return measure_hosts(hosts, args.build, ports)
    return measure(args.build, ranks, transport)


def measure_all(args, ranks, transports, folder, hosts, ports):
    """{(transport, ranks, size): [us per round]}, the rounds interleaved, and each round's
    profiles: in each round, a fit right before each transport's runs predicts them, so that a
    row's figures and the profile that predicts it come from the same minute (the machine's load
    moves both, and a fit at the round's start was minutes from its tcp runs); and when each ran,
    {("fit", transport): [span per round], (transport, ranks): [span per round]}."""
    times, fits, spans = {}, [], {}
    for r in range(args.rounds):
        fit, where = {}, os.path.join(folder, f"round{r + 1}")
        for t in transports:
            fit[t] = timed(spans, ("fit", t), lambda: fit_for(args, where, t, hosts, ports))
            for n in [4] if t == "hosts" else ranks:
                swept = timed(spans, (t, n), lambda: sweep(args, t, n, hosts, ports))
                for size, us in swept.items():
                    times.setdefault((t, n, size), []).append(us)
        fits.append(fit)
    return times, fits, spans


def placements_of(spans, samples):
    """{("fit", transport): [label per round], (transport, ranks): [label per round]}: n near,
    a apart, m mixed, ? unknown; None without a monitor."""
    if samples is None:
        return None
    letter = {"near": "n", "apart": "a", "mixed": "m"}
    return {key: [letter.get(compare_peers.state_of(span, samples), "?") for span in each]
            for key, each in spans.items()}


def placement_cells(placements, t, n, rounds):
    """Each round's fit and measurement placements ("nn na ..."), and the rounds where the two
    are one placement (near or apart, not mixed); ("", all rounds) without a monitor."""
    if placements is None:
        return "", list(range(rounds))
    # A run kept before each transport had its own fit has one "fit" for all.
    fit = placements.get(("fit", t), placements.get("fit", []))
    run = placements.get((t, n), [])
    pairs = [(fit[r] if r < len(fit) else "?") + (run[r] if r < len(run) else "?")
             for r in range(rounds)]
    return " ".join(pairs), [r for r, p in enumerate(pairs) if p in ("nn", "aa")]


def report(args, times, fits, placements=None):
    """Each row: the measured median against the median of what each round's profiles predict
    (and how far those predictions spread), and each round's prediction against that round's
    time (the median of those ratios); with placements, where each round's fit and measurement
    ran, and the rows within 25% over the rounds whose two ran in one placement."""
    rounds = max(len(us) for us in times.values())
    monitored = placements is not None
    print(f"| transport | ranks | bytes | measured us (median of {rounds}) | rounds' spread "
          "| predicted us (median) | fits' spread | predicted / measured | within 25% "
          "| round by round, median ratio | within 25% |"
          + (" placements (fit, run) |" if monitored else ""))
    print("|---|---|---|---|---|---|---|---|---|---|---|" + ("---|" if monitored else ""))
    within = paired = steady = agreed = matched_rows = matched_within = 0
    for (t, n, size), us in sorted(times.items()):
        measured = statistics.median(us)
        spread = max(us) / min(us)
        steady += spread <= 1.25
        per_host = 2 if t == "hosts" else 0
        each = [predict(args.build, n, size, fit[t], per_host) for fit in fits]
        predicted = statistics.median(each)
        fits_spread = max(each) / min(each)
        agreed += fits_spread <= 1.25
        ratio = predicted / measured
        # A run kept with one set of profiles: that set predicts every round.
        ratios = [p / m for p, m in zip(each * len(us), us)]  # each round's
        by_round = statistics.median(ratios)
        ok, ok_paired = abs(ratio - 1) <= 0.25, abs(by_round - 1) <= 0.25
        within += ok
        paired += ok_paired
        where, same = placement_cells(placements, t, 4 if per_host else n, len(us))
        if monitored and same:
            matched_rows += 1
            matched_within += abs(statistics.median(ratios[r] for r in same) - 1) <= 0.25
        print(f"| {t} | {'2 x 2' if per_host else n} | {size} | {measured:.1f} | {spread:.2f} "
              f"| {predicted:.1f} | {fits_spread:.2f} | {ratio:.2f} | {'yes' if ok else 'no'} "
              f"| {by_round:.2f} | {'yes' if ok_paired else 'no'} |"
              + (f" {where} |" if monitored else ""))
    print(f"\n{within} of {len(times)} rows within 25% (the predictions' median against the "
          "measured median)")
    print(f"{paired} of {len(times)} rows within 25% round by round (the median of each round's "
          "prediction against its time)")
    print(f"{steady} of {len(times)} rows whose rounds (the slowest / the fastest) are within 25% "
          "of each other")
    print(f"{agreed} of {len(times)} rows whose rounds' fits predict within 25% of each other")
    if monitored:
        print(f"{matched_within} of {matched_rows} rows within 25% over the rounds whose fit and "
              "measurement ran in one placement (the rows with such a round)")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--build", default="build")
    parser.add_argument("--ranks", default="2,4,8")
    parser.add_argument("--transports", default=None,
                        help="shm,tcp,hosts (hosts only where namespaces can be built)")
    parser.add_argument("--rate", default="2gbit", help="the shaped link's tc tbf rate")
    parser.add_argument("--keep", metavar="DIR",
                        help="write the fitted profiles and the measured times here")
    parser.add_argument("--replay", metavar="DIR",
                        help="no fit, no measurement: predict a --keep run's rows again with "
                             "--build's model")
    args = parser.parse_args()
    ranks = [int(r) for r in args.ranks.split(",")]
    if args.transports is None:
        args.transports = "shm,tcp,hosts" if can_build_hosts() else "shm,tcp"
        if not can_build_hosts():
            print("# hosts: skipped: needs root (CAP_NET_ADMIN), ip and tc for the namespaces")
    transports = args.transports.split(",")
    ports = simulated_hosts.Ports()
    if args.replay:
        fits, times, placements = load(args.replay)
        report(args, times, fits, placements)
        return
    with tempfile.TemporaryDirectory() as scratch:
        folder = args.keep or scratch
        monitor = PlacementMonitor(args.build)
        try:
            if "hosts" not in transports:
                times, fits, spans = measure_all(args, ranks, transports, folder, None, ports)
            else:
                with simulated_hosts.Hosts(args.rate, "1mb") as hosts:
                    times, fits, spans = measure_all(args, ranks, transports, folder, hosts,
                                                     ports)
        finally:
            samples = monitor.stop()
        placements = placements_of(spans, samples)
        if placements is None:
            print("# placements: not monitored (needs bench/core_probe and two CPUs)")
        if args.keep:
            keep(folder, fits, times, placements)
        report(args, times, fits, placements)


def keep(folder, fits, times, placements):
    """Each round's profiles (paths within `folder`), the measured times and the placements,
    for --replay."""
    rows = [{"transport": t, "ranks": n, "bytes": size, "us": us}
            for (t, n, size), us in sorted(times.items())]
    rounds = [{t: os.path.relpath(path, folder) for t, path in fit.items()} for fit in fits]
    kept = {"profiles": rounds, "rows": rows}
    if placements is not None:
        kept["placements"] = [{"fit": v, "transport": k[1]} if k[0] == "fit"
                              else {"transport": k[0], "ranks": k[1], "rounds": v}
                              for k, v in placements.items()]
    with open(os.path.join(folder, "times.json"), "w") as f:
        json.dump(kept, f, indent=1)


def load(folder):
    """What keep() wrote: each round's profiles (found in `folder`; a run kept before the fit
    was repeated has one set, by file name) and {(transport, ranks, size): [us]}."""
    path = os.path.join(folder, "times.json")
    try:
        with open(path) as f:
            kept = json.load(f)
        rounds = kept["profiles"]
        if isinstance(rounds, dict):
            rounds = [{t: os.path.basename(p) for t, p in rounds.items()}]
        fits = [{t: os.path.join(folder, p) for t, p in fit.items()} for fit in rounds]
        times = {(r["transport"], r["ranks"], r["bytes"]): r["us"] for r in kept["rows"]}
        placements = None
        if "placements" in kept:  # kept by a sitting that monitored them
            placements = {placement_key(p): p["fit"] if "fit" in p else p["rounds"]
                          for p in kept["placements"]}
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        sys.exit(f"model_check: --replay {folder}: {path} is not a kept run ({e})")
    if not times or not fits:
        sys.exit(f"model_check: --replay {folder}: {path} has no "
                 f"{'rows' if not times else 'profiles'}")
    return fits, times, placements


def placement_key(kept):
    """A kept placement's key: ("fit", transport), "fit" (kept when one fit served every
    transport) or (transport, ranks)."""
    if "fit" in kept:
        return ("fit", kept["transport"]) if "transport" in kept else "fit"
    return (kept["transport"], kept["ranks"])


if __name__ == "__main__":
    main()

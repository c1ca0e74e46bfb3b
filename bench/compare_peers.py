"""Aggregates the logs of bench/compare_peers.sh: medians over rounds of time per op and busbw
per (implementation, place, np, size), one table per world size and place (in place, out of
place), the ratios ours/peer, and a verdict on every point.

Ours are all_reduce_perf's JSON lines (ip_ and oop_ columns); the peers' rows are the
"peer algo np size unit iters time_us algbw busbw check" lines of bench/peers, an algo ending
in "-oop" being out of place. The "loopback streams" rows (bench/peers/run_loopback.sh) are not
an implementation but the loopback's limit: the most busbw a TCP ring could reach.
tcp is compared with the TCP peers (Gloo, Open MPI over TCP, torch over gloo), shm with Open
MPI's shared-memory path. A point fails when the best peer of its kind is more than 5% faster,
unless ours is within 5% of the loopback's limit there (either side of it): then the peer
measured above the loopback's steady two-way rate (cache-resident messages can), and the verdict
says so. Ours well above that rate is no excuse: the stream test does not bind there.

Placement: on a VM the host moves the virtual CPUs while a job runs, and on the machines this is
measured on every implementation's shm and loopback times follow how far apart the two CPUs
are (2-4x). compare_peers.sh runs bench/core_probe beside the jobs (placement.log: "<unix time>
<round trip ns>" four times a second) and writes a "# span <start> <end>" line before each
result with when it ran. A result whose samples all show a round trip under APART_NS ran
"near" (the CPUs share a core or a cache), all at or above it "apart", else "mixed". With a
placement log the verdict compares ours with the peers within each placement both were
measured in (mixed runs left out), and the point is met only if it is met in each; a point
whose ours and peers never ran in the same placement is "unmatched" (rerun it). Without a
placement log every result counts as one placement, as before.
Standard library only.

usage: python3 compare_peers.py LOG_DIR
"""
import glob
import json
import os
import re
import statistics
import sys
from collections import defaultdict

UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}
TCP_PEERS = ("gloo ", "mpi tcp", "torch ")  # prefixes of the TCP peers
SHM_PEER = "mpi default"
LIMIT = "loopback streams"
PLACES = ("in place", "out of place")
SLACK = 1.05  # a peer this much faster (time) fails the point
APART_NS = 300  # a core_probe round trip at or above this: the CPUs sit apart (core_probe.cpp)
STATES = ("near", "apart")
NEIGHBOUR_S = 1.0  # a sample this close to a span that holds none stands for it


def human(n):
    for unit in ("GiB", "MiB", "KiB"):
        if n >= UNITS[unit] and n % UNITS[unit] == 0:
            return f"{n // UNITS[unit]} {unit}"
    return f"{n} B"


def read_placement(log_dir):
    """core_probe's samples, [(unix time, round trip ns)] in time order; None without a log or
    without a single sample in it (then saying so, with what the probe wrote instead)."""
    path = os.path.join(log_dir, "placement.log")
    if not os.path.exists(path):
        return None
    samples, other = [], []
    with open(path) as f:
        for line in f:
            parts = line.split()
            try:
                if line.startswith("#") or len(parts) != 2:
                    raise ValueError
                t, ns = float(parts[0]), float(parts[1])
            except ValueError:
                other.append(line.strip())
                continue
            if ns == ns:  # a sample whose partner did not answer is nan
                samples.append((t, ns))
    if not samples:
        said = "; ".join(o for o in other if o and not o.startswith("#"))[:300]
        print(f"# placement.log holds no samples{': ' + said if said else ''}; every result "
              "is compared as one placement")
        return None
    return sorted(samples)


def state_of(span, placement):
    """near, apart or mixed for a result that ran during span (start, end): the samples inside
    it, else the nearest one on each side within NEIGHBOUR_S; unknown where there is none (or
    no span). None without placement."""
    if placement is None:
        return None
    if span is None:
        return "unknown"
    inside = [ns for t, ns in placement if span[0] <= t <= span[1]]
    if not inside:
        before = [ns for t, ns in placement if span[0] - NEIGHBOUR_S <= t < span[0]][-1:]
        after = [ns for t, ns in placement if span[1] < t <= span[1] + NEIGHBOUR_S][:1]
        inside = before + after
    if not inside:
        return "unknown"
    apart = [ns >= APART_NS for ns in inside]
    return "apart" if all(apart) else "near" if not any(apart) else "mixed"


def read_span(line):
    """(start, end) from a "# span <start> <end>" line, else None."""
    parts = line.split()
    if len(parts) == 4 and parts[:2] == ["#", "span"]:
        try:
            return float(parts[2]), float(parts[3])
        except ValueError:
            return None
    return None


def lines_with_spans(path, per_row):
    """(line, span) for each line of a log but its "# span" lines: span is the last one before
    the line (None if none). per_row: a span belongs to the one row after it (peers' logs);
    else to every line up to the next span (ours: one process, both places)."""
    span = None
    with open(path) as f:
        for line in f:
            if line.startswith("# span"):
                span = read_span(line)
                continue
            yield line, span
            if per_row and not line.startswith("#"):
                span = None


def parse_ours(path, cells, placement):
    for line, span in lines_with_spans(path, per_row=False):
        if not line.startswith("{"):
            continue
        j = json.loads(line)
        if j.get("bench") != "all_reduce_perf":
            continue
        impl = f"ringlet {j['transport']}"
        state = state_of(span, placement)
        for place, col in (("in place", "ip"), ("out of place", "oop")):
            if j.get(f"{col}_us") is None:
                continue
            cells[(impl, place, j["nranks"], j["size"])].append(
                (j[f"{col}_us"], j[f"{col}_busbw"], j[f"{col}_wrong"] in (0, None), state))


def parse_peer(path, cells, placement):
    for line, span in lines_with_spans(path, per_row=True):
        parts = line.split()
        if line.startswith("#") or len(parts) != 10 or parts[-1] not in ("OK", "FAIL"):
            continue
        peer, algo, np_, num, unit, _iters, t, _algbw, busbw, check = parts
        if unit not in UNITS or not re.fullmatch(r"\d+", num):
            continue
        place = "in place"
        if algo.endswith("-oop"):
            algo, place = algo[: -len("-oop")], "out of place"
        size = int(num) * UNITS[unit]
        key = (f"{peer} {algo}", place, int(np_), size)
        cells[key].append((float(t), float(busbw), check == "OK", state_of(span, placement)))


def parse(log_dir):
    """Returns ({(impl, place, np, size): [(time_us, busbw, ok, state), ...]} over all rounds,
    the placement samples or None)."""
    cells = defaultdict(list)
    placement = read_placement(log_dir)
    for path in sorted(glob.glob(os.path.join(log_dir, "r*.ours.*.log"))):
        parse_ours(path, cells, placement)
    for path in sorted(glob.glob(os.path.join(log_dir, "r*.peer.*.log"))):
        parse_peer(path, cells, placement)
    # The loopback's limit holds for both places.
    for (impl, place, np_, size), vals in list(cells.items()):
        if impl == LIMIT and place == "in place":
            cells[(impl, "out of place", np_, size)] = vals
    return cells, placement


def medians(vals):
    return (statistics.median(v[0] for v in vals), statistics.median(v[1] for v in vals),
            all(v[2] for v in vals), len(vals))


def impl_order(impl):
    rank = {"ringlet tcp": 0, "ringlet shm": 1}.get(impl)
    if rank is not None:
        return (rank, impl)
    if impl == LIMIT:
        return (9, impl)
    return (2 if impl.startswith("gloo") else 3 if impl.startswith("mpi") else 4, impl)


def peers_of(ours, impls):
    """The peers ours is judged against: its kind's (callers drop those whose check failed)."""
    if ours == "ringlet tcp":
        return [i for i in impls if i.startswith(TCP_PEERS)]
    return [i for i in impls if i == SHM_PEER]


def table(cells, np_, place):
    """Prints the medians and ratios of one world size and place; returns the medians."""
    impls = sorted({k[0] for k in cells if k[1] == place and k[2] == np_}, key=impl_order)
    sizes = sorted({k[3] for k in cells if k[1] == place and k[2] == np_})
    med = {(i, s): medians(cells[(i, place, np_, s)]) for i in impls for s in sizes
           if (i, place, np_, s) in cells}
    if not any(i.startswith("ringlet") for i in impls):
        return med
    print(f"\n## np = {np_}, {place}: median time per op in us (median busbw GB/s), float32 sum\n")
    print("| size | " + " | ".join(impls) + " |")
    print("|---" * (len(impls) + 1) + "|")
    for s in sizes:
        row = []
        for i in impls:
            m = med.get((i, s))
            row.append("-" if m is None else
                       f"{m[0]:.1f} ({m[1]:.3f}){'' if m[2] else ' WRONG'}")
        print(f"| {human(s)} | " + " | ".join(row) + " |")

    print(f"\nnp = {np_}, {place}: ratios ours/peer (busbw: > 1 is faster; time: < 1 is faster)\n")
    print("| size | ours | peer | busbw ratio | time ratio |")
    print("|---|---|---|---|---|")
    for s in sizes:
        for ours in ("ringlet tcp", "ringlet shm"):
            mine = med.get((ours, s))
            theirs = [(med[(p, s)], p) for p in peers_of(ours, impls)
                      if (p, s) in med and med[(p, s)][2]]
            if mine is None or not theirs:
                continue
            best, name = max(theirs, key=lambda t: t[0][1])  # the peer with the highest busbw
            label = f"best TCP peer: {name}" if ours.endswith("tcp") else name
            bw = mine[1] / best[1] if best[1] > 0 else float("inf")
            tr = mine[0] / best[0] if best[0] > 0 else float("inf")
            print(f"| {human(s)} | {ours} | {label} | {bw:.2f} | {tr:.2f} |")
    return med


def judge(ours, mine, theirs, limit):
    """One placement's comparison: ours' medians against the fastest peer's (theirs: [(medians,
    name)], their checks passed) and the loopback's limit (medians or None): (met, text)."""
    best_t, best = min((m[0], name) for m, name in theirs)
    ratio = mine[0] / best_t if best_t > 0 else float("inf")
    text = f"{mine[0]:.1f} us vs {best} {best_t:.1f} us = {ratio:.2f}x"
    if limit is not None and limit[1] <= 0:
        limit = None
    if limit is not None:
        text += f"; busbw {mine[1]:.3f} = {mine[1] / limit[1]:.2f}x the loopback's {limit[1]:.3f} GB/s"
    if not mine[2]:
        return False, text + ": WRONG results"
    if ratio <= SLACK:
        return True, text
    if limit is not None and limit[1] / SLACK <= mine[1] <= limit[1] * SLACK:
        return True, text + ": at the loopback's limit (the peer measured above it)"
    return False, text + f": a peer is more than {SLACK - 1:.0%} faster"


def point_verdict(cells, key, ours, states):
    """The verdict on one point (place, np, size) for ours: ("ok" | "TRAILS" | "UNMATCHED",
    text), or None where no peer (with a passing check) measured it. states: the placements to
    compare within, or [None] for all results as one."""
    place, np_, size = key
    impls = {k[0] for k in cells if k[1] == place and k[2] == np_}
    every = {i: cells.get((i, place, np_, size), []) for i in [ours, LIMIT] + peers_of(ours, impls)}

    def runs(impl, state):
        return [v for v in every[impl] if state in (None, v[3])]

    peers = [p for p in peers_of(ours, impls) if every[p]]
    if not every[ours] or not peers:
        return None
    parts = []
    for state in states:
        mine = runs(ours, state)
        theirs = [(medians(r), p) for p, r in ((p, runs(p, state)) for p in peers) if r]
        theirs = [t for t in theirs if t[0][2]]  # their check passed
        if not mine or not theirs:
            continue
        lim = runs(LIMIT, state) if ours == "ringlet tcp" else []
        met, text = judge(ours, medians(mine), theirs, medians(lim) if lim else None)
        if state is not None:
            text = f"{state} ({len(mine)} vs {max(t[0][3] for t in theirs)} runs): {text}"
        parts.append((met, text))
    if parts:
        return ("ok" if all(met for met, _ in parts) else "TRAILS"), "; ".join(t for _, t in parts)
    if not any(all(v[2] for v in every[p]) for p in peers):
        return None
    seen = sorted({str(v[3]) for v in every[ours]})
    theirs_seen = sorted({str(v[3]) for p in peers for v in every[p]})
    return "UNMATCHED", (f"ours ran {'/'.join(seen)}, the peers {'/'.join(theirs_seen)}: "
                         "never in the same placement")


def point_verdicts(cells, placement):
    """One verdict per (np, place, size, ours): (status, line)."""
    states = list(STATES) if placement else [None]
    out = []
    for np_ in sorted({k[2] for k in cells}):
        for place in PLACES:
            for size in sorted({k[3] for k in cells if k[1] == place and k[2] == np_}):
                for ours in ("ringlet tcp", "ringlet shm"):
                    v = point_verdict(cells, (place, np_, size), ours, states)
                    if v is not None:
                        where = f"np {np_} {place} {human(size)} {ours.split()[1]}"
                        out.append((v[0], f"{where}: {v[1]}"))
    return out


def placement_summary(cells, placement):
    if not placement:
        print("\n(no placement log: every result compared as one placement)")
        return
    apart = sum(ns >= APART_NS for _, ns in placement)
    print(f"\n## CPU placement (bench/core_probe beside the runs, round trip >= {APART_NS} ns: apart)\n")
    print(f"{len(placement)} samples: {len(placement) - apart} near, {apart} apart; median round "
          f"trip near {statistics.median([ns for _, ns in placement if ns < APART_NS] or [0]):.0f} ns, "
          f"apart {statistics.median([ns for _, ns in placement if ns >= APART_NS] or [0]):.0f} ns")
    counts = defaultdict(lambda: defaultdict(int))
    for (impl, _place, _np, _size), vals in cells.items():
        for v in vals:
            counts[impl][str(v[3])] += 1
    for impl in sorted(counts, key=impl_order):
        print(f"- {impl}: " + ", ".join(f"{n} {state}" for state, n in sorted(counts[impl].items())))


def every_point(cells, placement):
    verdicts = point_verdicts(cells, placement)
    print("\n## Every point (ours against the fastest peer of its kind" +
          (", within each placement" if placement else "") + ")\n")
    for status, line in verdicts:
        print(f"- {status}  {line}")
    met = sum(status == "ok" for status, _ in verdicts)
    trail = sum(status == "TRAILS" for status, _ in verdicts)
    unmatched = len(verdicts) - met - trail
    print(f"\nevery point: {met} of {len(verdicts)} met, {trail} trail"
          + (f", {unmatched} unmatched" if placement else "")
          + f" (trail: a peer more than {SLACK - 1:.0%} faster and ours short of the loopback's "
          "limit, or ours wrong" + ("; unmatched: never measured in the same placement)"
                                    if placement else ")"))


def targets(meds):
    """The collectives' earlier performance targets (in place), each with the measured ratio.
    The best TCP peer now includes torch over gloo (it was Gloo and Open MPI's TCP only)."""
    def ratio(np_, ours, peer, size, field):  # field 0: time, 1: busbw
        med = meds.get((np_, "in place"), {})
        m, p = med.get((ours, size)), med.get((peer, size))
        if m is None or p is None or p[field] == 0:
            return None
        return m[field] / p[field]

    def best_tcp(np_, size):
        peers = [(v[1], i) for (i, s), v in meds.get((np_, "in place"), {}).items()
                 if s == size and i.startswith(TCP_PEERS) and v[2]]
        return max(peers)[1] if peers else None

    checks = []
    for size in (16 << 20, 64 << 20):
        peer = best_tcp(2, size)
        checks.append((f"np 2 tcp busbw {human(size)} >= 1.3x best TCP peer ({peer or 'none measured'})",
                       ratio(2, "ringlet tcp", peer, size, 1), ">=", 1.3))
        checks.append((f"np 2 shm busbw {human(size)} >= 1.5x {SHM_PEER}",
                       ratio(2, "ringlet shm", SHM_PEER, size, 1), ">=", 1.5))
    checks.append(("np 2 tcp time 4 KiB <= 1.2x mpi tcp",
                   ratio(2, "ringlet tcp", "mpi tcp", 4096, 0), "<=", 1.2))
    checks.append((f"np 2 shm time 4 KiB <= 3x {SHM_PEER}",
                   ratio(2, "ringlet shm", SHM_PEER, 4096, 0), "<=", 3.0))
    for ours, peer in (("ringlet tcp", "mpi tcp"), ("ringlet shm", SHM_PEER)):
        sizes = sorted({s for (i, s) in meds.get((4, "in place"), {}) if i == ours})
        worst = [r for r in (ratio(4, ours, peer, s, 0) for s in sizes) if r is not None]
        checks.append((f"np 4 {ours.split()[1]} time, worst size, <= 1.5x {peer}",
                       max(worst) if worst else None, "<=", 1.5))
    print("\n## Targets (in place, ratio ours/peer)\n")
    for label, value, cmp, bound in checks:
        if value is None:
            print(f"- {label}: not measured")
            continue
        met = value >= bound if cmp == ">=" else value <= bound
        print(f"- {label}: {value:.2f} {'met' if met else 'NOT met'}")


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    cells, placement = parse(sys.argv[1])
    if not cells:
        sys.exit(f"no results found in {sys.argv[1]}")
    rounds = max(len(v) for v in cells.values())
    print(f"# compare_peers: medians over up to {rounds} rounds (logs: {sys.argv[1]})")
    meds = {}
    for np_ in sorted({k[2] for k in cells}):
        for place in PLACES:
            meds[(np_, place)] = table(cells, np_, place)
    placement_summary(cells, placement)
    every_point(cells, placement)
    targets(meds)


if __name__ == "__main__":
    main()

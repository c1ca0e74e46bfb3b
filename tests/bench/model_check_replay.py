#!/usr/bin/env python3
"""bench/model_check.py --replay on made-up kept runs (a `meson test`): a row's prediction is the
median of what each round's profiles predict (two rounds: their mean), the fits' spread the largest
of those over the smallest, its round-by-round ratio the median of each round's prediction over
that round's time, a run kept with one set of profiles (by file name, before the fit was repeated
each round) is predicted with it, one kept with the placements shows each round's (of the fit
beside the row's transport where each had its own) and counts the rows over the rounds whose fit
and measurement ran in one placement, keep() then load() gives back what was kept, and a
times.json that is not a kept run, or holds no profiles, is an error that says so.

usage: model_check_replay.py BUILD_ROOT SOURCE_ROOT
"""
import json
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "helpers"))
from checks import check, finish  # tests/helpers/checks.py

RANKS, BYTES = 4, 1 << 20


def predicted_us(ringlet, profile):
    """The ring's time under `profile`, as ringlet model predict prints it."""
    out = subprocess.run([ringlet, "model", "predict", "--ranks", str(RANKS), "--size", str(BYTES),
                          "--profile", profile, "--no-sweep"],
                         capture_output=True, text=True, timeout=60, check=True).stdout
    return next(float(line.split()[1]) for line in out.splitlines()
                if line.split() and line.split()[0] == "ring")


def replay(source, build, folder):
    return subprocess.run([sys.executable, os.path.join(source, "bench", "model_check.py"),
                           "--replay", folder, "--build", build, "--transports", "shm"],
                          capture_output=True, text=True, timeout=120)


def row_cell(output, column):
    """A cell of the table's one row: 6 the predicted us, 7 the fits' spread, 10 the round-by-round
    ratio."""
    for line in output.splitlines():
        cells = [c.strip() for c in line.split("|")]
        if len(cells) > 10 and cells[1] == "shm" and cells[3] == str(BYTES):
            return float(cells[column])
    return None


def shown(result, ok):
    """The replay's output, under a failed check only."""
    return "" if ok else f"\n{result.stdout}{result.stderr}"


def round_trip(source, tmp):
    """keep() then load(): the profiles, times and each transport's fit's placements come back."""
    sys.path.insert(0, os.path.join(source, "bench"))
    import model_check
    folder = os.path.join(tmp, "kept")
    os.makedirs(folder)
    fits = [{"shm": os.path.join(folder, "round1", "shm.json"),
             "tcp": os.path.join(folder, "round1", "tcp.json")}]
    times = {("shm", 2, 65536): [10.0], ("tcp", 2, 65536): [30.0]}
    placements = {("fit", "shm"): ["n"], ("fit", "tcp"): ["a"], ("shm", 2): ["n"],
                  ("tcp", 2): ["m"]}
    model_check.keep(folder, fits, times, placements)
    back = model_check.load(folder)
    check(back == (fits, times, placements),
          f"keep then load gives back what was kept: {back} against {(fits, times, placements)}")


def write(path, value):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        json.dump(value, f)


def main():
    build, source = sys.argv[1], sys.argv[2]
    ringlet = os.path.join(build, "trainer", "ringlet")
    with open(os.path.join(source, "model", "profiles", "h100-nvlink-ib.json")) as f:
        fast = json.load(f)
    slow = dict(fast, intra=dict(fast["intra"], bandwidth_GBps=fast["intra"]["bandwidth_GBps"] / 4))
    rows = [{"transport": "shm", "ranks": RANKS, "bytes": BYTES, "us": [100.0, 140.0]}]
    with tempfile.TemporaryDirectory() as tmp:
        # Kept as model_check keeps a run now: each round's profiles, relative to the folder.
        each = os.path.join(tmp, "each")
        write(os.path.join(each, "round1", "shm.json"), fast)
        write(os.path.join(each, "round2", "shm.json"), slow)
        write(os.path.join(each, "times.json"),
              {"profiles": [{"shm": "round1/shm.json"}, {"shm": "round2/shm.json"}],
               "rows": rows})
        a = predicted_us(ringlet, os.path.join(each, "round1", "shm.json"))
        b = predicted_us(ringlet, os.path.join(each, "round2", "shm.json"))
        check(b > 1.5 * a, f"a quarter of the bandwidth is slower: {a:.1f} and {b:.1f} us")
        r = replay(source, build, each)
        got = row_cell(r.stdout, 6)
        ok = r.returncode == 0 and got is not None and abs(got - (a + b) / 2) <= 0.1
        check(ok, f"two rounds' profiles: the row's prediction is their mean, {(a + b) / 2:.1f} "
                  f"us ({got}){shown(r, ok)}")
        check(re.search(r"\| 120\.0 \| 1\.40 \|", r.stdout) is not None,
              "measured: the median of the rounds, 120.0 us, their spread 1.40")
        got = row_cell(r.stdout, 7)
        check(got is not None and abs(got - b / a) <= 0.006,
              f"the fits' spread: the slower round's prediction over the faster's, {b / a:.2f} "
              f"({got})")
        check("0 of 1 rows whose rounds' fits predict within 25% of each other" in r.stdout,
              "the fits a quarter of the bandwidth apart: the row is not counted as agreeing")
        paired = (a / 100 + b / 140) / 2
        got = row_cell(r.stdout, 10)
        check(got is not None and abs(got - paired) <= 0.006,
              f"round by round: each round's prediction against its time, the median (of two, "
              f"their mean) {paired:.3f} ({got})")
        # Kept with the placements: a row counts over the rounds whose fit and measurement ran
        # in one placement. Round 1's time is its prediction, round 2's three times its own.
        placed = os.path.join(tmp, "placed")
        for k, profile in ((1, fast), (2, slow)):
            write(os.path.join(placed, f"round{k}", "shm.json"), profile)
        for fit_at, run_at, cell, counted in ((["n", "n"], ["n", "a"], "nn na", "1 of 1"),
                                              (["n", "a"], ["a", "a"], "na aa", "0 of 1"),
                                              (["m", "n"], ["m", "a"], "mm na", "0 of 0")):
            write(os.path.join(placed, "times.json"),
                  {"profiles": [{"shm": "round1/shm.json"}, {"shm": "round2/shm.json"}],
                   "rows": [dict(rows[0], us=[a, 3 * b])],
                   "placements": [{"fit": fit_at},
                                  {"transport": "shm", "ranks": RANKS, "rounds": run_at}]})
            r = replay(source, build, placed)
            ok = (r.returncode == 0 and f"| {cell} |" in r.stdout
                  and f"{counted} rows within 25% over the rounds whose fit and measurement ran "
                      "in one placement" in r.stdout)
            check(ok, f"fits {fit_at}, runs {run_at}: the row shows {cell!r}, and {counted} rows "
                      f"count{shown(r, ok)}")
        # Kept with a fit beside each transport's runs: a row's cells are its own transport's
        # fit's placements (tcp's here would show "an aa" and count 0 of 1).
        write(os.path.join(placed, "times.json"),
              {"profiles": [{"shm": "round1/shm.json"}, {"shm": "round2/shm.json"}],
               "rows": [dict(rows[0], us=[a, 3 * b])],
               "placements": [{"fit": ["n", "n"], "transport": "shm"},
                              {"fit": ["a", "a"], "transport": "tcp"},
                              {"transport": "shm", "ranks": RANKS, "rounds": ["n", "a"]}]})
        r = replay(source, build, placed)
        ok = (r.returncode == 0 and "| nn na |" in r.stdout
              and "1 of 1 rows within 25% over the rounds whose fit" in r.stdout)
        check(ok, f"a fit per transport: the shm row shows its own fit's placements{shown(r, ok)}")
        round_trip(source, tmp)
        r = replay(source, build, each)
        check("placements (fit, run)" not in r.stdout and "one placement" not in r.stdout,
              "a run kept without placements shows none")
        # Kept before the fit was repeated: one set of profiles, found by file name.
        once = os.path.join(tmp, "once")
        write(os.path.join(once, "shm.json"), slow)
        write(os.path.join(once, "times.json"),
              {"profiles": {"shm": "/where/it/was/kept/shm.json"}, "rows": rows})
        r = replay(source, build, once)
        got = row_cell(r.stdout, 6)
        ok = r.returncode == 0 and got is not None and abs(got - b) <= 0.1
        check(ok, f"one set of profiles: its prediction, {b:.1f} us ({got}){shown(r, ok)}")
        # Not a kept run.
        bad = os.path.join(tmp, "bad")
        write(os.path.join(bad, "times.json"), {"rows": rows})
        r = replay(source, build, bad)
        check(r.returncode != 0 and "is not a kept run" in r.stderr and bad in r.stderr,
              f"a times.json without profiles: an error naming it ({r.stderr.strip()})")
        write(os.path.join(bad, "times.json"), {"profiles": [], "rows": rows})
        r = replay(source, build, bad)
        check(r.returncode != 0 and "has no profiles" in r.stderr,
              f"a times.json with no round's profiles: an error saying so ({r.stderr.strip()})")
    return finish()


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Sums the test results of a `meson test` run into one line: `N passed, N failed`.

Neither doctest nor meson prints that form, so this reads meson's JSON log
(BUILD/meson-logs/testlog.json, one object per line, one line per test executable) and:
  - adds up doctest's own summary of each executable
    (`[doctest] test cases: 12 | 12 passed | 0 failed | 0 skipped`);
  - counts an executable meson reports as SKIP (exit status 77) as one skipped test, with the
    reason it printed (its lines containing `skipped:`);
  - lists, under an executable whose doctest summary counts skipped test cases, the reasons
    it printed for them (lines containing `skipped:`, which tests/helpers/doctest_main.cpp prints
    for every test case with a skip decorator);
  - counts an executable that failed, timed out or crashed as at least one failed test, even
    when it printed no doctest summary or a summary with no failures;
  - counts an executable that passed without a doctest summary (not a doctest program) as one
    passed test.
It prints one line per executable (a failed one followed by its first failing checks, so the
tail of a CI log says what broke), then, as the very last line, `N passed, N failed` or
`N passed, N failed, N skipped`. Exit status 0 only when nothing failed and something passed.

usage: test_summary.py [BUILD_DIR | path/to/testlog.json]     (default: build)
Python 3 standard library only.
"""

import json
import os
import re
import sys

ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
# Field widths vary with the counts (doctest pads with setw), and the skipped field is
# absent when doctest runs with --no-skipped-summary.
DOCTEST_SUMMARY = re.compile(
    r"\[doctest\]\s*test cases:\s*(\d+)\s*\|\s*(\d+)\s+passed\s*\|\s*(\d+)\s+failed\s*\|"
    r"(?:\s*(\d+)\s+skipped)?")

OK_RESULTS = {"OK", "EXPECTEDFAIL"}
SKIP_RESULTS = {"SKIP"}


def find_log(argument):
    if argument.endswith(".json") or os.path.isfile(argument):
        return argument
    return os.path.join(argument, "meson-logs", "testlog.json")


def doctest_counts(output):
    """(passed, failed, skipped) from the last doctest summary in `output`, or None."""
    found = None
    for line in ANSI_ESCAPE.sub("", output).splitlines():
        match = DOCTEST_SUMMARY.search(line)
        if match:
            found = match
    if found is None:
        return None
    _total, passed, failed, skipped = found.groups()
    return int(passed), int(failed), int(skipped or 0)


def skip_lines(output):
    """The distinct lines of `output` that give a reason for a skip (`skipped: ...`)."""
    reasons = []
    for line in ANSI_ESCAPE.sub("", output).splitlines():
        if "skipped:" in line:
            text = line.strip()
            if text not in reasons:
                reasons.append(text)
    return reasons


def skip_reason(output):
    reasons = skip_lines(output)
    return "; ".join(reasons) if reasons else "skipped (exit status 77), no reason printed"


def failing_checks(output, limit=5):
    """doctest's lines that locate and state a failing check (at most `limit` of each)."""
    lines = ANSI_ESCAPE.sub("", output).splitlines()
    found = []
    for i, line in enumerate(lines):
        if line.startswith("TEST CASE:"):
            found.append(line.rstrip())
        elif re.search(r"\b(ERROR|FATAL ERROR): ", line):
            found.append(line.rstrip())
            # doctest prints the values and the INFO context right below a failed check
            for follow in lines[i + 1:i + 4]:
                if follow.startswith(("  values:", "  logged:")):
                    found.append(follow.rstrip())
        if sum(1 for f in found if "ERROR" in f) >= limit:
            break
    return found


def summarize(entry):
    """(passed, failed, skipped, description) for one executable's log entry."""
    result = str(entry.get("result", "UNKNOWN"))
    output = (entry.get("stdout") or "") + "\n" + (entry.get("stderr") or "")
    counts = doctest_counts(output)

    if result in SKIP_RESULTS:
        return 0, 0, 1, skip_reason(output)

    if result in OK_RESULTS:
        if result == "EXPECTEDFAIL":
            return 1, 0, 0, "failed as expected"
        if counts is None:
            return 1, 0, 0, "passed (no doctest summary)"
        passed, failed, skipped = counts
        return passed, failed, skipped, describe(passed, failed, skipped)

    # FAIL, TIMEOUT, INTERRUPT, ERROR, UNEXPECTEDPASS, or anything unknown: never zero failures.
    returncode = entry.get("returncode")
    why = {"TIMEOUT": "timed out", "INTERRUPT": "interrupted",
           "UNEXPECTEDPASS": "passed but was marked should_fail"}.get(result, result.lower())
    if result == "FAIL" and isinstance(returncode, int) and returncode < 0:
        why = "crashed (signal {})".format(-returncode)
    elif result == "FAIL" and returncode is not None:
        why = "failed (exit status {})".format(returncode)
    if counts is None:
        return 0, 1, 0, "{}, no doctest summary: counted as 1 failed".format(why)
    passed, failed, skipped = counts
    if failed == 0:
        return passed, 1, skipped, "{} after its tests reported no failure: counted as 1 failed" \
            .format(why) + " ({})".format(describe(passed, failed, skipped))
    return passed, failed, skipped, "{}: {}".format(why, describe(passed, failed, skipped))


def describe(passed, failed, skipped):
    text = "{} passed, {} failed".format(passed, failed)
    if skipped:
        text += ", {} skipped".format(skipped)
    return text


def main(argv):
    if any(arg in ("-h", "--help") for arg in argv[1:]):
        print(__doc__.strip())
        return 0
    if len(argv) > 2:
        print("usage: test_summary.py [BUILD_DIR | path/to/testlog.json]", file=sys.stderr)
        return 2
    log_path = find_log(argv[1] if len(argv) == 2 else "build")

    rows = []
    if not os.path.isfile(log_path):
        rows.append(("MISSING", "(no tests ran)", 0, 1, 0,
                     "no test log at {}: the build or `meson test` failed before any test "
                     "ran".format(log_path)))
    else:
        with open(log_path, encoding="utf-8", errors="replace") as log:
            for number, line in enumerate(log, 1):
                line = line.strip()
                if not line:
                    continue
                try:
                    entry = json.loads(line)
                except ValueError:
                    rows.append(("BADLOG", "line {}".format(number), 0, 1, 0,
                                 "unreadable entry in {}: counted as 1 failed".format(log_path)))
                    continue
                passed, failed, skipped, text = summarize(entry)
                output = (entry.get("stdout") or "") + "\n" + (entry.get("stderr") or "")
                details = failing_checks(output) if failed else []
                if skipped and str(entry.get("result")) not in SKIP_RESULTS:
                    # doctest counted skipped test cases: say why, or that nobody said
                    details += skip_lines(output) or [
                        "{} test case(s) skipped without a `skipped:` line".format(skipped)]
                rows.append((str(entry.get("result", "UNKNOWN")), str(entry.get("name", "?")),
                             passed, failed, skipped, text, details))
        if not rows:
            rows.append(("EMPTY", "(no tests ran)", 0, 1, 0,
                         "{} lists no tests: counted as 1 failed".format(log_path)))

    name_width = max(len(row[1]) for row in rows)
    result_width = max(len(row[0]) for row in rows)
    for result, name, _p, _f, _s, text, *details in rows:
        print("  {:<{rw}}  {:<{nw}}  {}".format(result, name, text, rw=result_width,
                                                nw=name_width))
        for line in (details[0] if details else []):
            print("      " + line)

    passed = sum(row[2] for row in rows)
    failed = sum(row[3] for row in rows)
    skipped = sum(row[4] for row in rows)
    sys.stdout.flush()
    print(describe(passed, failed, skipped), flush=True)
    return 0 if failed == 0 and passed > 0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))

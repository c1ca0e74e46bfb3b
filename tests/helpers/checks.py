"""The python tests' shared check: each check prints "ok" or "FAILED" and its description, the
failures are kept, and finish() prints how many failed and gives the exit status."""

FAILURES = []


def check(cond, what):
    print(("ok      " if cond else "FAILED  ") + what)
    if not cond:
        FAILURES.append(what)


def finish():
    """Prints "N failed" and returns 1 if any check failed, else 0."""
    print(f"{len(FAILURES)} failed")
    return 1 if FAILURES else 0

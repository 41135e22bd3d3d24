"""`make test`'s pytest, in two runs: the fast tests (`make check`'s, the marker expression it is given)
first, two workers, stopping at the first failure; then, when they all passed, the rest (`not (<the
expression>)`: no test runs twice, none is left out), two workers a test file each at a time (a
broker's module keeps its cluster). Each run prints its own report; the last line is both runs'
summary, in pytest's words: CI reads that line and the exit status.

    python -m tests.fast_first "<make check's marker expression>" [pytest arguments for both runs]

The module is also the pytest plugin both runs load (``-p tests.fast_first``): it writes the run's
counts, as its summary line says them, where ``--counts-to`` says.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from collections import Counter
from datetime import timedelta
from pathlib import Path

import pytest

FAST = ["-n", "2", "-x"]
REST = ["-n", "2", "--dist", "loadfile", "--rest-of-suite"]
# pytest's order of the summary line's counts; any other (a plugin's: rerun) after them.
ORDER = ("failed", "passed", "skipped", "deselected", "xfailed", "xpassed", "warnings", "errors")
PLURAL = {"warning": "warnings", "error": "errors"}  # the nouns pytest puts in the plural


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("fast_first", "make test's two runs (tests/fast_first.py)")
    group.addoption("--counts-to", metavar="FILE", help="write the run's summary counts to FILE, as JSON")
    group.addoption(
        "--rest-of-suite",
        action="store_true",
        help="this run is every test the fast run left out (tests/tested_on.py then judges its table)",
    )
    group.addoption(
        "--cells-file",
        metavar="FILE",
        help="the Tested-on cells' outcomes, carried from the fast run to the rest's (tests/tested_on.py)",
    )


@pytest.hookimpl(trylast=True)
def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    path = config.getoption("counts_to")
    if path and not hasattr(config, "workerinput"):  # under xdist, the controller has the counts
        parts, _ = terminalreporter.build_summary_stats_line()
        Path(path).write_text(json.dumps(counts_of([text for text, _ in parts])))


def counts_of(parts: list[str]) -> dict[str, int]:
    """{"passed": 30, "warnings": 2, ...} from pytest's summary parts ("30 passed", "1 warning")."""
    counts = {}
    for part in parts:
        number, _, noun = part.partition(" ")
        if number.isdigit():  # (not "no tests ran")
            counts[PLURAL.get(noun, noun)] = int(number)
    return counts


def summary_line(counts: Counter[str], seconds: float) -> str:
    """pytest's summary line for these counts: "== 1 failed, 30 passed, 2 warnings in 61.05s (0:01:01) =="."""
    nouns = sorted(counts, key=lambda noun: (ORDER.index(noun) if noun in ORDER else len(ORDER), noun))
    words = [f"{counts[n]} {n[:-1] if counts[n] == 1 and n in PLURAL.values() else n}" for n in nouns if counts[n]]
    took = f"{seconds:.2f}s" + (f" ({timedelta(seconds=int(seconds))})" if seconds >= 60 else "")
    text = f" {', '.join(words) or 'no tests ran'} in {took} "
    left = max((80 - len(text)) // 2, 1)  # (one "=" at least each side, as pytest's)
    return "=" * left + text + "=" * max(80 - left - len(text), 1)


def run(markers: str, options: list[str], extra: list[str], counts: Path) -> tuple[int, Counter[str]]:
    """One pytest run of the tests `markers` selects; its exit status and its counts. Both runs share
    the Tested-on cells' file: the rest's run judges the table with the fast run's cells too."""
    cells = counts.with_name("tested-on-cells.json")
    command = [
        sys.executable,
        "-m",
        "pytest",
        "-p",
        "tests.fast_first",
        f"--counts-to={counts}",
        f"--cells-file={cells}",
    ]
    with subprocess.Popen([*command, "-m", markers, *options, *extra]) as pytest_run:
        while True:
            try:
                status = pytest_run.wait()
                break
            except KeyboardInterrupt:  # pytest had the terminal's Ctrl-C too: it stops its brokers, then exits
                continue
    return status, Counter(json.loads(counts.read_text()) if counts.exists() else {})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("fast", help="the fast tests' marker expression (make check's)")
    args, extra = parser.parse_known_args(argv)
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        status, counts = run(args.fast, FAST, extra, Path(tmp, "fast.json"))
        if status in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED):
            rest_status, rest = run(f"not ({args.fast})", REST, extra, Path(tmp, "rest.json"))
            counts += rest
            del counts["deselected"]  # each run's deselected tests are the other's
            if status == pytest.ExitCode.NO_TESTS_COLLECTED or rest_status != pytest.ExitCode.NO_TESTS_COLLECTED:
                status = rest_status
            if status != pytest.ExitCode.OK and not counts["failed"] + counts["errors"]:
                print(f"make test: the rest's run exited {status} with no test failed (its report says why, above)")
        else:
            print(f"make test: the fast tests' run exited {status}: the rest was not run")
    print(summary_line(counts, time.monotonic() - started))
    return int(status)


if __name__ == "__main__":
    sys.exit(main())

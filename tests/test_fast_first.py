"""`make test`'s two runs (tests/fast_first.py), on a project of a few tests: the fast ones first,
stopping at the first failure; the rest only when they passed; one summary line of both, last."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

from tests.fast_first import counts_of, summary_line

ROOT = Path(__file__).resolve().parent.parent

PROJECT = {
    "pytest.ini": "[pytest]\nmarkers =\n    slow: a rest test\n",
    "checks/test_fast.py": "def test_one():\n    pass\n\n\ndef test_two():\n    assert FAST_OUTCOME\n",
    "checks/test_rest.py": (
        "import pytest\n\n\n@pytest.mark.slow\ndef test_rest():\n    assert REST_OUTCOME\n\n\n"
        "@pytest.mark.slow\ndef test_skipped():\n    pytest.skip('skipped on purpose')\n"
    ),
}


def make_test(tmp_path: Path, fast_passes: bool, rest_passes: bool) -> subprocess.CompletedProcess[str]:
    for name, text in PROJECT.items():
        (tmp_path / name).parent.mkdir(exist_ok=True)
        text = text.replace("FAST_OUTCOME", str(fast_passes)).replace("REST_OUTCOME", str(rest_passes))
        (tmp_path / name).write_text(text)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        # (Without workers, -n 0 after the runs' own -n 2: three runs of a few tests cost seconds.)
        [sys.executable, "-m", "tests.fast_first", "not slow", "-p", "no:cacheprovider", "-n", "0"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_the_fast_tests_then_the_rest_end_with_one_summary_line_of_both(tmp_path: Path) -> None:
    done = make_test(tmp_path, fast_passes=True, rest_passes=False)
    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    runs = [line for line in lines[:-1] if line.startswith("=") and " in " in line and "session" not in line]
    fast_run, rest_run = runs  # each run's own line, then both runs' (their deselected tests are the other's)
    assert " 2 passed, 2 deselected in " in fast_run and " 1 failed, 1 skipped, 2 deselected in " in rest_run
    assert lines[-1].startswith("=") and " 1 failed, 2 passed, 1 skipped in " in lines[-1], lines[-1]


def test_a_failing_fast_test_stops_the_run_before_the_rest(tmp_path: Path) -> None:
    done = make_test(tmp_path, fast_passes=False, rest_passes=True)
    assert done.returncode != 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[-2].endswith("the rest was not run") and " 1 failed" in lines[-1], lines[-2:]
    assert "test_rest.py" not in done.stdout


def test_all_green_exits_0(tmp_path: Path) -> None:
    done = make_test(tmp_path, fast_passes=True, rest_passes=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert " 3 passed, 1 skipped in " in done.stdout.splitlines()[-1]


def test_the_counts_read_and_written_as_pytest_words_them() -> None:
    counts = counts_of(["1 failed", "30 passed", "1 warning", "2 errors", "3 rerun", "no tests ran"])
    assert counts == {"failed": 1, "passed": 30, "warnings": 1, "errors": 2, "rerun": 3}
    line = summary_line(Counter(counts) + Counter({"warnings": 1, "skipped": 4}), 61.05)
    assert line.strip("= ") == "1 failed, 30 passed, 4 skipped, 2 warnings, 2 errors, 3 rerun in 61.05s (0:01:01)"
    assert line.startswith("= ") and line.endswith(" =")
    assert summary_line(Counter({"passed": 3}), 1).center(80, "=") == summary_line(Counter({"passed": 3}), 1)
    assert summary_line(Counter({"errors": 1}), 0.5).strip("= ") == "1 error in 0.50s"

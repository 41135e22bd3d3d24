"""Comments and docstrings say why, not when or in which commit: a date or a commit hash in them is a
lab notebook's entry, which ages the moment it is written and which git's history already keeps. So
every comment and docstring of every Python file the repository holds is scanned for both, and a
finding is named by file and line.

Only comments (tokenize) and docstrings (ast) are read, never code: a hex constant or a date in a
string the code uses is the code's business."""

from __future__ import annotations

import ast
import io
import os
import re
import tokenize
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# What is not the repository's own Python: venvs, builds, caches, benchmark data, packaging metadata.
SKIPPED = {"__pycache__", "build", "dist", "data", "node_modules"}


MONTHS = r"(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec)[a-z]*\.?"
DATE = re.compile(
    r"\b(?:19|20)\d\d-[01]\d-[0-3]\d\b"  # year-month-day
    r"|\b(?:19|20)\d\d/[01]?\d/[0-3]?\d\b"  # year/month/day
    r"|\b[0-3]?\d/[01]?\d/(?:19|20)\d\d\b"  # day/month/year
    rf"|\b{MONTHS} [0-3]?\d(?:st|nd|rd|th)?\b(?!\.\d)"  # a month, then its day
    rf"|\b[0-3]?\d(?:st|nd|rd|th)? {MONTHS}(?: (?:19|20)\d\d)?\b"  # a day, then its month (and year)
)
# A git hash as people quote them: 7 to 40 lowercase hex digits, with a digit and a letter in them
# (so neither a plain number nor a word like "deadbeef" or "effaced").
HASH = re.compile(r"(?<![\w./-])(?=[0-9a-f]*[0-9])(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}(?![\w/-])")


def python_files() -> list[Path]:
    """Every .py file under the root, and every extensionless script whose first line runs Python."""
    files = []
    for folder, dirs, names in os.walk(ROOT):
        dirs[:] = [d for d in dirs if d not in SKIPPED and not d.startswith(".") and not d.endswith(".egg-info")]
        for name in names:
            path = Path(folder, name)
            if name.endswith(".py") or ("." not in name and _runs_python(path)):
                files.append(path)
    return sorted(files)


def _runs_python(path: Path) -> bool:
    with path.open("rb") as file:
        first = file.readline(200)
    return first.startswith(b"#!") and b"python" in first


def prose(source: str) -> Iterator[tuple[int, str]]:
    """Each line of the source's comments and docstrings, with its line number."""
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            yield token.start[0], token.string
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        first = node.body[0] if node.body else None
        if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
            for offset, line in enumerate(first.value.value.splitlines()):
                yield first.value.lineno + offset, line


def findings(source: str) -> Iterator[tuple[int, str]]:
    for lineno, line in prose(source):
        for pattern in (DATE, HASH):
            for match in pattern.finditer(line):
                yield lineno, match.group()


def test_the_scan_finds_dates_and_hashes_in_prose_only():
    source = '''"""Module, measured 2026-11-28."""
X = 0x1234abcd  # fixed in 71805b3
def f():
    """Seen on Nov 28 and on 3 November."""
    return "2026-11-28 a3d5ca6"  # Kafka 3.9.2, KIP-227, issue 29, port 9092, deadbeef, 1234567, 0x81 0x00
'''
    assert sorted(findings(source)) == [(1, "2026-11-28"), (2, "71805b3"), (4, "3 November"), (4, "Nov 28")]


def test_the_files_scanned_are_the_repository_s_python():
    scanned = {path.relative_to(ROOT).as_posix() for path in python_files()}
    assert {"tests/test_prose.py", "exporter/app/__init__.py", "bench/cluster_cost.py", "generators/run.py"} <= scanned
    assert not any(part.startswith(".venv") for part in scanned)


@pytest.mark.parametrize("pattern", [DATE, HASH], ids=["dates", "hashes"])
def test_no_comment_or_docstring_names_a_date_or_a_commit(pattern: re.Pattern[str]):
    found = [
        f"{path.relative_to(ROOT)}:{lineno}: {match.group()!r} in {line.strip()!r}"
        for path in python_files()
        for lineno, line in prose(path.read_text())
        for match in pattern.finditer(line)
    ]
    assert not found, "say why, not when or which commit (git keeps the history):\n" + "\n".join(found)

"""`txn-exporter hanging` as a real process against addresses where no Kafka answers: one line
naming what it could not reach, exit 2, within --timeout (kafka-python alone retries for 30 s)."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest


def _hanging(*args: str) -> tuple[subprocess.CompletedProcess[str], float]:
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "exporter", "hanging", *args], capture_output=True, text=True, timeout=120
    )
    return proc, time.monotonic() - started


@pytest.fixture
def silent_listener() -> Iterator[str]:
    """A port that accepts connections (the kernel's backlog) and never says a word."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(8)
        yield f"127.0.0.1:{s.getsockname()[1]}"


def test_a_refused_address_fails_at_once_naming_it() -> None:
    with socket.socket() as s:  # a free port: nothing listens there once closed
        s.bind(("127.0.0.1", 0))
        address = f"127.0.0.1:{s.getsockname()[1]}"
    proc, _ = _hanging("--bootstrap-servers", f"{address},nosuchhost.invalid:9092")
    assert proc.returncode == 2
    assert proc.stderr.startswith(
        f"txn-exporter hanging: cannot reach Kafka at {address} (connection refused), "
        "nosuchhost.invalid:9092 (cannot resolve nosuchhost.invalid: "
    )
    assert proc.stderr.count("\n") == 1
    assert proc.stdout == ""


def test_an_address_that_never_answers_fails_after_the_timeout(silent_listener: str) -> None:
    proc, elapsed = _hanging("--bootstrap-servers", silent_listener, "--timeout", "1")
    assert proc.returncode == 2
    assert proc.stderr == f"txn-exporter hanging: Kafka at {silent_listener} did not answer within 1 s (--timeout)\n"
    assert elapsed < 25  # kafka-python's own bootstrap timeout is 30 s

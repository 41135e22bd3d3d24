"""The machine, shared by `make test`'s two pytest-xdist workers.

A test marked `alone` runs while no other test does: P4 (tests/integration/broker_truth.py)
measures the exporter's latency in milliseconds against a bare client's, and the other worker's
brokers, Spark jobs and producers would be measured with it (tried: with both workers busy the
exporter's p99 ran 3-4 ms past the bare client's). Every other test holds the machine shared.

A readers-writer lock across processes, on two files with flock(2) (released by the kernel if a
worker dies): a test passes the turnstile, then holds the machine shared; an `alone` test holds the
turnstile while it waits for the machine alone, so no test starts once it waits and it cannot be
starved. It waits for the other worker's current test to end.
"""

from __future__ import annotations

import fcntl
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def _locked(path: Path, operation: int) -> Iterator[None]:
    with path.open("a") as f:
        fcntl.flock(f, operation)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


@contextmanager
def shared(directory: Path) -> Iterator[None]:
    """The machine, with other tests that share it."""
    directory.mkdir(parents=True, exist_ok=True)
    with _locked(directory / "turnstile.lock", fcntl.LOCK_EX):
        pass
    with _locked(directory / "machine.lock", fcntl.LOCK_SH):
        yield


@contextmanager
def alone(directory: Path) -> Iterator[None]:
    """The machine, no other test running."""
    directory.mkdir(parents=True, exist_ok=True)
    with _locked(directory / "turnstile.lock", fcntl.LOCK_EX), _locked(directory / "machine.lock", fcntl.LOCK_EX):
        yield

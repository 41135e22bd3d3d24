"""bench.proc_stats: a process's CPU time to well under the 10 ms of /proc's ticks; a JVM's by kind of thread."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from bench.proc_stats import cpu_seconds, thread_cpu, thread_group_cores, thread_kind

_SPIN = """
import sys, time
started = time.process_time()
while time.process_time() - started < 0.123:
    pass
print(time.process_time(), flush=True)
sys.stdin.read()
"""


@contextmanager
def _spun() -> Iterator[tuple[int, float]]:
    """A child process that spun 0.123 s of CPU and waits: its pid, and the CPU time it counted itself
    (its start-up included)."""
    child = subprocess.Popen([sys.executable, "-c", _SPIN], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None
        yield child.pid, float(child.stdout.readline())
    finally:
        child.communicate("")


def test_a_process_cpu_time_is_read_to_the_millisecond() -> None:
    with _spun() as (pid, own):
        read = cpu_seconds(pid)
        assert own <= read < own + 0.002, (own, read)


def test_each_threads_cpu_time_is_read_to_the_millisecond() -> None:
    with _spun() as (pid, own):
        main = thread_cpu(pid)[pid][1]  # the spinning thread
        assert own - 0.002 < main <= own + 0.001, (own, main)


def test_a_jvms_threads_are_grouped_by_name_without_their_numbers() -> None:
    """Java's names where known (/proc cuts them to 15 characters), numbers as N."""
    before = {1: ("data-plane-kafk", 1.0), 2: ("data-plane-kafk", 2.0), 3: ("GC Thread#0", 5.0)}
    after = {**before, 1: ("data-plane-kafk", 1.5), 2: ("data-plane-kafk", 2.5), 4: ("C2 CompilerThre", 0.2)}
    names = {1: "data-plane-kafka-request-handler-0", 2: "data-plane-kafka-request-handler-1"}
    cores = thread_group_cores(before, after, names, 10.0)
    assert cores == pytest.approx(
        {"data-plane-kafka-request-handler-N": 0.1, "GC Thread#N": 0.0, "C2 CompilerThre": 0.02}
    )


def test_a_threads_kind_is_its_name_with_its_numbers_as_n() -> None:
    assert thread_kind("ReplicaFetcherThread-0-2") == "ReplicaFetcherThread-N-N"
    assert thread_kind("GC Thread#1") == "GC Thread#N"
    assert thread_kind("G1 Service") == "G1 Service"

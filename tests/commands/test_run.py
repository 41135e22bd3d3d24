"""`txn-exporter run` as a real process against an address where no Kafka listens: what it logs
while the broker is down, and how it stops."""

from __future__ import annotations

import ctypes
import os
import platform
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from txn_workshop.harness.processes import free_port

SECRET = "hunter2-never-printed"
# The text format: `YYYY-MM-DD HH:MM:SS,mmm LEVEL logger: message`.
LINE = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) (DEBUG|INFO|WARNING|ERROR|CRITICAL) (\S+): (.*)$")


# tgkill(2), which sends a signal to one thread of a process: Python has no call for another process's.
_TGKILL = {"x86_64": 234, "aarch64": 131}


def _refused_address() -> str:
    """A loopback port nobody listens on: connections are refused at once."""
    return f"127.0.0.1:{free_port()}"


class Run:
    def __init__(self, tmp_path: Path, *args: str) -> None:
        self.log = tmp_path / "run.log"
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "exporter",
                "run",
                "--bootstrap-servers",
                _refused_address(),
                "--listen",
                f"127.0.0.1:{free_port()}",
                "--kafka-config",
                f"sasl.password={SECRET}",
                *args,
            ],
            stdout=subprocess.DEVNULL,
            stderr=self.log.open("w"),
        )

    def lines(self) -> list[str]:
        return self.log.read_text().splitlines()

    def wait_for(self, pattern: str, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while not any(re.search(pattern, line) for line in self.lines()):
            assert self.process.poll() is None, "\n".join(self.lines())
            assert time.monotonic() < deadline, f"no line matching {pattern!r} in:\n" + "\n".join(self.lines())
            time.sleep(0.1)

    def interrupt(self, timeout: float) -> int:
        self.process.send_signal(signal.SIGINT)
        try:
            return self.process.wait(timeout)
        finally:
            self.process.kill()


@pytest.fixture
def run(tmp_path: Path):
    started: list[Run] = []

    def start(*args: str) -> Run:
        started.append(Run(tmp_path, *args))
        return started[-1]

    yield start
    for process in started:
        process.process.kill()
        process.process.wait()


def test_a_broker_that_is_down_is_reported_in_the_exporters_words_once_per_failure(run) -> None:
    exporter = run("--log-repeat-seconds", "2", "--metadata-refresh-seconds", "1")
    # Two metadata failures, and the repeat window over at least once.
    exporter.wait_for(r"cannot read metadata")
    time.sleep(5)
    assert exporter.interrupt(30) == 0
    lines = exporter.lines()
    parsed = [LINE.match(line) for line in lines]
    assert all(parsed), "\n".join(line for line, m in zip(lines, parsed) if not m)  # no raw `%3|...|FAIL|` line
    # The first line says what the exporter does, in a few words: no settings dict, no secret.
    first = parsed[0].group(4)
    assert first.startswith("serving http://127.0.0.1:") and "following the __transaction_state partitions" in first
    assert "{" not in first and "'latency_window_seconds'" not in first
    assert "client settings sasl.password" in first
    assert all(SECRET not in line for line in lines)
    # librdkafka's own line of each failure is DEBUG: the exporter's line says it once.
    assert not [m.group(0) for m in parsed if m.group(3).startswith("librdkafka")]
    refused = "cannot connect to the Kafka bootstrap server 127.0.0.1:"
    assert any(refused in m.group(4) and "connection refused" in m.group(4) for m in parsed)
    stamps = [m.group(1) for m in parsed]
    assert stamps == sorted(stamps)
    # While Kafka does not answer, each kind of failure is said once, then at a slowing rate (the first
    # summary after 10 s: tests/sources/test_topic_tail_fetching.py), whatever the log's repeat window.
    for kind in (refused, "cannot read metadata"):
        said = [m.group(4) for m in parsed if kind in m.group(4)]
        assert len(said) == 1 and said[0].endswith("; while it lasts, said again in 10 s"), said


def test_ctrl_c_says_stopping_and_stops_while_kafka_does_not_answer(run) -> None:
    """With --all-partitions the hanging scan connects at once; kafka-python keeps trying a refused
    bootstrap address for 30 s, and the main loop waits up to 5 s for metadata: neither holds up
    the stop."""
    exporter = run("--all-partitions")
    exporter.wait_for(r"cannot read metadata")
    interrupted = time.monotonic()
    assert exporter.interrupt(timeout=20) == 0
    assert time.monotonic() - interrupted < 20
    messages = [LINE.match(line).group(4) for line in exporter.lines()]
    assert "stopping (SIGINT)" in messages


def _thread_taking(pid: int, signum: int) -> int:
    """A thread of `pid` other than its main one that does not block `signum` (a Python thread: the
    kernel may hand a process's signal to any such thread; librdkafka's block every signal)."""
    for task in sorted(Path(f"/proc/{pid}/task").iterdir()):
        blocked = re.search(r"^SigBlk:\s*([0-9a-f]+)$", (task / "status").read_text(), re.MULTILINE)
        if int(task.name) != pid and blocked and not int(blocked.group(1), 16) >> (signum - 1) & 1:
            return int(task.name)
    raise AssertionError(f"no thread of {pid} takes signal {signum}")


@pytest.mark.skipif(platform.machine() not in _TGKILL, reason="tgkill's number is known for x86_64 and aarch64")
def test_sigterm_taken_by_another_thread_than_the_main_one_stops_the_exporter(run) -> None:
    """The kernel hands a process's SIGTERM to any thread not blocking it. Python runs the handler
    in the main thread, which then must not sit in a wait only the signal itself would interrupt: a
    SIGTERM taken by a source's thread left the exporter running until killed (rarely, and more
    often on a loaded machine)."""
    exporter = run()
    exporter.wait_for(r"cannot read metadata")
    pid = exporter.process.pid
    libc = ctypes.CDLL(None, use_errno=True)
    assert libc.syscall(_TGKILL[platform.machine()], pid, _thread_taking(pid, signal.SIGTERM), signal.SIGTERM) == 0, (
        os.strerror(ctypes.get_errno())
    )
    assert exporter.process.wait(20) == 0
    messages = [LINE.match(line).group(4) for line in exporter.lines()]
    assert "stopping (SIGTERM)" in messages

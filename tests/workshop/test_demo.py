"""`txn-exporter demo` as a real process: what it checks before starting, what it leaves behind, and
what it prints through a hold of markers (each message true when printed, in the order things happen).

The demo's work dir is a temporary directory: TMPDIR points it into the test's own directory."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from txn_workshop.demo import FREE_SECONDS, HOLD_SECONDS
from txn_workshop.harness.processes import free_port

ROOT = Path(__file__).resolve().parents[2]


def _demo(tmp_path: Path, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "exporter", "demo", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "TMPDIR": str(tmp_path)},
        stdin=subprocess.DEVNULL,
    )


def test_a_port_in_use_stops_the_demo_before_anything_starts(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = _demo(tmp_path, "--listen", f"127.0.0.1:{port}")
    assert proc.returncode == 2
    assert proc.stderr == (
        f"txn-exporter demo: cannot listen on 127.0.0.1:{port}: address already in use "
        "(--listen HOST:PORT picks another)\n"
    )
    assert proc.stdout == ""  # no "Starting two Kafka brokers"
    assert list(tmp_path.iterdir()) == []  # no work dir, so no broker either


@pytest.mark.kafka
def test_the_work_dir_is_removed_on_exit(tmp_path: Path, kafka_broker_factory) -> None:
    kafka_broker_factory.make_room()  # the demo's two JVMs, beside at most one of the session's
    proc = _demo(tmp_path, "--duration", "1", "--listen", f"127.0.0.1:{free_port()}", timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert list(tmp_path.glob("txn-exporter-demo-*")) == [], proc.stdout
    assert "removed on exit; --keep-work-dir keeps it" in proc.stdout


HOLDING = (
    "... holding the markers of demo-held's commit and the coordinator's abort of demo-held-timeout (timed out) "
    f"back for {HOLD_SECONDS} s: pending markers 2, marker retries climbing"
)
RELEASING = "... releasing the held markers: pending markers drop back to 0 within seconds"
SUMMARY = re.compile(
    r"^\[\d\d:\d\d:\d\d\] since start: appends PREPARE_COMMIT (\d+), PREPARE_ABORT (\d+) "
    r"\(p99 of the last 5 min: (?:\d+ ms|-), (?:\d+ ms|-)\), marker retries (\d+) "
    r"\| now: pending markers (\d+)(?:, the oldest for \d+\.\d s)?$"
)
LOGGED = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} (DEBUG|INFO|WARNING|ERROR|CRITICAL) \S+: ")


def _summary(line: str) -> tuple[int, int, int, int] | None:
    """A summary line's PREPARE_COMMIT and PREPARE_ABORT appends, marker retries, pending markers."""
    match = SUMMARY.match(line)
    return None if match is None else (int(match[1]), int(match[2]), int(match[3]), int(match[4]))


def _released(lines: list[str]) -> bool:
    """The release announced, and a summary after it shows no pending markers."""
    if RELEASING not in lines:
        return False
    after = [_summary(line) for line in lines[lines.index(RELEASING) + 1 :]]
    return any(summary is not None and summary[3] == 0 for summary in after)


@pytest.fixture(scope="module")
def through_a_hold(tmp_path_factory, kafka_broker_factory) -> tuple[list[str], str, Path]:
    """The demo (work dir kept) until it released its first hold and a summary after that shows 0
    pending, then Ctrl-C: its stdout lines, its stderr, and the test's TMPDIR."""
    tmp_path = tmp_path_factory.mktemp("demo")
    kafka_broker_factory.make_room()
    demo = subprocess.Popen(
        [sys.executable, "-m", "exporter", "demo", "--listen", f"127.0.0.1:{free_port()}", "--keep-work-dir"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "TMPDIR": str(tmp_path)},
        stdin=subprocess.DEVNULL,
    )
    stdout, stderr = demo.stdout, demo.stderr
    assert stdout is not None and stderr is not None
    lines: list[str] = []
    errors: list[str] = []
    readers = [
        threading.Thread(target=lambda: lines.extend(line.rstrip("\n") for line in stdout), daemon=True),
        threading.Thread(target=lambda: errors.extend(stderr), daemon=True),
    ]
    for reader in readers:
        reader.start()
    deadline = time.monotonic() + 300
    try:
        while not _released(list(lines)):
            assert demo.poll() is None and time.monotonic() < deadline, "\n".join(lines) + "".join(errors)
            time.sleep(0.5)
        demo.send_signal(signal.SIGINT)
        assert demo.wait(180) == 0, "\n".join(lines) + "".join(errors)
    finally:
        if demo.poll() is None:
            demo.kill()
            demo.wait()
    for reader in readers:
        reader.join(10)
    return lines, "".join(errors), tmp_path


def test_the_work_dir_is_kept_with_keep_work_dir(through_a_hold) -> None:
    lines, _, tmp_path = through_a_hold
    (work_dir,) = tmp_path.glob("txn-exporter-demo-*")
    assert f"Brokers' data and logs kept in {work_dir}" in lines
    assert (work_dir / "broker-1" / "logs" / "server.log").stat().st_size > 0


def test_a_hold_is_announced_once_both_transactions_are_pending_and_released_before_any_summary_shows_0(
    through_a_hold,
) -> None:
    """The hold holds two transactions (a commit, a timed-out producer's abort), says so, and says it
    once the exporter sees them both; the summaries show both pending until the release is announced."""
    lines, _, _ = through_a_hold
    assert lines.count(HOLDING) == 1 and lines.count(RELEASING) == 1, lines
    held = [_summary(line) for line in lines[lines.index(HOLDING) + 1 : lines.index(RELEASING)]]
    assert held and all(summary is not None and summary[3] == 2 for summary in held), lines
    retries = [summary[2] for summary in held if summary]
    assert retries == sorted(retries) and (len(retries) == 1 or retries[-1] > retries[0]), lines
    # Before the line, the exporter may have seen one of the two already (the line waits for both).
    before = [summary for summary in map(_summary, lines[: lines.index(HOLDING)]) if summary]
    assert all(summary[3] <= 2 for summary in before), lines


def test_the_summaries_are_totals_since_the_start_then_what_is_now(through_a_hold) -> None:
    lines, _, _ = through_a_hold
    summaries = [summary for summary in map(_summary, lines) if summary]
    assert len(summaries) >= 3
    for column in (0, 1, 2):  # running totals only grow
        totals = [summary[column] for summary in summaries]
        assert totals == sorted(totals), (column, totals)
    words = " ".join(" ".join(lines).split())
    assert f"after every {FREE_SECONDS} s of that, the markers of two transactions are held back for" in words
    assert "Each summary line: totals since the start, then what is true now." in words


def test_no_client_line_reaches_the_terminal_raw(through_a_hold) -> None:
    """librdkafka's lines (its producers', its child processes') go through logging, whose level the
    demo sets: ERROR for the harness's clients. A bare line would be one of theirs."""
    lines, stderr, _ = through_a_hold
    assert not any("Failed to acquire transactional PID" in line for line in [*lines, *stderr.splitlines()])
    assert all(LOGGED.match(line) for line in stderr.splitlines() if line and not line.startswith(" ")), stderr


def test_the_help_says_when_markers_are_held() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "exporter", "demo", "--help"], capture_output=True, text=True, timeout=60, check=True
    )
    words = " ".join(proc.stdout.split())
    assert "now and then" not in words
    assert f"after every {FREE_SECONDS} s of those, the markers of two transactions held back for {HOLD_SECONDS} s" in (
        words
    )


def test_what_the_newcomer_reads_says_that_kafka_resends_markers_without_backoff(capsys) -> None:
    """A hold counts hundreds of thousands of marker retries: the demo's glossary and the runbook say
    why (TransactionMarkerRequestCompletionHandler re-enqueues at once), and the README's caption no
    longer says the demo does not follow the broker log (it does: --broker-log on the coordinator)."""
    from txn_workshop.demo import _explain

    _explain("http://127.0.0.1:9464/metrics", "127.0.0.1:9092")
    assert "Kafka retries markers without backoff" in capsys.readouterr().out
    runbooks = (ROOT / "alerts" / "runbooks.md").read_text()
    section = runbooks.split("## KafkaTransactionMarkerRetriesSustained", 1)[1].split("\n## ", 1)[0]
    assert "with no backoff at all" in section and "TransactionMarkerRequestCompletionHandler" in section
    readme = " ".join((ROOT / "README.md").read_text().split())
    assert "the demo does not follow the broker's log" not in readme
    assert "read from the coordinator's log that the demo follows with `--broker-log`" in readme

"""`txn-exporter demo` as a real process: what it checks before starting, and what it leaves behind.

The demo's work dir is a temporary directory: TMPDIR points it into the test's own directory."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

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
@pytest.mark.parametrize("keep", [False, True], ids=["removed", "kept"])
def test_the_work_dir_is_removed_on_exit_unless_kept(tmp_path: Path, kafka_broker_factory, keep: bool) -> None:
    kafka_broker_factory.make_room()  # the demo's two JVMs, beside at most one of the session's
    proc = _demo(
        tmp_path,
        "--duration",
        "1",
        "--listen",
        f"127.0.0.1:{free_port()}",
        *(["--keep-work-dir"] if keep else []),
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    work_dirs = list(tmp_path.glob("txn-exporter-demo-*"))
    if keep:
        assert len(work_dirs) == 1
        assert f"Brokers' data and logs kept in {work_dirs[0]}" in proc.stdout
        assert (work_dirs[0] / "broker-1" / "logs" / "server.log").stat().st_size > 0
    else:
        assert work_dirs == [], proc.stdout
        assert "removed on exit; --keep-work-dir keeps it" in proc.stdout


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

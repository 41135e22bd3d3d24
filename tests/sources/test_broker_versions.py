"""The broker's startup line looked for backwards through its log and the log's rotated files
(exporter.sources.broker_versions.startup_version)."""

from __future__ import annotations

import os
from pathlib import Path

from exporter.contracts.events import BrokerVersionSeen
from exporter.sources import broker_versions
from exporter.sources.broker_versions import startup_version

LINE = "[2026-12-02 01:11:26,039] INFO Kafka version: {} (org.apache.kafka.common.utils.AppInfoParser)\n"
FILLER = "[2026-12-02 01:11:27,000] INFO [Transaction State Manager 1]: filler line number {:08d} (kafka.x.Y)\n"


def write(path: Path, *parts: str, mtime: int | None = None) -> Path:
    path.write_text("".join(parts))
    if mtime is not None:
        os.utime(path, (mtime, mtime))
    return path


def filler(count: int, start: int = 0) -> str:
    return "".join(FILLER.format(n) for n in range(start, start + count))


def test_the_last_startup_line_of_the_file_wins(tmp_path: Path) -> None:
    log = write(tmp_path / "server.log", LINE.format("3.7.1"), filler(10), LINE.format("3.8.1"), filler(10))
    assert startup_version(log) == BrokerVersionSeen("3.8.1")


def test_a_line_far_back_and_across_chunks_is_found(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(broker_versions, "_CHUNK", 1000)  # many chunks, lines cut by their bounds
    log = write(tmp_path / "server.log", filler(5), LINE.format("4.2.2"), filler(300))
    assert startup_version(log) == BrokerVersionSeen("4.2.2")


def test_the_newest_rotated_file_is_looked_in_next(tmp_path: Path) -> None:
    log = write(tmp_path / "txn-coordinator.log", filler(50), mtime=3000)
    write(tmp_path / "txn-coordinator.log.1", LINE.format("4.0.2"), filler(5), mtime=2000)
    write(tmp_path / "txn-coordinator.log.2", LINE.format("3.9.2"), filler(5), mtime=1000)
    write(tmp_path / "txn-coordinator.log.3.gz", LINE.format("3.6.2"), mtime=2500)  # compressed: not read
    write(tmp_path / "other.log", LINE.format("3.6.2"), mtime=2500)
    assert startup_version(log) == BrokerVersionSeen("4.0.2")


def test_a_log_without_the_startup_line_gives_none(tmp_path: Path) -> None:
    log = write(tmp_path / "server.log", filler(100))
    write(tmp_path / "server.log.1", filler(100))
    assert startup_version(log) is None
    assert startup_version(tmp_path / "missing.log") is None


def test_the_look_back_is_bounded(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(broker_versions, "_CHUNK", 1000)
    log = write(tmp_path / "server.log", LINE.format("3.7.2"), filler(100))
    assert startup_version(log, budget=2000) is None
    assert startup_version(log, budget=100_000) == BrokerVersionSeen("3.7.2")


def test_look_alike_lines_are_passed_over(tmp_path: Path) -> None:
    log = write(
        tmp_path / "server.log",
        LINE.format("3.7.2"),
        "[2026-12-02 01:11:26,039] INFO Kafka version: 9.9.9 (org.apache.kafka.clients.producer.KafkaProducer)\n",
        "a stack trace line saying Kafka version: 9.9.8\n",
    )
    assert startup_version(log) == BrokerVersionSeen("3.7.2")

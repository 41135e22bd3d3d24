"""The broker's startup line `Kafka version: X` (AppInfoParser), as each pinned broker writes it
(tests/sources/broker_log_corpus/startup/, captured by `python -m txn_workshop.broker_fingerprints`),
read by the single-line parser and the log parser; its other lines and look-alikes read as nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from exporter.broker_log import BrokerLogParser
from exporter.broker_log.lines import MALFORMED, parse_entry
from exporter.contracts.events import BrokerVersionSeen
from txn_workshop.harness.versions import KAFKA_VERSIONS

STARTUP = Path(__file__).parents[1] / "sources" / "broker_log_corpus" / "startup"
TS = "[2026-12-02 01:11:26,039]"


def captures() -> list[Path]:
    return sorted(STARTUP.glob("*.log"))


def test_every_pinned_version_has_its_capture() -> None:
    assert {p.name.removesuffix(".log").removesuffix("-zookeeper") for p in captures()} == set(KAFKA_VERSIONS)


@pytest.mark.parametrize("capture", captures(), ids=lambda p: p.name)
def test_each_brokers_startup_line_gives_its_version(capture: Path) -> None:
    version = capture.name.removesuffix(".log").removesuffix("-zookeeper")
    lines = capture.read_bytes().splitlines()
    events = BrokerLogParser().feed(lines, now_ms=123)
    assert events == [BrokerVersionSeen(version)]
    assert events[0].seen_ms == 123  # stamped with when it was read
    # Its other lines (commitId, startTimeMs) are not read.
    assert [parse_entry(line.decode()) for line in lines if b"Kafka version" not in line] == [None] * (len(lines) - 1)


@pytest.mark.parametrize(
    "package", ["org.apache.kafka.common.utils.AppInfoParser", "org.apache.kafka.common.utils.internals.AppInfoParser"]
)
def test_a_vendors_version_is_kept_as_written(package: str) -> None:
    assert parse_entry(f"{TS} INFO Kafka version: 7.7.1-ccs ({package})") == BrokerVersionSeen("7.7.1-ccs")


def test_an_over_long_version_is_cut() -> None:
    parsed = parse_entry(f"{TS} INFO Kafka version: {'9' * 5000} (org.apache.kafka.common.utils.AppInfoParser)")
    assert parsed == BrokerVersionSeen("9" * 64)


@pytest.mark.parametrize(
    "line",
    [
        # Another logger's line that says the words (a client's, or a message quoting them).
        f"{TS} INFO Kafka version: 3.7.1 (org.apache.kafka.clients.producer.KafkaProducer)",
        f"{TS} INFO App info kafka.server for 1 unregistered (org.apache.kafka.common.utils.AppInfoParser)",
        f"{TS} INFO Kafka commitId: c5e942859576203e (org.apache.kafka.common.utils.AppInfoParser)",
    ],
)
def test_lines_that_are_not_the_startup_line_read_as_nothing(line: str) -> None:
    assert parse_entry(line) is None
    assert BrokerLogParser().feed([line.encode()]) == []


def test_a_startup_line_without_the_frame_is_malformed_not_a_version() -> None:
    assert parse_entry("Kafka version: 3.7.1 (org.apache.kafka.common.utils.AppInfoParser") == MALFORMED
    parser = BrokerLogParser()
    assert parser.feed([b"  Kafka version: 3.7.1 (org.apache.kafka.common.utils.AppInfoParser)"]) == []

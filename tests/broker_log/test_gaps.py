"""What a broker log cannot carry, from the parser's record of it: one gap per kind, no false
alarm on real logs of Kafka's default configuration."""

from __future__ import annotations

from pathlib import Path

import pytest

from exporter.broker_log.gaps import gaps
from exporter.broker_log.parser import LAYOUT_SAMPLE, SAMPLE_CHARS, BrokerLogParser
from tests.broker_log.test_lines import META_3, META_41, debug_line, info_line

CORPUS = Path(__file__).parents[1] / "sources" / "broker_log_corpus"
NOISE = "[2026-11-21 07:23:25,279] INFO [ReplicaManager broker=1] Something else (kafka.server.ReplicaManager)"
# A retry line reworded (`to partition` for `for partition`): a kind the exporter reads, a format it does not know.
REWORDED = (
    "[2026-11-21 07:23:25,279] INFO [Transaction Marker Request Completion Handler 1]: Sending t-1's transaction"
    " marker to partition a-0 has failed with error org.apache.kafka.common.errors.NotEnoughReplicasException,"
    " retrying with current coordinator epoch 0"
    " (kafka.coordinator.transaction.TransactionMarkerRequestCompletionHandler)"
)
# Strimzi's default broker layouts (its default-logging KafkaCluster properties): log4j 1, then log4j2.
STRIMZI_LOG4J1 = (
    "2026-11-21 07:23:25,279 INFO [Transaction State Manager 1]: Finished loading 1 transaction metadata"
    " (kafka.coordinator.transaction.TransactionStateManager) [kafka-scheduler-3]"
)
STRIMZI_LOG4J2 = (
    "2026-11-21 07:23:25 INFO  [kafka-scheduler-3] TransactionStateManager:432 - [Transaction State"
    " Manager 1]: Finished loading 1 transaction metadata"
)


def seen(*lines: str, repeat: int = 1) -> dict[str, str]:
    parser = BrokerLogParser()
    for _ in range(repeat):
        parser.feed([line.encode() for line in lines])
    return dict(gaps(parser, set()))


def test_a_real_log_of_kafkas_default_configuration_has_no_gap():
    for version in ("3.9.2", "4.4.0"):
        lines = (CORPUS / f"{version}.log").read_bytes().split(b"\n")[:-1]
        parser = BrokerLogParser()
        while parser.layout_sampled < LAYOUT_SAMPLE:
            parser.feed(lines)
        assert dict(gaps(parser, set())) == {}


def test_an_unrecognized_line_names_its_logger_and_shows_itself():
    found = seen(REWORDED, NOISE, REWORDED)
    logger = "kafka.coordinator.transaction.TransactionMarkerRequestCompletionHandler"
    assert list(found) == ["unrecognized " + logger]
    assert found["unrecognized " + logger].endswith(": " + REWORDED[:SAMPLE_CHARS])
    assert 'reason="unrecognized"' in found["unrecognized " + logger]


@pytest.mark.parametrize("line", [STRIMZI_LOG4J1, STRIMZI_LOG4J2])
def test_another_layout_is_told_once_enough_lines_are_seen(line):
    assert "layout" not in seen(line, repeat=LAYOUT_SAMPLE - 1)
    found = seen(line, repeat=LAYOUT_SAMPLE)
    assert "Kafka's default layout `[%d] %p %m (%c)%n`" in found["layout"]
    assert found["layout"].endswith("its first line: " + line)
    # The log4j 1 one names the coordinator's logger: each of its lines is also counted as malformed.
    assert ("malformed" in found) == (line is STRIMZI_LOG4J1)


def test_a_log_without_info_lines_is_told():
    warn = "[2026-11-21 07:23:25,279] WARN Something (kafka.server.ReplicaManager)"
    assert "all WARN" in seen(warn, repeat=LAYOUT_SAMPLE)["layout"]


def test_append_failures_at_info_only_ask_for_the_debug_line():
    meta = META_41.format("PREPARE_COMMIT")
    info_only = seen(info_line(meta, tid="a"), info_line(meta, tid="b"))
    assert list(info_only) == ["info-only"]
    assert "kafka.coordinator.transaction.TransactionStateManager to DEBUG" in info_only["info-only"]
    assert seen(info_line(meta, tid="a")) == {}  # one: its DEBUG line may be before where reading began
    both = META_3.format("PrepareCommit")
    assert seen(debug_line(both, tid="a"), info_line(both, tid="a"), info_line(both, tid="b")) == {}


def test_gaps_already_told_are_not_told_again():
    parser = BrokerLogParser()
    parser.feed([REWORDED.encode()])
    ((key, _),) = gaps(parser, set())
    assert list(gaps(parser, {key})) == []

"""TransactionCollector output parsed back from Prometheus text and OpenMetrics."""

from __future__ import annotations

import math

import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import generate_latest
from prometheus_client.openmetrics.exposition import generate_latest as generate_openmetrics
from prometheus_client.openmetrics.parser import text_string_to_metric_families as parse_openmetrics
from prometheus_client.parser import text_string_to_metric_families as parse_prometheus

from exporter.codec import DecodeError, TransactionLogValue, decode_record, encode_key, encode_value
from exporter.codec.value import TAGGED_FIELDS
from exporter.contracts.events import (
    BrokerLogStats,
    BrokerVersionSeen,
    CompleteAppendRetried,
    HangingScanCompleted,
    MarkerWriteFailed,
    MarkerWriteRetried,
    PartitionAssigned,
    PartitionProgress,
    PartitionReplayed,
    PartitionRevoked,
    SourceStatus,
    TransactionLogAppendFailed,
    TransactionLogRecords,
    UndecodableRecord,
)
from exporter.metrics import CATALOGUE, LatencyRecorders, TransactionCollector
from exporter.model import CoordinatorModel
from tests.model.builders import S, log_event

NOW_MS = 1_000_000
# A tag the codec does not name: a newer Kafka's, above the highest it names.
NEXT_TAG = TAGGED_FIELDS[-1].tag + 1


def samples(text: str, openmetrics: bool) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    parse = parse_openmetrics if openmetrics else parse_prometheus
    return {(s.name, tuple(sorted(s.labels.items()))): s.value for family in parse(text) for s in family.samples}


def scrape(collector: TransactionCollector, openmetrics: bool):
    registry = CollectorRegistry()
    registry.register(collector)
    text = (generate_openmetrics if openmetrics else generate_latest)(registry).decode()
    return text, samples(text, openmetrics)


@pytest.fixture
def pipeline():
    recorders = LatencyRecorders(window_seconds=300, now_ms=NOW_MS - 10_000)
    model = CoordinatorModel(recorders.sinks())
    collector = TransactionCollector(model, recorders, clock=lambda: NOW_MS / 1000)
    return model, collector


def _newer_kafkas(tid: str, *, partition: int, offset: int, timestamp_ms: int) -> TransactionLogRecords:
    """A record of a newer Kafka: a tagged field the codec does not name (NEXT_TAG); replayed, so that
    it is observed nowhere else."""
    value = TransactionLogValue(
        version=1,
        producer_id=4001,
        producer_epoch=0,
        transaction_timeout_ms=60_000,
        state=S.EMPTY,
        partitions=None,
        last_update_timestamp_ms=timestamp_ms,
        start_timestamp_ms=timestamp_ms,
        unknown_tagged_fields=((NEXT_TAG, b"\x7f\xfe"),),
    )
    record = decode_record(encode_key(tid), encode_value(value), offset, timestamp_ms, partitions=False)
    return TransactionLogRecords(partition, [record], timestamp_ms + 5, True)


def feed(model: CoordinatorModel) -> None:
    model.apply(SourceStatus(True))
    for partition in (0, 1):
        model.apply(PartitionAssigned(partition))
        model.apply(PartitionReplayed(partition))
        model.apply(PartitionProgress(partition, position=0, high_watermark=10))
    t = NOW_MS - 5_000
    model.apply(log_event("a", S.ONGOING, offset=0, timestamp_ms=t, received_ms=t + 3))
    model.apply(log_event("a", S.PREPARE_COMMIT, offset=1, timestamp_ms=t + 10, received_ms=t + 14))
    model.apply(log_event("a", S.COMPLETE_COMMIT, offset=2, timestamp_ms=t + 30, received_ms=t + 32))
    model.apply(_newer_kafkas("c", partition=1, offset=4, timestamp_ms=t + 400))
    model.apply(log_event("b", S.PREPARE_ABORT, partition=1, offset=5, timestamp_ms=t + 500, received_ms=t + 3_001))
    model.apply(UndecodableRecord(1, 6, DecodeError("crc_mismatch", "x")))
    # From the broker log.
    model.apply(TransactionLogAppendFailed(S.PREPARE_COMMIT, "NOT_ENOUGH_REPLICAS"))
    model.apply(MarkerWriteRetried("NOT_ENOUGH_REPLICAS"))
    model.apply(MarkerWriteRetried("NOT_ENOUGH_REPLICAS"))
    model.apply(MarkerWriteFailed("INVALID_PRODUCER_EPOCH"))
    model.apply(CompleteAppendRetried("not-pending"))
    model.apply(BrokerLogStats(lines=40, truncated=1, malformed=2, rotations=1, utc_offset_ms=19_800_000))
    # The broker's version, from its log's startup line: which known bugs it has.
    model.apply(BrokerVersionSeen("4.4.0"))
    # From the data-partition view (its gauges exist once a scan completed).
    model.apply(HangingScanCompleted(partitions_scanned=8, partitions_with_late_transactions=2, hanging_transactions=1))


@pytest.mark.parametrize("openmetrics", [False, True])
def test_exact_names_and_values_parse_back(pipeline, openmetrics):
    model, collector = pipeline
    feed(model)
    _, got = scrape(collector, openmetrics)

    def value(name: str, **labels: str) -> float:
        return got[(name, tuple(sorted(labels.items())))]

    latency = "kafka_transaction_state_log_append_latency_seconds"
    assert value(f"{latency}_bucket", target_state="ONGOING", le="0.0025") == 0
    assert value(f"{latency}_bucket", target_state="ONGOING", le="0.005") == 1
    assert value(f"{latency}_bucket", target_state="PREPARE_ABORT", le="2.5") == 0
    assert value(f"{latency}_bucket", target_state="PREPARE_ABORT", le="5.0") == 1
    assert value(f"{latency}_count", target_state="PREPARE_COMMIT") == 1
    assert value(f"{latency}_sum", target_state="PREPARE_COMMIT") == pytest.approx(0.004)
    assert value(f"{latency}_count", target_state="EMPTY") == 0
    # Without --broker-log the fetch clock times every record, and the records count is its count.
    assert value("txn_exporter_append_latency_clock_info", clock="fetch") == 1
    assert value("txn_exporter_append_latency_transitions_total", target_state="PREPARE_COMMIT", clock="fetch") == 1
    assert value("txn_exporter_append_latency_transitions_total", target_state="PREPARE_COMMIT", clock="untimed") == 0
    assert value("kafka_transaction_state_log_records_total", target_state="PREPARE_COMMIT") == 1
    assert value("txn_exporter_broker_log_utc_offset_seconds") == 19_800

    quantile = "kafka_transaction_state_log_append_latency_quantile_seconds"
    assert value(quantile, target_state="PREPARE_ABORT", quantile="0.99") == 2.501
    assert value(quantile, target_state="COMPLETE_COMMIT", quantile="1.0") == 0.002
    assert math.isnan(value(quantile, target_state="EMPTY", quantile="0.5"))

    assert value("kafka_transactions_with_pending_markers") == 1
    assert value("kafka_transaction_pending_markers_oldest_age_seconds") == 4.5
    assert value("kafka_transactions", state="COMPLETE_COMMIT") == 1
    assert value("kafka_transactions", state="PREPARE_ABORT") == 1
    assert value("kafka_transactions", state="ONGOING") == 0
    completion = "kafka_transaction_marker_completion_seconds"
    assert value(f"{completion}_bucket", result="commit", le="0.025") == 1
    assert value(f"{completion}_count", result="abort") == 0
    assert value("kafka_transaction_state_log_records_total", target_state="ONGOING") == 1
    assert value("kafka_transaction_state_log_records_total", target_state="EMPTY") == 0
    assert value("kafka_transaction_state_log_tombstones_total") == 0
    assert value("kafka_transaction_state_log_decode_errors_total", reason="crc_mismatch") == 1
    assert value("kafka_transaction_state_log_decode_errors_total", reason="truncated") == 0
    assert value("kafka_transaction_state_log_unknown_tagged_fields_total", tag=str(NEXT_TAG)) == 1
    assert value("txn_exporter_unwritten_state_records_total", state="DEAD") == 0
    errors = "kafka_transaction_state_log_append_errors_total"
    assert value(errors, target_state="PREPARE_COMMIT", error="NOT_ENOUGH_REPLICAS") == 1
    assert value("kafka_transaction_marker_retries_total", error="NOT_ENOUGH_REPLICAS") == 2
    assert value("kafka_transaction_marker_failures_total", error="INVALID_PRODUCER_EPOCH") == 1
    assert value("kafka_transaction_state_log_complete_append_retries_total") == 1
    assert value("txn_exporter_broker_log_lines_total") == 40
    assert value("txn_exporter_broker_log_skipped_lines_total", reason="malformed") == 2
    assert value("txn_exporter_broker_log_skipped_lines_total", reason="unrecognized") == 0
    assert value("txn_exporter_broker_log_truncated_lines_total") == 1
    assert value("txn_exporter_broker_log_rotations_total") == 1

    assert value("txn_exporter_source_up") == 1
    assert value("txn_exporter_partitions_followed", phase="live") == 2
    assert value("txn_exporter_partition_consumer_lag_records", partition="0") == 7
    assert value("txn_exporter_partition_consumer_lag_records", partition="1") == 3
    assert value("txn_exporter_partition_last_record_timestamp_seconds", partition="1") == (NOW_MS - 4_500) / 1000
    assert [k for k in got if k[0] == "txn_exporter_build_info"]


@pytest.mark.parametrize("openmetrics", [False, True])
def test_every_catalogue_metric_is_exposed_under_its_name(pipeline, openmetrics):
    model, collector = pipeline
    feed(model)
    text, got = scrape(collector, openmetrics)
    exposed = {name for name, _ in got}
    for spec in CATALOGUE:
        suffixes = ("_bucket", "_count", "_sum") if spec.type == "histogram" else ("",)
        assert {spec.name + s for s in suffixes} <= exposed, spec.name
        assert f"# HELP {spec.family_name if openmetrics else spec.name} " in text
        if openmetrics and spec.unit:
            assert f"# UNIT {spec.family_name} {spec.unit}" in text


def test_revoke_drops_every_series_only_that_partition_fed(pipeline):
    model, collector = pipeline
    feed(model)
    model.apply(PartitionRevoked(1))
    _, got = scrape(collector, openmetrics=False)
    assert not [k for k in got if ("partition", "1") in k[1]]
    assert got[("txn_exporter_partition_consumer_lag_records", (("partition", "0"),))] == 7
    assert got[("kafka_transactions_with_pending_markers", ())] == 0
    assert got[("kafka_transaction_pending_markers_oldest_age_seconds", ())] == 0
    assert got[("kafka_transactions", (("state", "PREPARE_ABORT"),))] == 0
    assert got[("txn_exporter_partitions_followed", (("phase", "live"),))] == 1


def test_replaying_partitions_are_followed_but_not_in_the_gauges(pipeline):
    model, collector = pipeline
    model.apply(PartitionAssigned(4))
    model.apply(log_event("a", S.PREPARE_COMMIT, partition=4, timestamp_ms=1, replay=True))
    _, got = scrape(collector, openmetrics=True)
    assert got[("txn_exporter_partitions_followed", (("phase", "replaying"),))] == 1
    assert got[("kafka_transactions_with_pending_markers", ())] == 0
    assert got[("kafka_transaction_state_log_records_total", (("target_state", "PREPARE_COMMIT"),))] == 0


def test_registers_by_catalogue_description_without_scraping(pipeline):
    model, collector = pipeline
    registry = CollectorRegistry()
    registry.register(collector)
    with pytest.raises(ValueError, match="Duplicated"):
        registry.register(TransactionCollector(model, LatencyRecorders()))

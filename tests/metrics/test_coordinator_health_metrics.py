"""The coordinator's health as scraped: its loads and the producer epochs' headroom, parsed back from
Prometheus text and OpenMetrics."""

from __future__ import annotations

import pytest

from exporter.contracts.events import (
    BrokerVersionSeen,
    CoordinatorLoadFinished,
    CoordinatorLoadStarted,
    PartitionAssigned,
    PartitionReplayed,
)
from tests.metrics.test_prometheus import NOW_MS, pipeline, scrape  # noqa: F401  # pipeline: a fixture
from tests.model.test_late_timeouts_rotations import S, event


@pytest.mark.parametrize("openmetrics", [False, True])
def test_loads_render_as_their_gauges_histogram_and_counter(pipeline, openmetrics):  # noqa: F811
    model, collector = pipeline
    model.apply(CoordinatorLoadStarted(7, epoch=2, seen_ms=NOW_MS - 301_500))  # never finished
    for duration_ms in (3, 1_200):
        model.apply(CoordinatorLoadStarted(8, epoch=2, seen_ms=NOW_MS - 2_000))
        model.apply(CoordinatorLoadFinished(8, transactions=10, duration_ms=duration_ms, scheduler_ms=0))
    _, got = scrape(collector, openmetrics)

    assert got[("kafka_transaction_state_log_partitions_loading", ())] == 1
    assert got[("kafka_transaction_state_log_load_oldest_age_seconds", ())] == 301.5
    histogram = "kafka_transaction_state_log_load_duration_seconds"
    bucket = f"{histogram}_bucket"
    assert got[(bucket, (("le", "0.005"),))] == 1
    assert got[(bucket, (("le", "1.0"),))] == 1
    assert got[(bucket, (("le", "2.5"),))] == 2
    assert got[(bucket, (("le", "+Inf"),))] == got[(f"{histogram}_count", ())] == 2
    assert got[(f"{histogram}_sum", ())] == pytest.approx(1.203)
    assert got[("kafka_transaction_state_log_loads_without_leader_change_total", ())] == 1


@pytest.mark.parametrize("openmetrics", [False, True])
def test_epoch_headroom_renders_by_transaction_version(pipeline, openmetrics):  # noqa: F811
    model, collector = pipeline
    model.apply(PartitionAssigned(0))
    model.apply(PartitionReplayed(0))
    model.apply(event("near", S.ONGOING, epoch=32_000, tv=2))
    model.apply(event("classic", S.ONGOING, epoch=7, tv=0))
    _, got = scrape(collector, openmetrics)

    near = "kafka_transactional_ids_near_epoch_exhaustion"
    assert got[(near, (("transaction_version", "2"),))] == 1
    assert got[(near, (("transaction_version", "0"),))] == 0
    assert got[("kafka_transaction_producer_epoch_max", (("transaction_version", "2"),))] == 32_000
    assert got[("kafka_transaction_producer_epoch_max", (("transaction_version", "0"),))] == 7


def test_no_load_seen_renders_zeros(pipeline):  # noqa: F811
    _, collector = pipeline
    _, got = scrape(collector, openmetrics=False)
    assert got[("kafka_transaction_state_log_partitions_loading", ())] == 0
    assert got[("kafka_transaction_state_log_load_oldest_age_seconds", ())] == 0
    assert got[("kafka_transaction_state_log_load_duration_seconds_count", ())] == 0


@pytest.mark.parametrize(
    ("version", "affected"),
    [("4.2.2", 1), ("4.3.1", 0), ("7.7.1-ccs", None)],  # affected, fixed, a vendor's: unknown
)
def test_the_brokers_version_says_which_known_bugs_it_has(pipeline, version, affected):  # noqa: F811
    model, collector = pipeline
    model.apply(BrokerVersionSeen(version))
    _, got = scrape(collector, openmetrics=False)
    assert got.get(("txn_exporter_broker_affected_by_known_bug", (("bug", "KAFKA-20090"),))) == affected
    assert got.get(("txn_exporter_broker_affected_by_known_bug", (("bug", "KAFKA-16352"),))) == (
        None if affected is None else 0
    )

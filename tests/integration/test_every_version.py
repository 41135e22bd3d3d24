"""The compact scenario on every pinned Kafka version (exporter/harness/versions.py), one two-broker
cluster per version: commits, aborts and a timeout abort counted exactly as Kafka's own
DumpLogSegments reads `__transaction_state`, and markers held back (pending 1, the oldest ageing).

Each test declares its check of the README's "Tested on" table (tests/tested_on.py).
"""

from __future__ import annotations

from collections import Counter

import pytest

from exporter.harness.versions import KAFKA_VERSIONS
from exporter.harness.workload import create_topic, held_commit, run_mix

PARTITIONS = 4
RECORDS = "kafka_transaction_state_log_records_total"
PENDING = "kafka_transactions_with_pending_markers"
OLDEST = "kafka_transaction_pending_markers_oldest_age_seconds"
TARGET_STATES = ("EMPTY", "ONGOING", "PREPARE_COMMIT", "PREPARE_ABORT", "COMPLETE_COMMIT", "COMPLETE_ABORT")


@pytest.fixture(scope="module", params=KAFKA_VERSIONS)
def version(request) -> str:
    return request.param


@pytest.fixture(scope="module")
def cluster(version, kafka_broker_factory, tmp_path_factory):
    root = tmp_path_factory.mktemp(f"every-version-{version}")
    with kafka_broker_factory.joined_pair(root, version, transaction_state_partitions=PARTITIONS) as pair:
        create_topic(pair[0].bootstrap_servers, "held", partitions=1, replication_factor=2)
        create_topic(pair[0].bootstrap_servers, "orders", partitions=2, replication_factor=1)
        yield pair


@pytest.fixture(scope="module")
def exporter_on(cluster, tmp_path_factory):
    """One exporter beside the first broker (every partition is on it), for the whole module."""
    from tests.integration.exporter_process import ExporterProcess

    process = ExporterProcess(cluster[0].bootstrap_servers, "--all-partitions",
                              log=tmp_path_factory.mktemp("exporter") / "exporter.log")
    try:
        process.wait_ready(120)
        process.wait_for(lambda: process.value("txn_exporter_partitions_followed", phase="live") == PARTITIONS,
                         60, "every partition live")
        yield process
    finally:
        process.stop()


@pytest.mark.tested_on("counts")
def test_commits_aborts_and_timeout_aborts_equal_dump_log_segments(cluster, exporter_on):
    first, _ = cluster
    process = exporter_on
    ids = ["every-a", "every-b"]
    result = run_mix(first.bootstrap_servers, "orders", ids, commits=2, aborts=1, timeouts=1)
    process.wait_for(
        lambda: process.value(RECORDS, target_state="COMPLETE_ABORT") == result.aborts + result.timeouts
        and process.value(RECORDS, target_state="COMPLETE_COMMIT") == result.commits,
        60, "every complete record",
    )
    dumped = first.transaction_log_records()
    # Kafka's own reading of the workload's records, per state: the exporter counted each live one.
    ours = Counter(r.state for r in dumped if r.transactional_id in ids)
    assert {s: process.value(RECORDS, target_state=s) for s in TARGET_STATES} == {s: ours[s] for s in TARGET_STATES}
    assert (ours["COMPLETE_COMMIT"], ours["COMPLETE_ABORT"]) == (result.commits, result.aborts + result.timeouts)
    assert process.value("kafka_transaction_timeouts_total") == result.timeouts
    # Every transactional id's current state (replayed history included) as its last record says.
    last = {r.transactional_id: r.state for r in sorted(dumped, key=lambda r: (r.partition, r.offset))}
    current = Counter(state for state in last.values() if state is not None)
    assert {s: process.value("kafka_transactions", state=s) or 0 for s in TARGET_STATES} == {
        s: current[s] for s in TARGET_STATES}
    assert process.value(PENDING) == 0


@pytest.mark.tested_on("held markers")
def test_held_markers_are_pending_and_the_oldest_ages(cluster, exporter_on):
    first, second = cluster
    process = exporter_on
    commits = process.value(RECORDS, target_state="COMPLETE_COMMIT")
    with held_commit(first.bootstrap_servers, second, "held", "every-held"):
        process.wait_for(lambda: process.value(PENDING) == 1, 60, "a pending transaction")
        age = process.value(OLDEST)
        process.wait_for(lambda: process.value(OLDEST) >= age + 1, 30, "the oldest pending one ageing")
        assert process.value(PENDING) == 1
    process.wait_for(lambda: process.value(PENDING) == 0, 60, "markers written after the release")
    assert process.value(OLDEST) == 0
    assert process.value(RECORDS, target_state="COMPLETE_COMMIT") == commits + 1

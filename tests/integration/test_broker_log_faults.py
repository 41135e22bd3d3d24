"""`txn-exporter run --broker-log` against real faults on two-broker clusters of both versions:
held markers (retries), failing `__transaction_state` appends at INFO and DEBUG, a final COMPLETE_*
append in the coordinator's retry queue, and the broker log rotated under a running exporter.

Faults: a topic with replication factor 2 and min.insync.replicas=2 refuses acks=-1 appends with
NOT_ENOUGH_REPLICAS while the follower is stopped (brokers cap min.insync.replicas at the
replication factor, so the follower must really be out of the ISR). `__transaction_state` is moved
onto both brokers (replicas [1, 2], broker 1 stays the leader, so the coordinator) for that.
"""

from __future__ import annotations

import json
import os
import threading
import time

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

from tests.integration.exporter_process import ExporterProcess
from txn_workshop.harness.admin import alter_topic_config, create_topic
from txn_workshop.harness.broker import KafkaBroker
from txn_workshop.harness.versions import FULL_SUITE_VERSIONS
from txn_workshop.harness.workload import commit_transactions, held_commit, set_logger_level

STATE_TOPIC = "__transaction_state"
PARTITIONS = 8
RETRIES = "kafka_transaction_marker_retries_total"
APPEND_ERRORS = "kafka_transaction_state_log_append_errors_total"
COMPLETE_RETRIES = "kafka_transaction_state_log_complete_append_retries_total"
PENDING = "kafka_transactions_with_pending_markers"
OLDEST = "kafka_transaction_pending_markers_oldest_age_seconds"
RECORDS = "kafka_transaction_state_log_records_total"
STATE_MANAGER_LOGGER = "kafka.coordinator.transaction.TransactionStateManager"


@pytest.fixture(scope="module", params=FULL_SUITE_VERSIONS)
def cluster(request, kafka_broker_factory, tmp_path_factory):
    root = tmp_path_factory.mktemp(f"broker-log-{request.param}")
    with kafka_broker_factory.joined_pair(root, request.param, transaction_state_partitions=PARTITIONS) as pair:
        first = pair[0]
        create_topic(first.bootstrap_servers, "held", partitions=1, replication_factor=2)
        create_topic(first.bootstrap_servers, "plain", partitions=2, replication_factor=1)
        _replicate_transaction_state(first, root / "plan.json")
        yield pair


def _following_the_log(broker: KafkaBroker) -> tuple[str, ...]:
    """The exporter's arguments: every partition, and the broker's own log file."""
    return broker.bootstrap_servers, "--all-partitions", "--broker-log", str(broker.server_log)


def _replicate_transaction_state(first: KafkaBroker, plan, partitions: range | list[int] = range(PARTITIONS)) -> None:
    """`__transaction_state`'s `partitions` onto both brokers (broker 1 stays their leader)."""
    plan.write_text(
        json.dumps(
            {
                "version": 1,
                "partitions": [{"topic": STATE_TOPIC, "partition": p, "replicas": [1, 2]} for p in partitions],
            }
        )
    )
    result = first.run_tool(
        first.kafka.reassign_partitions_class,
        "--bootstrap-server",
        first.bootstrap_servers,
        "--reassignment-json-file",
        str(plan),
        "--execute",
    )
    assert result.returncode == 0, result.stdout + result.stderr
    admin = AdminClient({"bootstrap.servers": first.bootstrap_servers})
    deadline = time.monotonic() + 120
    while True:
        metadata = admin.list_topics(STATE_TOPIC, timeout=30).topics[STATE_TOPIC].partitions
        if all(sorted(metadata[p].isrs) == [1, 2] and metadata[p].leader == 1 for p in partitions):
            return
        assert time.monotonic() < deadline, "__transaction_state not replicated on both brokers"
        time.sleep(0.5)


def _producer(broker: KafkaBroker, tid: str) -> Producer:
    producer = Producer(
        {"bootstrap.servers": broker.bootstrap_servers, "transactional.id": tid, "transaction.timeout.ms": 120000}
    )
    producer.init_transactions(60)
    return producer


def _set_state_log_min_isr(broker: KafkaBroker, value: str) -> None:
    alter_topic_config(broker.bootstrap_servers, STATE_TOPIC, {"min.insync.replicas": value})


def _errors(process: ExporterProcess, name: str) -> dict[tuple, float]:
    return {labels: v for (n, labels), v in process.samples().items() if n == name}


def _log_lines_since(broker: KafkaBroker, offset: int, text: str) -> int:
    with broker.server_log.open("rb") as f:
        f.seek(offset)
        return sum(text.encode() in line for line in f)


def test_held_markers_are_retried_with_not_enough_replicas(cluster, exporter):
    first, second = cluster
    process = exporter(*_following_the_log(first))
    assert process.value(PENDING) == 0
    with held_commit(first.bootstrap_servers, second, "held", "bl-held"):
        process.wait_for(lambda: (process.value(RETRIES, error="NOT_ENOUGH_REPLICAS") or 0) > 0, 60, "marker retries")
        process.wait_for(lambda: process.value(PENDING) == 1, 60, "a pending transaction")
    process.wait_for(lambda: process.value(PENDING) == 0, 60, "markers written after the release")
    # Counted once timed: with a broker log its record waits for its line (5 s while none was read).
    process.wait_for(lambda: process.value(RECORDS, target_state="COMPLETE_COMMIT") == 1, 30, "the complete record")
    assert set(_errors(process, RETRIES)) == {(("error", "NOT_ENOUGH_REPLICAS"),)}
    assert _errors(process, "kafka_transaction_marker_failures_total") == {}
    assert process.value("txn_exporter_broker_log_skipped_lines_total", reason="unrecognized") == 0


def _commit_while_state_log_fails(
    first: KafkaBroker, second: KafkaBroker, process: ExporterProcess, tid: str, error: str
) -> None:
    producer = _producer(first, tid)
    producer.begin_transaction()
    producer.produce("plain", b"x", partition=0)
    producer.produce("plain", b"y", partition=1)
    producer.flush(30)
    before = process.value(APPEND_ERRORS, target_state="PREPARE_COMMIT", error=error) or 0
    _set_state_log_min_isr(first, "2")
    second.stop()
    outcome: list[BaseException | None] = []

    def commit() -> None:
        try:
            producer.commit_transaction(90)  # retried by the client while appends fail
            outcome.append(None)
        except BaseException as e:
            outcome.append(e)

    committer = threading.Thread(target=commit)
    committer.start()
    try:
        process.wait_for(
            lambda: (process.value(APPEND_ERRORS, target_state="PREPARE_COMMIT", error=error) or 0) > before,
            60,
            f"a failed PREPARE_COMMIT append counted as {error}",
        )
    finally:
        _set_state_log_min_isr(first, "1")
        committer.join(120)
        second.start()
    assert outcome == [None], outcome  # the transaction completes once appends succeed again


def test_failed_state_log_appends_counted_once_at_info_and_debug(cluster, exporter):
    first, second = cluster
    process = exporter(*_following_the_log(first))
    start = first.server_log.stat().st_size

    _commit_while_state_log_fails(first, second, process, "bl-append-info", "COORDINATOR_NOT_AVAILABLE")
    set_logger_level(first, STATE_MANAGER_LOGGER, "DEBUG")
    try:
        _commit_while_state_log_fails(first, second, process, "bl-append-debug", "NOT_ENOUGH_REPLICAS")
    finally:
        set_logger_level(first, STATE_MANAGER_LOGGER, None)
    process.wait_for(lambda: process.value(PENDING) == 0, 60, "both transactions completed")

    errors = _errors(process, APPEND_ERRORS)
    assert {dict(labels)["target_state"] for labels in errors} == {"PREPARE_COMMIT"}
    assert {dict(labels)["error"] for labels in errors} == {"COORDINATOR_NOT_AVAILABLE", "NOT_ENOUGH_REPLICAS"}
    # Once per failure: the broker wrote one INFO line per failed append, and one DEBUG line more
    # for those of the second transaction.
    failures = _log_lines_since(first, start, "transition failed due to")
    debug_lines = _log_lines_since(first, start, "'s new metadata ")
    assert debug_lines > 0
    assert sum(errors.values()) == failures
    assert errors[(("error", "NOT_ENOUGH_REPLICAS"), ("target_state", "PREPARE_COMMIT"))] == debug_lines


def test_final_append_in_the_retry_queue_is_not_pending(cluster, exporter):
    first, second = cluster
    process = exporter(*_following_the_log(first))
    producer = _producer(first, "bl-complete")
    producer.begin_transaction()
    producer.produce("held", b"x", partition=0)
    producer.flush(30)
    alter_topic_config(first.bootstrap_servers, "held", {"min.insync.replicas": "2"})
    second.stop()
    try:
        producer.commit_transaction(60)  # PREPARE_COMMIT written; the markers are retried
        process.wait_for(lambda: process.value(PENDING) == 1, 60, "a pending transaction")
        # Markers go through now, but the COMPLETE_COMMIT append fails and waits in the retry queue.
        _set_state_log_min_isr(first, "2")
        alter_topic_config(first.bootstrap_servers, "held", {"min.insync.replicas": "1"})
        process.wait_for(lambda: (process.value(COMPLETE_RETRIES) or 0) > 0, 60, "a final append retry")
        assert process.value(PENDING) == 0  # KIP-1344: the retry queue is not pending markers
        assert process.value(OLDEST) > 0  # still without its COMPLETE_COMMIT record
        assert process.value(APPEND_ERRORS, target_state="COMPLETE_COMMIT", error="COORDINATOR_NOT_AVAILABLE") >= 1
        assert not process.value(RECORDS, target_state="COMPLETE_COMMIT")
    finally:
        _set_state_log_min_isr(first, "1")
        second.start()
    # The retry queue is drained when the coordinator's marker sender wakes up: more markers do that.
    commit_transactions(first.bootstrap_servers, "bl-wake", "plain", 1)
    process.wait_for(lambda: process.value(RECORDS, target_state="COMPLETE_COMMIT") == 2, 60, "the final append")
    assert process.value(PENDING) == 0
    assert process.value(OLDEST) == 0


def test_copytruncate_of_the_real_broker_log_loses_and_repeats_nothing(cluster, exporter):
    """copytruncate in the middle of a burst of retry lines: log4j keeps writing (O_APPEND) at the
    start of the truncated file; what was written after the exporter's last read is in the copy.
    (Rotation by rename is tested with our own writer in tests/sources: log4j's FileAppender never
    reopens its file, so a rename only moves its output away from the path.)"""
    first, second = cluster
    log = first.server_log
    start = log.stat().st_size  # no retry lines are written until the hold below
    process = exporter(*_following_the_log(first))
    done = threading.Event()
    holder = threading.Thread(target=_hold_markers_for, args=(first, second, done))
    holder.start()
    try:
        process.wait_for(lambda: (process.value(RETRIES, error="NOT_ENOUGH_REPLICAS") or 0) > 100, 60, "a burst")
        # copytruncate, then back: copy, truncate, the copy stays beside it as server.log.1
        copy = log.with_name(log.name + ".1")
        with log.open("rb") as source, copy.open("wb") as target:
            target.write(source.read())
        os.truncate(log, 0)
        time.sleep(1)
    finally:
        done.set()
        holder.join(120)
    process.wait_for(lambda: process.value(PENDING) == 0, 60, "markers written after the release")
    process.wait_for(lambda: process.value("txn_exporter_broker_log_rotations_total") == 1, 30, "one rotation")
    written = _count(copy, "has failed with error", start) + _count(log, "has failed with error", 0)
    process.wait_for(
        lambda: process.value(RETRIES, error="NOT_ENOUGH_REPLICAS") == written,
        30,
        f"{written} retries, as many as lines",
    )


def _count(path, text: str, offset: int) -> int:
    with path.open("rb") as f:
        f.seek(offset)
        return sum(text.encode() in line for line in f)


def _hold_markers_for(first: KafkaBroker, second: KafkaBroker, done: threading.Event) -> None:
    with held_commit(first.bootstrap_servers, second, "held", "bl-rotate"):
        done.wait(120)

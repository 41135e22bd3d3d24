"""KAFKA-20090 on real brokers: a TV2 transaction that times out at the top of the producer epoch
stays ONGOING for good on 4.2.2, and the exporter names the bug; on 4.3.1, which has the fix, the
coordinator gives the producer a new producer id and nothing is left to name.

One broker of each version (transaction.version 2), the exporter beside it reading its log
(txn_workshop.harness.epoch_top): the id's epoch driven to 32765 with InitProducerId, then Kafka's own
Java client of that version opens a transaction at 32766 and lets it time out (the coordinator fences
it to 32767 to abort it), aborts (a retry of the coordinator's abort, answered with the epoch it moved
to) and opens the next one, which it leaves open. What happened is the coordinator's word: its
describe, its log, and the exporter's count of its timeout aborts from the records.
"""

from __future__ import annotations

import json

import pytest

from tests.integration.exporter_process import ExporterProcess
from txn_workshop.harness.admin import create_internal_topics, create_topic
from txn_workshop.harness.epoch_top import drive_epoch, timed_out_at_the_top

TID = "at-the-top"
TIMEOUT_MS = 2_000
TOP = 32_767
BUG = "KAFKA-20090"
FENCE_FAILED = "Cannot fence producer with epoch equal to Short.MaxValue since this would overflow"
TIMEOUTS = "kafka_transaction_timeouts_total"


def _row(process: ExporterProcess) -> dict | None:
    status, body = process.get("/transactions")
    assert status == 200, body
    return next((r for r in json.loads(body)["transactions"] if r["transactional_id"] == TID), None)


def _matches(row: dict | None) -> list[str]:
    bugs = ((row or {}).get("diagnosis") or {}).get("known_bugs") or {}
    return [m["jira"] for m in bugs.get("matches", [])]


def _describe(broker) -> dict[str, str]:
    header, rows = broker.transactions_table("describe", "--transactional-id", TID)
    return dict(zip(header, rows[0]))


@pytest.mark.parametrize(("version", "affected"), [("4.2.2", True), ("4.3.1", False)])
def test_a_transaction_timed_out_at_the_top_of_the_epoch(own_broker, tmp_path, version, affected):
    broker = own_broker(version=version, transaction_version=2, transaction_state_partitions=4)
    create_topic(broker.bootstrap_servers, "orders", partitions=1)
    create_internal_topics(broker.bootstrap_servers)  # so the exporter follows __transaction_state from the start
    process = ExporterProcess(
        broker.bootstrap_servers,
        "--broker-log",
        str(broker.server_log),
        "--late-transaction-padding-seconds",
        "1",
        log=tmp_path / "exporter.log",
    )
    try:
        process.wait_ready(120)
        process.wait_for(
            lambda: process.value("txn_exporter_partitions_followed", phase="live") == 4, 120, "every partition live"
        )
        # The broker's version from its log's startup line: which known bugs it has.
        process.wait_for(
            lambda: process.value("txn_exporter_broker_info", version=version, source="log") == 1, 60, "version"
        )
        assert process.value("txn_exporter_broker_affected_by_known_bug", bug=BUG) == affected

        first_id, _ = drive_epoch(broker, TID, TOP - 2)
        steps = timed_out_at_the_top(broker, "orders", TID, TIMEOUT_MS)
        assert [(s.name, s.state) for s in steps] == [
            ("init", "Empty"),
            ("timed-out", "CompleteAbort"),
            ("aborted", "CompleteAbort"),
            ("open", "Ongoing"),
        ]
        assert steps[0].epoch == TOP - 1
        if affected:
            # Fenced to the top and aborted with no new producer id: the next transaction runs at the top.
            assert {(s.producer_id, s.epoch) for s in steps[1:]} == {(first_id, TOP)}
        else:
            # The abort at the exhausted epoch rotated the producer id (the fix): the next runs at epoch 0.
            assert steps[1].producer_id != first_id and steps[3].epoch == 0

        if affected:
            # Its timeout cannot be acted on: the coordinator keeps it ONGOING and logs why, every check.
            process.wait_for(lambda: _matches(_row(process)) == [BUG], 60, f"the late row matching {BUG}")
            row = _row(process)
            assert (row["state"], row["producer_epoch"], row["transaction_version"], row["late"]) == (
                "ONGOING",
                TOP,
                2,
                True,
            )
            (match,) = row["diagnosis"]["known_bugs"]["matches"]
            assert match["certain"] and (match["version"], match["version_source"]) == (version, "log")
            assert match["line"].startswith(f"Matches {BUG} (Kafka {version}; fixed in 4.3.0): ")
            described = _describe(broker)
            assert (described["TransactionState"], described["ProducerEpoch"]) == ("Ongoing", str(TOP))
            assert FENCE_FAILED in broker.server_log.read_text()
            assert process.value(TIMEOUTS) == 1  # the first transaction's abort only
            process.wait_for(
                lambda: process.value("kafka_transactions_matching_known_bug", bug=BUG) == 1, 90, "the count"
            )
        else:
            # Both timed out and were aborted: the second by its new producer id, at its own timeout.
            process.wait_for(lambda: process.value(TIMEOUTS) == 2, 60, "both timeout aborts")
            assert _describe(broker)["TransactionState"] == "CompleteAbort"
            assert _row(process) is None
            assert FENCE_FAILED not in broker.server_log.read_text()
            assert process.value("kafka_transactions_matching_known_bug", bug=BUG) == 0

        # The epoch's headroom: the top was read under TV2 either way; only the affected broker is left
        # with an id there (the fixed one rotated it to epoch 0, then 1 with its timeout abort).
        assert process.value("kafka_transaction_producer_epoch_max", transaction_version="2") == TOP
        near = process.value("kafka_transactional_ids_near_epoch_exhaustion", transaction_version="2")
        assert near == (1 if affected else 0)
    finally:
        process.stop()

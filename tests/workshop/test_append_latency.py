"""P4's matcher (txn_workshop/append_latency.py) on lines as the coordinator and the exporter write
them: two transitions of one id that agree on everything the coordinator logs of them, as a producer
ending one transaction and preparing the next within one millisecond makes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from txn_workshop import append_latency

_META = (
    "TxnTransitMetadata[producerId=10, prevProducerId=10, nextProducerId=-1, producerEpoch=0, lastProducerEpoch=-1, "
    "txnTimeoutMs=60000, txnState=PREPARE_COMMIT, topicPartitions=[load-2], txnStartTimestamp={start}, "
    "txnLastUpdateTimestamp={last}, clientTransactionVersion=TV_0]"
)


def _succeeded(time: str, start: int, last: int) -> str:
    return (
        f"[2026-11-26 01:55:58,{time}] DEBUG [Transaction State Manager 1]: Updating lat-1-2's transaction state "
        f"to {_META.format(start=start, last=last)} with coordinator epoch 0 for lat-1-2 succeeded "
        "(kafka.coordinator.transaction.TransactionStateManager)"
    )


def _received(offset: int, last: int, received_ms: int) -> str:
    fields = {
        "partition": 44,
        "offset": offset,
        "transactional_id": "lat-1-2",
        "state": "PREPARE_COMMIT",
        "producer_id": 10,
        "producer_epoch": 0,
        "last_update_ms": last,
        "timestamp_ms": last,
        "received_ms": received_ms,
    }
    return f"2026-11-26 01:55:58,200 DEBUG exporter.sources.topic_tail.records: live record {json.dumps(fields)}"


def test_transitions_alike_in_all_the_logs_name_pair_up_in_order(tmp_path: Path) -> None:
    coordinator = tmp_path / "server.log"
    coordinator.write_text(f"{_succeeded('111', 110, 111)}\n{_succeeded('112', 111, 111)}\n")
    exporter = tmp_path / "exporter.log"
    exporter.write_text(f"{_received(14158, 111, 1111)}\n{_received(14160, 111, 1113)}\n")

    succeeded, _ = append_latency.coordinator_lines([coordinator], {"lat-1-2"})
    observed = append_latency.observed_records(exporter, {"lat-1-2"})

    assert set(succeeded) == set(observed) and len(succeeded) == 2
    matched = sorted(append_latency.match(succeeded, observed), key=lambda m: m.transition)
    first_ms = append_latency._epoch_ms("2026-11-26 01:55:58,111")
    assert [(m.succeeded_ms - first_ms, m.received_ms) for m in matched] == [(0, 1111), (1, 1113)]


def test_a_record_received_twice_stops_the_matcher(tmp_path: Path) -> None:
    exporter = tmp_path / "exporter.log"
    exporter.write_text(f"{_received(14158, 111, 1111)}\n{_received(14158, 111, 1112)}\n")
    with pytest.raises(AssertionError, match="one record received twice"):
        append_latency.observed_records(exporter, {"lat-1-2"})

"""Synthetic source events for model and metrics tests, built through the real codec."""

from __future__ import annotations

from exporter.codec import TransactionLogValue, TransactionState, decode_record, encode_key, encode_value
from exporter.contracts.events import TransactionLogRecords

S = TransactionState


def log_event(
    tid: str,
    state: TransactionState | None,
    *,
    partition: int = 0,
    offset: int = 0,
    timestamp_ms: int = 1_000_000,
    received_ms: int | None = None,
    replay: bool = False,
    version: int = 1,
) -> TransactionLogRecords:
    """A record written at `timestamp_ms` and received at `received_ms` (default: 5 ms later);
    `state=None` is a tombstone."""
    value = None
    if state is not None:
        value = encode_value(
            TransactionLogValue(
                version, 4000, 2, 60_000, state,
                {"orders": [0, 1]} if state in (S.ONGOING, S.PREPARE_COMMIT, S.PREPARE_ABORT) else {},
                timestamp_ms, timestamp_ms - 50,
            )
        )  # fmt: skip
    record = decode_record(encode_key(tid), value, offset, timestamp_ms)
    return TransactionLogRecords(
        partition, [record], timestamp_ms + 5 if received_ms is None else received_ms, replay
    )

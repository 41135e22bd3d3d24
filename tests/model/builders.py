"""Synthetic source events for model and metrics tests, built through the real codec."""

from __future__ import annotations

from exporter.codec import TransactionLogValue, TransactionState, decode_record, encode_key, encode_value
from exporter.contracts.events import TransactionLogRecords
from exporter.model import CoordinatorModel, InFlightTransaction, ModelSnapshot

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
                version=version,
                producer_id=4000,
                producer_epoch=2,
                transaction_timeout_ms=60_000,
                state=state,
                partitions={"orders": [0, 1]} if state in (S.ONGOING, S.PREPARE_COMMIT, S.PREPARE_ABORT) else {},
                last_update_timestamp_ms=timestamp_ms,
                start_timestamp_ms=timestamp_ms - 50,
            )
        )
    record = decode_record(encode_key(tid), value, offset, timestamp_ms)
    return TransactionLogRecords(partition, [record], timestamp_ms + 5 if received_ms is None else received_ms, replay)


def snapshot(model: CoordinatorModel, now_ms: int = 0, late_padding_ms: int = 0) -> ModelSnapshot:
    """The model's counters and gauges, through its own query."""
    return model.snapshot(now_ms, late_padding_ms, lambda: None)[0]


def pending_markers(model: CoordinatorModel) -> tuple[int, int | None]:
    """(pending transactions, the oldest PREPARE_* timestamp in ms or None)."""
    taken = snapshot(model)
    return taken.pending_markers, taken.oldest_prepare_ms


def in_flight(model: CoordinatorModel, *states: TransactionState) -> dict[str, InFlightTransaction]:
    """Every in-flight transaction of the live partitions (in `states`, else all), by id."""
    selection = model.in_flight_transactions(states or None, 10**9, 0, 0)
    return {txn.transactional_id: txn for txn in selection.transactions}

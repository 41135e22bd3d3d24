"""The model's gauges over its partitions, computed at scrape time under the model's lock
(CoordinatorModel.snapshot): only live partitions count (a replaying or draining one's partial
state is not reported), each in O(the transactions in the states it reads)."""

from __future__ import annotations

from collections.abc import Iterable

from exporter.codec.states import PREPARE_STATES
from exporter.contracts.lifecycle import is_stuck_prepare
from exporter.model.partition import TRACKED_STATES, PartitionState


def transactions_by_state(partitions: Iterable[PartitionState]) -> tuple[int, ...]:
    """Tracked transactional ids by current state id (EMPTY..COMPLETE_ABORT), live partitions."""
    totals = [0] * TRACKED_STATES
    for part in partitions:
        if part.live:
            counts = part.state_counts
            for state in range(TRACKED_STATES):
                totals[state] += counts[state]
    return tuple(totals)


def late_transactions(partitions: Iterable[PartitionState], now_ms: int, padding_ms: int) -> int:
    """ONGOING transactions past their own timeout plus `padding_ms` at `now_ms` (KIP-664's
    lateness rule, with each transaction's timeout instead of transaction.max.timeout.ms), over
    live partitions. O(ongoing transactions)."""
    cutoff = now_ms - padding_ms
    late = 0
    for part in partitions:
        if part.live and part.ongoing:
            late += sum(1 for deadline in part.ongoing.values() if deadline < cutoff)
    return late


def stuck_prepares(partitions: Iterable[PartitionState], now_ms: int, padding_ms: int) -> int:
    """PREPARE_* transactions in that state longer than their own timeout plus `padding_ms`
    (exporter.contracts.lifecycle.is_stuck_prepare), over live partitions. O(pending transactions)."""
    stuck = 0
    for part in partitions:
        if part.live and part.pending:
            for state in PREPARE_STATES:
                for entry in part.inflight[state].values():
                    value = entry[4].value
                    if value is not None and is_stuck_prepare(
                        entry[0], value.transaction_timeout_ms, now_ms, padding_ms
                    ):
                        stuck += 1
    return stuck


def pending_markers(partitions: Iterable[PartitionState]) -> tuple[int, int | None]:
    """(transactions whose last state is PREPARE_* and whose final append is not in the retry
    queue, oldest PREPARE_* timestamp in ms or None, retry queue included), over live partitions.
    O(pending transactions): only those in flight are scanned."""
    count = 0
    oldest: int | None = None
    for part in partitions:
        if part.live and part.pending:
            count += len(part.pending) - len(part.retrying)
            candidate = part.oldest_prepare_timestamp_ms()
            if oldest is None or (candidate is not None and candidate < oldest):
                oldest = candidate
    return count, oldest

"""The broker log's errors noted on the transactions and partitions they are about, for the
transactions view: a marker error on its PREPARE_* transaction, per data partition; a failed append
on the `__transaction_state` partition holding its id. Rare events, so a scan of the partitions beats
knowing which holds the id. Copy on write: readers may hold the previous entry."""

from __future__ import annotations

from collections.abc import Iterable

from exporter.codec.states import PREPARE_STATES
from exporter.contracts.events import MarkerWriteFailed, MarkerWriteRetried, TransactionLogAppendFailed
from exporter.model.partition import PartitionState


def note_marker_error(partitions: Iterable[PartitionState], event: MarkerWriteRetried | MarkerWriteFailed) -> None:
    """Notes the error on its PREPARE_* transaction's data partition (copy on write: readers may
    hold the previous entry)."""
    tid, partition = event.transactional_id, event.partition
    if tid is None or partition is None:
        return
    for part in partitions:  # a scan beats knowing the partition count
        for state in PREPARE_STATES:
            prepared = part.inflight[state]
            entry = prepared.get(tid)
            if entry is not None:
                errors: dict[tuple[str, str], tuple[int, int]] = dict(entry[5] or {})
                key = (partition, event.error)
                previous = errors.get(key)
                errors[key] = (1 if previous is None else previous[0] + 1, event.seen_ms)
                prepared[tid] = (*entry[:5], errors)
                return


def note_append_error(partitions: Iterable[PartitionState], event: TransactionLogAppendFailed) -> None:
    """Notes a failed append on the `__transaction_state` partition holding its transactional id
    (copy on write); an id the model does not track yet (a first InitProducerId) is only counted."""
    tid = event.transactional_id
    if tid is None:
        return
    for part in partitions:  # rare: a scan beats knowing the partition count
        if tid in part.states:
            errors = dict(part.append_errors)
            key = (event.target_state, event.error)
            previous = errors.get(key)
            errors[key] = (1 if previous is None else previous[0] + 1, event.seen_ms)
            part.append_errors = errors
            return

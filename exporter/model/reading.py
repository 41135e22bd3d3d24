"""What the model answers its readers (the metric sinks, the transactions view): plain values.

The model copies what a reader asks for under its own lock and hands it over as the immutable rows
below; no reader sees the lock, the packed per-id state or a record's bytes. The in-flight query
holds the lock only to copy references to the model's in-flight tuples (which are replaced, never
changed); choosing the oldest and building rows (decoding partitions, for the rows shown only) run
after it is released, so a large view never stalls the source (bench/transactions_view.py).
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from exporter.codec import PARTITIONS_SKIPPED, DecodeError, TransactionState, decode_value
from exporter.contracts.events import BrokerLogStats, HangingScanCompleted
from exporter.contracts.kafka_versions import BrokerVersion
from exporter.model.partition import STATE_MASK, InFlight, InFlightEntry


@dataclass(frozen=True, slots=True)
class PartitionRow:
    """One followed `__transaction_state` partition."""

    partition: int
    live: bool  # False while it is replayed
    consumer_lag: int | None  # records behind the high watermark; None until the source reports one
    last_record_timestamp_ms: int | None


@dataclass(frozen=True, slots=True)
class AppendClockRow:
    """Which clock times the appends, and what each timed (exporter.model.append_clock)."""

    clock: str  # in force: "coordinator" or "fetch"
    coordinator_timed: tuple[int, ...]  # by target state id, EMPTY..COMPLETE_ABORT
    untimed: tuple[int, ...]  # live records whose line never came, by target state id
    unmatched: dict[tuple[str, str], int]  # (record | line, reason) -> count
    negative: int  # coordinator-clock latencies below 0, recorded as 0


@dataclass(frozen=True, slots=True)
class CoordinatorLoadsRow:
    """The coordinator's loads of its `__transaction_state` partitions (exporter.model.coordinator_loads)."""

    loading: int  # partitions loading now
    oldest_load_started_ms: int | None  # when the oldest load still running was seen starting
    duration_buckets: tuple[int, ...]  # finished loads, cumulative, by LOAD_BUCKETS_MS bound, then all
    duration_sum_ms: int
    reloads_without_leader_change: int


@dataclass(frozen=True, slots=True)
class ModelSnapshot:
    """The model's counters and gauges at one instant (see exporter.model.coordinator's rules)."""

    source_up: bool
    transactions_by_state: tuple[int, ...]  # tracked ids by state id, EMPTY..COMPLETE_ABORT
    late_transactions: int
    stuck_prepares: int  # PREPARE_* longer than their own timeout plus the padding
    pending_markers: int
    oldest_prepare_ms: int | None
    tombstones: int
    decode_errors: dict[str, int]
    unknown_tagged_fields: dict[str, int]  # records carrying a tagged field the codec does not name, by tag
    unwritten_states: dict[TransactionState, int]
    append_errors: dict[tuple[int, str], int]  # (target state id, error) -> failed appends
    marker_retries: dict[str, int]
    marker_failures: dict[str, int]
    complete_append_retries: int
    broker_log: BrokerLogStats
    timeouts: int
    producer_id_rotations: int
    partitions_taken_over: int  # takeovers replayed (PartitionReplayed.takeover_replay_ms)
    takeover_replay_seconds: float  # their replays' time, summed
    partition_drains: dict[str, int]  # drains ended, by how (read_to_end, cut)
    hanging_scan: HangingScanCompleted | None  # the last completed scan
    hanging_scan_errors: int
    broker_version: BrokerVersion | None  # the broker's own, as learned (None: not yet)
    known_bug_matches: dict[str, int]  # in-flight and hanging transactions matching each known bug, by JIRA id
    partitions: tuple[PartitionRow, ...]  # in partition order
    append_clock: AppendClockRow
    coordinator_loads: CoordinatorLoadsRow
    # Tracked ids whose producer epoch is within EPOCH_HEADROOM of the top (32767), and the highest
    # producer epoch of the records read, by the records' ClientTransactionVersion ("0", "1", "2").
    ids_near_epoch_exhaustion: dict[str, int]
    highest_producer_epoch: dict[str, int]


class TrackedId(NamedTuple):
    """A transactional id's last written state as the model holds it."""

    state: TransactionState
    producer_id: int
    producer_epoch: int  # the unsigned 16 bits written


@dataclass(frozen=True, slots=True)
class MarkerErrorRow:
    """An error a data partition returned to a PREPARE_* transaction's markers (broker log): how
    often, and when last read."""

    partition: str  # topic-N
    error: str
    count: int
    last_seen_ms: int


@dataclass(frozen=True, slots=True)
class AppendErrorRow:
    """Failed `__transaction_state` appends on a transaction's coordinator partition (broker log),
    of any transactional id there, since the transaction entered its state."""

    target_state: TransactionState
    error: str
    count: int
    last_seen_ms: int


@dataclass(frozen=True, slots=True)
class InFlightTransaction:
    """One transaction in ONGOING or PREPARE_*, as its last record and the broker log tell it."""

    transactional_id: str
    state: TransactionState
    producer_id: int
    producer_epoch: int
    # When it entered its state: the transaction's start for ONGOING, its record's time for PREPARE_*.
    state_entered_ms: int
    start_ms: int
    timeout_ms: int
    coordinator_partition: int  # of __transaction_state
    partitions: tuple[str, ...]  # topic-N, as the record lists them
    partitions_error: str | None  # why the partitions could not be decoded (then none are listed)
    marker_errors: tuple[MarkerErrorRow, ...]  # by partition, the most recent error first
    append_errors: tuple[AppendErrorRow, ...] = ()  # the most recent first
    # Its record's ClientTransactionVersion: 2 for a KIP-890 (TV2) client; 0 where the record carries
    # none (a coordinator before 4.0, or a TV0 client).
    transaction_version: int = 0


@dataclass(frozen=True, slots=True)
class InFlightSelection:
    transactions: list[InFlightTransaction]  # the oldest first, at most the limit asked for
    matching: int  # how many are in the states asked for and old enough


AppendErrors = dict[tuple[int, str], tuple[int, int]]  # PartitionState.append_errors


def select_in_flight(
    entries: Sequence[InFlightEntry],
    limit: int,
    min_age_ms: int,
    now_ms: int,
    append_errors: Mapping[int, AppendErrors] | None = None,
) -> InFlightSelection:
    """The oldest `limit` of `entries` (InFlight tuples) in their state for at least `min_age_ms`,
    with their coordinator partition's append errors (`append_errors`, by partition)."""
    # The tuples order by (entered_ms, transactional id, partition), unique, so no key function.
    oldest = heapq.nsmallest(limit, entries)
    matching = len(entries)
    if min_age_ms:
        # Old enough is a prefix of that order, so the oldest `limit` of them are among the oldest of
        # all. A tuple is old enough when it sorts before (cutoff + 1,): compared in C, no Python per entry.
        cutoff: tuple[Any, ...] = (now_ms - min_age_ms + 1,)
        old_enough = cutoff.__gt__
        oldest = [e for e in oldest if old_enough(e)]
        matching = sum(map(old_enough, entries))
    errors = append_errors or {}
    return InFlightSelection([in_flight_row(InFlight._make(e), errors.get(e[2])) for e in oldest], matching)


def in_flight_row(entry: InFlight, append_errors: AppendErrors | None = None) -> InFlightTransaction:
    value = entry.record.value
    if value is None:  # never: a tombstone ends a transaction
        raise ValueError(f"in-flight entry of {entry.transactional_id!r} without a value")
    partitions = value.partitions
    error = None
    if partitions is PARTITIONS_SKIPPED:  # decoded without them on the record path: now
        raw = entry.record.raw_value
        try:
            partitions = decode_value(raw).partitions if raw is not None else None
        except DecodeError as e:
            partitions, error = None, str(e)
    listed = partitions if isinstance(partitions, dict) else {}
    return InFlightTransaction(
        transactional_id=entry.transactional_id,
        state=TransactionState(entry.packed & STATE_MASK),
        producer_id=value.producer_id,
        producer_epoch=value.producer_epoch,
        state_entered_ms=entry.entered_ms,
        start_ms=value.start_timestamp_ms,
        timeout_ms=value.transaction_timeout_ms,
        coordinator_partition=entry.partition,
        partitions=tuple(f"{topic}-{p}" for topic, ids in listed.items() for p in ids),
        partitions_error=error,
        marker_errors=tuple(
            MarkerErrorRow(p, e, count, seen)
            for (p, e), (count, seen) in sorted((entry.marker_errors or {}).items(), key=lambda i: (i[0][0], -i[1][1]))
        ),
        append_errors=tuple(
            AppendErrorRow(TransactionState(state), e, count, seen)
            for (state, e), (count, seen) in sorted((append_errors or {}).items(), key=lambda i: -i[1][1])
            if seen >= entry.entered_ms
        ),
        transaction_version=value.client_transaction_version,
    )

"""The state the model keeps for one followed `__transaction_state` partition."""

from __future__ import annotations

from typing import NamedTuple

from exporter.codec.record import TransactionLogRecord
from exporter.codec.states import TransactionState

# Per-state tallies are lists indexed by state id; only ids the model stores are counted.
TRACKED_STATES = 6  # EMPTY .. COMPLETE_ABORT
# A producer epoch is an int16: 32767 is the last, and within this of it an id is near exhaustion
# (a TV2 producer spends an epoch a transaction: 1,000 transactions from its producer id's rotation).
MAX_PRODUCER_EPOCH = 32767
EPOCH_HEADROOM = 1000
NEAR_EXHAUSTION_EPOCH = MAX_PRODUCER_EPOCH - EPOCH_HEADROOM
# The "state" of an id without a record (or whose record is a tombstone). It takes DEAD's id, which
# is never stored, so tallies can index it unconditionally instead of branching on None.
ABSENT = int(TransactionState.DEAD)


class PartitionState:
    """Per-partition coordinator state, kept compact for ~1M transactional ids.

    `states` maps a transactional id to its last written state, producer id and epoch packed in one
    int: `state | (producer_epoch & 0xFFFF) << 3 | producer_id << 19` (STATE_MASK and the shifts
    below), so a tracked id costs one dict entry plus the key string and no per-id object, and the
    previous producer id and epoch are known when the next record arrives (producer-id rotations,
    KIP-588 timeout aborts). CoordinatorModel packs it on the record path; `unpack` reads it back.

    `pending` holds only the ids whose last state is PREPARE_COMMIT/PREPARE_ABORT (the few in flight),
    as `prepare_timestamp_ms << 1 | counted`, so the oldest pending prepare is a min() over them
    and a marker completion can tell whether its prepare was counted, here or by the exporter whose
    broker appended it (appended since `counting_since_ms`), rather than replayed history.

    `retrying` holds the pending ids whose final COMPLETE_* append is in the coordinator's retry
    queue (from the broker log): always a subset of `pending`, left when the id leaves it.

    `ongoing` holds only the ids whose last state is ONGOING, as their deadline
    `start_timestamp_ms + transaction_timeout_ms`, for the late-transactions gauge.

    `inflight` holds the ids in ONGOING or PREPARE_* (the only ones whose data partitions are kept),
    as InFlight tuples, for the transactions view: one dict per state, indexed by state id (empty for
    the others), so the view's usual question (which PREPARE_COMMITs are old?) reads only that
    state's tuples. A tuple is replaced, never changed, so a reader can copy references under the
    model's lock and read them after releasing it.

    `near_exhaustion` holds the ids whose last producer epoch is within EPOCH_HEADROOM of the top
    (the few near it), as their records' ClientTransactionVersion; `epoch_highs` the highest producer
    epoch of the partition's records read, by ClientTransactionVersion (a high-water mark: a producer
    id rotated at the top restarts at 0, and the mark stays).

    `append_errors` holds the failed `__transaction_state` appends the broker log showed for this
    partition, as {(target state id, error): (count, last seen ms)}; replaced, never changed, like
    the tuples (a reader takes the reference under the lock).
    """

    __slots__ = (
        "append_errors",
        "counting_since_ms",
        "draining",
        "epoch_highs",
        "here",
        "high_watermark",
        "inflight",
        "last_record",
        "live",
        "near_exhaustion",
        "next_offset",
        "ongoing",
        "pending",
        "retrying",
        "state_counts",
        "states",
    )

    def __init__(self, live: bool, here: bool = True, counting_since_ms: int | None = None) -> None:
        self.states: dict[str, int] = {}
        self.pending: dict[str, int] = {}
        self.retrying: set[str] = set()
        self.ongoing: dict[str, int] = {}
        # InFlight fields as a plain tuple: cheaper to build. One dict per state id (only the
        # in-flight states' are ever filled), so a state id indexes it without a branch.
        self.inflight: list[dict[str, InFlightEntry]] = [{} for _ in range(ABSENT + 1)]
        # By state id; the extra ABSENT slot is scratch (ids coming and going), never read.
        self.state_counts: list[int] = [0] * (ABSENT + 1)
        # False while replaying up to the high watermark: the partial state is not reported yet.
        self.live = live
        # Led elsewhere now and read to the end of this broker's epochs (PartitionDraining): counted,
        # its records timed by this broker's lines, but reported by the new leader's exporter.
        self.draining = False
        # A prepare whose timestamp is at least this pairs with its completion (PartitionAssigned).
        self.counting_since_ms = counting_since_ms
        # The last decoded record (one reference is cheaper on the hot path than copying fields).
        self.last_record: TransactionLogRecord | None = None
        # Next offset to read as known from positions and undecodable records; decoded records
        # advance it through `last_record`.
        self.next_offset = 0
        self.high_watermark: int | None = None
        self.append_errors: dict[tuple[int, str], tuple[int, int]] = {}
        self.near_exhaustion: dict[str, int] = {}
        self.epoch_highs: dict[int, int] = {}
        # Whether the coordinator whose log is read (--broker-log) leads it: only then do its records
        # wait for that log's `succeeded` lines (exporter.model.append_clock).
        self.here = here

    @property
    def last_record_timestamp_ms(self) -> int | None:
        return None if self.last_record is None else self.last_record.timestamp_ms

    def consumer_lag(self) -> int | None:
        """Records between the consumer and the high watermark; None until the source reports one."""
        if self.high_watermark is None:
            return None
        position = self.next_offset
        if self.last_record is not None:
            position = max(position, self.last_record.offset + 1)
        return max(0, self.high_watermark - position)

    def oldest_prepare_timestamp_ms(self) -> int | None:
        if not self.pending:
            return None
        return min(self.pending.values()) >> 1


# An in-flight transaction as the model keeps it: InFlight's fields in a plain tuple.
InFlightEntry = tuple[int, str, int, int, TransactionLogRecord, "dict[tuple[str, str], tuple[int, int]] | None"]


class InFlight(NamedTuple):
    """One in-flight transaction as `PartitionState.inflight` holds it (a plain tuple there; this
    names its fields). The first three order the tuples: by state entry, then uniquely."""

    # When it entered its state: the transaction's start for ONGOING, its record's time for PREPARE_*.
    entered_ms: int
    transactional_id: str
    partition: int  # of __transaction_state
    packed: int  # state, producer id and epoch (see unpack)
    # Its last record: timeout, start, partitions (or, decoded without them, `raw_value` to decode).
    record: TransactionLogRecord
    # None, or for PREPARE_*, from the broker log: {("topic-N", error): (count, last seen ms)}, every
    # error a data partition answered (a leader that moved, then an ISR too small: both explained).
    marker_errors: dict[tuple[str, str], tuple[int, int]] | None


# `states` packing: the low 3 bits are the state id (ABSENT = 6 fits), then the epoch, then the
# producer id (arbitrary precision, so -1 round-trips: packed >> PRODUCER_ID_SHIFT == -1).
STATE_MASK = 7
EPOCH_SHIFT = 3
EPOCH_MASK = 0xFFFF
PRODUCER_ID_SHIFT = 19


def unpack(packed: int) -> tuple[int, int, int]:
    """(state id, producer id, producer epoch as the unsigned 16 bits written)."""
    return packed & STATE_MASK, packed >> PRODUCER_ID_SHIFT, (packed >> EPOCH_SHIFT) & EPOCH_MASK


# Which state a tracked id is in when a record carries a state brokers never write: DEAD means
# the id is gone (brokers write a tombstone instead), PREPARE_EPOCH_FENCE is written as PREPARE_ABORT.
EFFECTIVE_STATE_OF_UNWRITTEN: dict[TransactionState, int] = {
    TransactionState.DEAD: ABSENT,
    TransactionState.PREPARE_EPOCH_FENCE: TransactionState.PREPARE_ABORT,
}

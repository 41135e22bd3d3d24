"""Transaction lifecycles from the `__transaction_state` records of one transactional id.

Pure Python, no I/O, no Spark, no pyarrow: the Spark pipeline (exporter.pipeline) runs it per
transactional id inside its Python workers, and the live exporter can feed it record by record.

A *transaction* of a transactional id is the run of records from the first ONGOING after a
non-open state (EMPTY, COMPLETE_*, a tombstone, or nothing yet) to the COMPLETE_COMMIT or
COMPLETE_ABORT that ends it:
- begin: the ONGOING's TransactionStartTimestampMs (the coordinator's clock when the first
  partition was added), or the first record's timestamp if the value carries none (-1);
- prepare: the timestamp of the PREPARE_COMMIT / PREPARE_ABORT record (EndTxn, or the coordinator
  aborting on its own); complete: that of the COMPLETE_* record (all markers written);
- partitions: every partition the transaction's records named, as "topic-N", sorted;
- producer id, epoch, timeout, client transaction version: from the ONGOING (the client's); a
  Kafka 4.1+ coordinator may write PREPARE_ABORT straight after EMPTY or COMPLETE_* (an abort with
  nothing open): that is a transaction of its own with begin = its prepare and no partitions.
A transaction whose COMPLETE_* is not (yet) in the data is *open*: result None, and its `state` is
the last one written (ONGOING, PREPARE_COMMIT or PREPARE_ABORT).

Timed out (KIP-588), the rule. The coordinator aborts a transaction on its own in two cases, both
by fencing the producer epoch: a transaction open longer than its TransactionTimeoutMs (the
coordinator checks every `transaction.abort.timed.out.transaction.cleanup.interval.ms`), and a new
producer instance calling InitProducerId while the old one's transaction is open. Either way it
writes PREPARE_ABORT right after the ONGOING, with the same producer id and the producer epoch
bumped by exactly one (PREPARE_EPOCH_FENCE is never written: it becomes that PREPARE_ABORT).
So a transaction is **timed out** iff its PREPARE_ABORT
  1. directly follows an ONGOING of the same producer id (a transaction was open), and
  2. carries that ONGOING's producer epoch + 1, and
  3. its timestamp is later than the ONGOING's start timestamp + TransactionTimeoutMs (the
     coordinator aborts when start + timeout < now; a fence by InitProducerId before the deadline
     is `abort_cause = "fenced"`, not a timeout).
The live exporter's model applies the same rule through is_timeout_abort below.
Client aborts do not count: a client before transaction version 2 (TV0/TV1: the ONGOING's
ClientTransactionVersion < 2) ends its transactions with the epoch it began them with, so rule 2
fails. A TV2 client (KIP-890) bumps the epoch on every EndTxn, commit or abort, so rule 2 holds
for its own aborts and rule 3 alone separates them: a TV2 client abort sent after its deadline but
before the coordinator's next timeout check counts as timed out (the one ambiguity the log leaves).
Measured on real brokers (3.9.2; 4.4.0 with transaction.version 0 and 2; librdkafka clients): client
aborts keep the epoch, timeouts bump it by one and land after start + timeout (the coordinator's
PREPARE_ABORT of a timeout also carries ClientTransactionVersion = the cluster's, 2 on TV2).

`abort_cause` of an aborted transaction: "timeout", "fenced" (rules 1-2 hold, 3 does not), or
"client" (anything else).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from exporter.codec.states import TransactionState

# TransactionState ids as plain ints: compared per record in the pipeline's workers.
EMPTY, ONGOING, PREPARE_COMMIT, PREPARE_ABORT, COMPLETE_COMMIT, COMPLETE_ABORT, DEAD, PREPARE_EPOCH_FENCE = (
    int(state) for state in TransactionState
)
TOMBSTONE = -1
STATE_NAMES = tuple(state.name for state in TransactionState)
STATE_IDS = {state.name: int(state) for state in TransactionState}

COMMIT, ABORT = "commit", "abort"
CAUSE_CLIENT, CAUSE_TIMEOUT, CAUSE_FENCED = "client", "timeout", "fenced"
# How a transaction ended, as the metrics' `result` label names it: an abort by the coordinator
# for its timeout is apart from the client's.
TRANSACTION_RESULTS = (COMMIT, ABORT, CAUSE_TIMEOUT)


@dataclass(slots=True)
class Transition:
    """What the lifecycle logic needs of one record (a decoded TransactionLogRecord's fields)."""

    offset: int
    timestamp_ms: int
    state: int  # a TransactionState id, or TOMBSTONE
    producer_id: int = -1
    producer_epoch: int = -1
    transaction_timeout_ms: int = 0
    partitions: Iterable[str] | None = None  # "topic-N"
    start_timestamp_ms: int = -1
    client_transaction_version: int = 0


@dataclass(slots=True)
class Lifecycle:
    transactional_id: str
    coordinator_partition: int
    producer_id: int
    producer_epoch: int
    transaction_timeout_ms: int
    client_transaction_version: int
    begin_ms: int
    first_offset: int
    last_offset: int
    state: int  # the last state written
    records: int = 1
    partitions: set[str] = field(default_factory=set)
    prepare_ms: int | None = None
    complete_ms: int | None = None
    result: str | None = None  # COMMIT, ABORT, None while open
    abort_cause: str | None = None
    # The ONGOING the transaction was in when it was prepared (rules 1-2 of the module docstring).
    _ongoing_epoch: int | None = None

    @property
    def timed_out(self) -> bool:
        return self.abort_cause == CAUSE_TIMEOUT

    @property
    def duration_ms(self) -> int | None:
        """Begin to complete."""
        return None if self.complete_ms is None else self.complete_ms - self.begin_ms

    @property
    def ongoing_ms(self) -> int | None:
        """Begin to prepare: how long the transaction stayed open."""
        return None if self.prepare_ms is None else self.prepare_ms - self.begin_ms

    @property
    def markers_ms(self) -> int | None:
        """Prepare to complete: the markers' time, as the live exporter's completion histogram."""
        if self.prepare_ms is None or self.complete_ms is None:
            return None
        return self.complete_ms - self.prepare_ms

    @property
    def open(self) -> bool:
        return self.result is None


def is_timeout_abort(
    ongoing_producer_id: int,
    ongoing_epoch: int,
    abort_producer_id: int,
    abort_epoch: int,
    abort_timestamp_ms: int,
    start_timestamp_ms: int,
    transaction_timeout_ms: int,
) -> bool:
    """The KIP-588 rule, shared by the live model and the pipeline: a PREPARE_ABORT right after
    ONGOING is the coordinator's timeout abort when it keeps the producer id, bumps the epoch by
    exactly one (int16, so it wraps) and is written after the transaction's own deadline (the
    coordinator aborts once start + timeout < now). See the module docstring for its limits."""
    return (
        abort_producer_id == ongoing_producer_id
        and (ongoing_epoch + 1) & 0xFFFF == abort_epoch & 0xFFFF
        and abort_timestamp_ms - start_timestamp_ms > transaction_timeout_ms
    )


def is_stuck_prepare(state_entered_ms: int, transaction_timeout_ms: int, now_ms: int, padding_ms: int) -> bool:
    """A PREPARE_COMMIT/PREPARE_ABORT is stuck when it has been in that state longer than its own
    transaction timeout plus the padding (--late-transaction-padding-seconds), the twin of the lateness
    rule for ONGOING: a coordinator writes the markers within milliseconds and retries them without
    end, and no timeout ever ends a PREPARE_*, so one still there after the transaction's own time
    budget, and the padding, is held up (kafka_transactions_stuck_in_prepare, the view's "stuck")."""
    return state_entered_ms + transaction_timeout_ms + padding_ms < now_ms


def abort_cause(ongoing: Transition, prepare_abort: Transition) -> str:
    """Why a PREPARE_ABORT that directly follows `ongoing` was written (module docstring)."""
    if ongoing.state != ONGOING:
        return CAUSE_CLIENT
    if is_timeout_abort(
        ongoing.producer_id,
        ongoing.producer_epoch,
        prepare_abort.producer_id,
        prepare_abort.producer_epoch,
        prepare_abort.timestamp_ms,
        ongoing.start_timestamp_ms,
        ongoing.transaction_timeout_ms,
    ):
        return CAUSE_TIMEOUT
    bumped = prepare_abort.producer_id == ongoing.producer_id and (
        (ongoing.producer_epoch + 1) & 0xFFFF == prepare_abort.producer_epoch & 0xFFFF
    )
    # A bump before the deadline: a new instance fenced the transaction (TV0/TV1), or, from a TV2
    # client that bumps the epoch itself on every end of transaction, an ordinary client abort.
    return CAUSE_FENCED if bumped and ongoing.client_transaction_version < 2 else CAUSE_CLIENT


class LifecycleTracker:
    """Lifecycles of one transactional id, from its records in log order.

    `apply(t)` returns the transaction `t` completes, if any; `current` is the open one (or None).
    `open_since` is the offset of the open transaction's first record: a streaming job keeps the
    records from there on as its state and replays them into a new tracker in the next micro-batch.
    """

    __slots__ = ("_last", "coordinator_partition", "current", "transactional_id")

    def __init__(self, transactional_id: str, coordinator_partition: int) -> None:
        self.transactional_id = transactional_id
        self.coordinator_partition = coordinator_partition
        self.current: Lifecycle | None = None
        self._last: Transition | None = None

    @property
    def open_since(self) -> int | None:
        return None if self.current is None else self.current.first_offset

    def apply(self, t: Transition) -> Lifecycle | None:
        last, self._last = self._last, t
        state = t.state
        if state == PREPARE_EPOCH_FENCE:  # never written; a broker writes PREPARE_ABORT instead
            state = PREPARE_ABORT
        current = self.current
        if state in (TOMBSTONE, DEAD, EMPTY):
            # Nothing can be open before these (the broker only expires or re-inits idle ids).
            self.current = None
            return None
        if current is None:
            if state not in (ONGOING, PREPARE_COMMIT, PREPARE_ABORT):
                return None  # a COMPLETE_* whose transaction is not in the data (compacted away)
            begin = t.start_timestamp_ms if t.start_timestamp_ms >= 0 and state == ONGOING else t.timestamp_ms
            current = self.current = Lifecycle(
                self.transactional_id,
                self.coordinator_partition,
                t.producer_id,
                t.producer_epoch,
                t.transaction_timeout_ms,
                t.client_transaction_version,
                begin,
                t.offset,
                t.offset,
                state,
                records=0,
            )
        current.records += 1
        current.last_offset = t.offset
        current.state = state
        if t.partitions:
            current.partitions.update(t.partitions)
        if state == ONGOING:
            if current.prepare_ms is not None:  # ONGOING after a PREPARE: a broken run; restart
                self.current = None
                return self.apply(t)
            return None
        if state in (PREPARE_COMMIT, PREPARE_ABORT):
            if current.prepare_ms is None:
                current.prepare_ms = t.timestamp_ms
                if state == PREPARE_ABORT:
                    current.abort_cause = abort_cause(last, t) if last is not None else CAUSE_CLIENT
            return None
        # COMPLETE_COMMIT / COMPLETE_ABORT
        if current.prepare_ms is None:  # a COMPLETE_* straight after ONGOING: not a valid run
            current.prepare_ms = t.timestamp_ms
        current.complete_ms = t.timestamp_ms
        current.result = COMMIT if state == COMPLETE_COMMIT else ABORT
        if current.result == COMMIT:
            current.abort_cause = None
        elif current.abort_cause is None:
            current.abort_cause = CAUSE_CLIENT
        self.current = None
        return current


def lifecycles(
    transactional_id: str, coordinator_partition: int, transitions: Iterable[Transition]
) -> Iterator[Lifecycle]:
    """Every transaction of one id, in order; the open one (if any) last, with result None."""
    tracker = LifecycleTracker(transactional_id, coordinator_partition)
    for t in transitions:
        done = tracker.apply(t)
        if done is not None:
            yield done
    if tracker.current is not None:
        yield tracker.current


def pending_intervals(items: Iterable[Lifecycle]) -> Iterator[tuple[int, int | None]]:
    """(prepare_ms, complete_ms or None while pending) of every prepared transaction: the
    intervals in which the live exporter's `kafka_transactions_with_pending_markers` counts it."""
    for lc in items:
        if lc.prepare_ms is not None:
            yield lc.prepare_ms, lc.complete_ms


def pending_at(intervals: Iterable[tuple[int, int | None]], t_ms: int) -> int:
    """Transactions with pending markers at `t_ms`: prepared at or before it, completed after it."""
    return sum(1 for p, c in intervals if p <= t_ms and (c is None or c > t_ms))

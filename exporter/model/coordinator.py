"""CoordinatorModel: the transaction coordinators' state, rebuilt from `__transaction_state` events.

Pure: `apply(event)` for each event a source yields, in order, from one writer thread (cheapest:
`apply_batch`, once per polled batch, which takes the model's lock once). Readers on other threads
(the metric sinks at scrape time, the transactions view) ask through the query methods at the end
(`snapshot`, `in_flight_transactions`, `tracked_id`), which take the lock themselves and answer with
the plain rows of exporter.model.reading.

Decisions a reader of the metrics needs to know:
- Only the records a source hands over as counted (`replay=False`) are observed (append latency,
  which doubles as the records count per target state; tombstones; marker completions): replaying a
  partition re-reads history, and counting it would turn every restart or takeover into a burst of
  fake appends. Which records are counted is the source's rule (exporter.sources.topic_tail: each
  by the exporter whose broker appended it, by the batch's leader epoch); a partition may hand over
  counted records while it replays (a takeover's own epoch) or drains (PartitionDraining).
- A tombstone (null value, written when a transactional id expires) drops the id. It has no target
  state, so it is counted on its own (`tombstones`), never under a `target_state`.
- DEAD and PREPARE_EPOCH_FENCE are never written by brokers (a tombstone and a PREPARE_ABORT are
  written instead). Should a record carry one, it is counted in `unwritten_states` and applied as
  what the broker would have written, but never observed (no latency, records count or marker
  completion), so the `target_state` label keeps exactly the six states brokers write.
- Gauges (transactions by state, pending markers) only include partitions whose replay finished
  (`PartitionReplayed`): mid-replay, a long-completed prepare looks pending until its complete
  record is replayed, which would fake an old pending transaction.
- Decode errors count replayed and live records alike: the record is broken either way. (A replay
  hands over only each id's last record, exporter.sources.topic_tail: the ones it replaces never
  reach the codec.) So do records carrying tagged fields the codec does not name (a newer Kafka's),
  by tag (`unknown_tagged_fields`; tags above 63 as "other"); they are applied as any other record.
  The first record of each such tag, and the first value version above 1 (an
  unknown_value_version decode error), are logged as a warning; later ones are only counted.
- In-flight transactions (ONGOING, PREPARE_*) keep their last record, the only per-transaction data
  beyond the packed state (`in_flight_transactions()`, for the transactions view); a marker error from the broker
  log is noted on its PREPARE_* transaction, per data partition. An error read before the prepare
  record is not noted (the coordinator logs the next retry again).
- Append latency is timed by the coordinator's own clock where the broker log brings its
  `succeeded` lines, else by the fetch (exporter.model.append_clock); the records count per target
  state is the histogram's count plus the records left untimed.
- Producer-epoch headroom, from every record read (replayed too: a takeover's state is what it is):
  the ids whose last epoch is within EPOCH_HEADROOM of the top, and each partition's highest epoch,
  by the records' ClientTransactionVersion (0 where a record has none: 3.x's, 4.x's under TV0), added
  up by exporter.model.epoch_headroom.
- The coordinator's loads of its partitions, from their log lines: exporter.model.coordinator_loads.
- Broker-log events (exporter.sources.broker_log_tail) only count, except two: a `succeeded` line
  times its transition (above), and a final COMPLETE_* append
  that went to the coordinator's retry queue takes its pending transaction out of
  the pending-markers count (KIP-1344 excludes them) until its COMPLETE_* record arrives. A retry
  of an id the model does not hold as pending (its record not read yet, or already completed) is
  counted but changes nothing: the coordinator logs it again on its next retry.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from typing import TypeVar

from exporter.codec.errors import DecodeError
from exporter.codec.states import IN_FLIGHT_STATES, TransactionState
from exporter.codec.value import TransactionLogValue
from exporter.contracts.bug_facts import CoordinatorLog
from exporter.contracts.events import (
    BrokerLogStats,
    BrokerVersionAnswered,
    BrokerVersionSeen,
    CompleteAppendRetried,
    CoordinatorChanged,
    CoordinatorLoadFinished,
    CoordinatorLoadStarted,
    CoordinatorLogAtDebug,
    CoordinatorStarting,
    HangingScanCompleted,
    KnownBugsCounted,
    MarkerWriteFailed,
    MarkerWriteRetried,
    PartitionAssigned,
    PartitionDraining,
    PartitionProgress,
    PartitionReplayed,
    PartitionRevoked,
    SourceStatus,
    TopicEvent,
    TransactionLogAppendFailed,
    TransactionLogRecords,
    TransitionAppended,
    UndecodableRecord,
)
from exporter.contracts.kafka_versions import LOG, BrokerVersion, from_log
from exporter.contracts.known_bugs import KNOWN_BUGS
from exporter.contracts.lifecycle import CAUSE_TIMEOUT, TRANSACTION_RESULTS, is_timeout_abort
from exporter.model import aggregates, notes
from exporter.model.append_clock import COORDINATOR, FETCH, AppendClock
from exporter.model.coordinator_loads import CoordinatorLoads
from exporter.model.epoch_headroom import highest_epochs, ids_near_exhaustion
from exporter.model.partition import (
    ABSENT,
    EFFECTIVE_STATE_OF_UNWRITTEN,
    EPOCH_MASK,
    EPOCH_SHIFT,
    NEAR_EXHAUSTION_EPOCH,
    PRODUCER_ID_SHIFT,
    STATE_MASK,
    InFlightEntry,
    PartitionState,
    unpack,
)
from exporter.model.reading import (
    AppendClockRow,
    InFlightSelection,
    ModelSnapshot,
    PartitionRow,
    TrackedId,
    select_in_flight,
)
from exporter.model.sinks import ObservationSinks
from exporter.model.transitions import (
    ACTIONS,
    COMPLETES,
    ENDS_TRANSACTION,
    ENTERS_IN_FLIGHT,
    ENTERS_ONGOING,
    ENTERS_PENDING,
    LEAVES_IN_FLIGHT_STATE,
    LEAVES_PENDING,
    ONGOING,
    PENDING,
)

log = logging.getLogger(__name__)

Event = (
    TopicEvent
    | TransactionLogAppendFailed
    | MarkerWriteRetried
    | MarkerWriteFailed
    | CompleteAppendRetried
    | CoordinatorChanged
    | BrokerLogStats
    | HangingScanCompleted
    | TransitionAppended
    | CoordinatorLogAtDebug
    | BrokerVersionSeen
    | BrokerVersionAnswered
    | KnownBugsCounted
    | CoordinatorLoadStarted
    | CoordinatorLoadFinished
    | CoordinatorStarting
)

_LAST_WRITTEN_STATE = TransactionState.COMPLETE_ABORT
# Unknown tagged fields are counted by tag up to this one, the rest together: a bounded label.
MAX_TAG_LABEL = 63
OTHER_TAGS = "other"
_ONGOING_STATE = TransactionState.ONGOING

# The transaction-duration sinks are indexed by TRANSACTION_RESULTS.
_TIMEOUT = TRANSACTION_RESULTS.index(CAUSE_TIMEOUT)


T = TypeVar("T")


class CoordinatorModel:
    def __init__(self, sinks: ObservationSinks, coordinator_log: bool = False, all_partitions: bool = False) -> None:
        """`coordinator_log`: whether a broker log is read (--broker-log), whose `succeeded` lines may
        time the appends (AppendClock); without one, the fetch clock times every record.
        `all_partitions`: the source follows every partition (--all-partitions), so the log's elected
        and resigned lines say which partitions' appends its lines time; else every record counted is
        this broker's own append, timed by its line even once the partition has moved (a drain)."""
        self._lock = threading.Lock()
        self._partitions: dict[int, PartitionState] = {}
        # Bound once: a method lookup per record is measurable at 250k records/s.
        self._record_append_latency = tuple(sink.record for sink in sinks.append_latency)
        # Presumed in force with a broker log (deploy/ turns its DEBUG lines on): a fresh coordinator's
        # first records wait for their lines instead of being timed by the fetch before any came.
        self._append_clock = AppendClock(self._record_append_latency, presumed=coordinator_log)
        self._coordinator_log = coordinator_log
        self._all_partitions = all_partitions
        self._record_completion = (
            sinks.marker_completion_commit.record,
            sinks.marker_completion_abort.record,
        )
        # By TRANSACTION_RESULTS index; empty when the sinks have no duration recorders.
        self._record_duration = tuple(sink.record for sink in sinks.transaction_duration)
        # Cumulative counters (never reset by a revoke: they are Prometheus counters). Live records
        # per target state are not counted here: each is exactly one append-latency observation.
        self._tombstones = 0
        self._decode_errors: dict[str, int] = dict.fromkeys(DecodeError.REASONS, 0)
        # Records carrying tagged fields the codec does not name, by tag ("4"... or OTHER_TAGS).
        self._unknown_tagged_fields: dict[str, int] = {}
        self._unwritten_states: dict[TransactionState, int] = dict.fromkeys(EFFECTIVE_STATE_OF_UNWRITTEN, 0)
        self._source_up = False
        # From the broker log: (target state id, error name) -> failed appends; error -> count.
        self._append_errors: dict[tuple[int, str], int] = {}
        self._marker_retries: dict[str, int] = {}
        self._marker_failures: dict[str, int] = {}
        self._complete_append_retries = 0
        self._broker_log = BrokerLogStats()
        # Live records only: coordinator timeout aborts (KIP-588), producer-id changes (KIP-890).
        self._timeouts = 0
        self._producer_id_rotations = 0
        # Takeovers replayed and their replay time; drains ended, by how (exporter.sources.topic_tail).
        self._takeovers = 0
        self._takeover_replay_ms = 0
        self._drains: dict[str, int] = dict.fromkeys(("read_to_end", "cut"), 0)
        # The last completed hanging-transaction scan (None: none yet), and failed scans.
        self._hanging_scan: HangingScanCompleted | None = None
        self._hanging_scan_errors = 0
        # The broker's own version: its log's startup line, else its ApiVersions answer (a range).
        self._broker_version: BrokerVersion | None = None
        # Transactions the view's diagnosis matched to each known bug (exporter.app's count of them).
        self._known_bug_matches: dict[str, int] = dict.fromkeys((bug.jira for bug in KNOWN_BUGS), 0)
        self._loads = CoordinatorLoads()

    # --- Writing ---

    def apply(self, event: Event) -> None:
        """Applies one event."""
        if type(event) is TransactionLogRecords:
            self._apply_records(event)
        elif type(event) is TransitionAppended:  # a `succeeded` line: thousands a second, as records
            self._append_clock.line(event)
        else:
            self._apply_control(event)

    def _apply_records(self, event: TransactionLogRecords) -> None:
        """The record path. It runs for every record, so the partition's containers are looked up
        once per run and transitions are table lookups instead of branches (see ACTIONS)."""
        part = self._partitions.get(event.partition)
        if part is None:
            part = self._partitions[event.partition] = PartitionState(live=not event.replay)
        records = event.records
        part.last_record = records[-1]
        replay = event.replay
        received_ms = event.received_ms
        states = part.states
        counts = part.state_counts
        inflight = part.inflight
        partition = event.partition
        record_append_latency = self._record_append_latency
        # Whether these records' lines may come (AppendClock): the broker log read is their coordinator's.
        logged = self._coordinator_log and part.here
        clock = self._append_clock
        draining = part.draining
        counting_since_ms = part.counting_since_ms
        near_exhaustion = part.near_exhaustion
        epoch_highs = part.epoch_highs
        for record in records:
            tid = record.transactional_id
            live = not replay
            # None (a tombstone) turns `new` into ABSENT below, before any field is read.
            value: TransactionLogValue = record.value  # type: ignore[assignment]
            new: int
            if value is None:
                new = ABSENT
            else:
                new = value.state
                if value.unknown_tagged_fields:  # a newer Kafka's record (rare)
                    self._count_unknown_tags(partition, record.offset, tid, value.unknown_tagged_fields)
                if new > _LAST_WRITTEN_STATE:
                    # Applied as what a broker writes instead, but never observed as a target state.
                    self._unwritten_states[new] += 1
                    new = EFFECTIVE_STATE_OF_UNWRITTEN[new]
                    live = False

            old_packed = states.get(tid, ABSENT)
            old = old_packed & STATE_MASK
            if new == ABSENT:
                states.pop(tid, None)
                if near_exhaustion:
                    near_exhaustion.pop(tid, None)
            else:
                producer_id = value.producer_id
                epoch = value.producer_epoch
                packed = new | (epoch & EPOCH_MASK) << EPOCH_SHIFT | producer_id << PRODUCER_ID_SHIFT
                states[tid] = packed
                version = value.client_transaction_version
                try:  # no cost in the usual case, where a dict's get() is a call per record
                    if epoch > epoch_highs[version]:
                        epoch_highs[version] = epoch
                except KeyError:  # the partition's first record of this version
                    epoch_highs[version] = epoch
                if epoch >= NEAR_EXHAUSTION_EPOCH:
                    near_exhaustion[tid] = version
                elif near_exhaustion:
                    near_exhaustion.pop(tid, None)
            counts[old] -= 1
            counts[new] += 1

            action = ACTIONS[old][new]
            if action & ONGOING:
                if action & ENTERS_ONGOING:
                    part.ongoing[tid] = value.start_timestamp_ms + value.transaction_timeout_ms
                else:
                    del part.ongoing[tid]
            if action & PENDING:
                if action & LEAVES_PENDING:
                    prepared = part.pending.pop(tid)
                    if part.retrying:
                        part.retrying.discard(tid)
                if action & ENTERS_PENDING:
                    counted = live or (counting_since_ms is not None and record.timestamp_ms >= counting_since_ms)
                    part.pending[tid] = (record.timestamp_ms << 1) | counted
            if action & LEAVES_IN_FLIGHT_STATE:
                del inflight[old][tid]
            if action & ENTERS_IN_FLIGHT:  # InFlight's fields
                entered = value.start_timestamp_ms if new == _ONGOING_STATE else record.timestamp_ms
                inflight[new][tid] = (entered, tid, partition, packed, record, None)
            if not live:
                if logged and new != ABSENT and clock.waiting[1]:
                    clock.replayed((tid, new, producer_id, value.producer_epoch, value.last_update_timestamp_ms))
                continue
            if new == ABSENT:
                self._tombstones += 1
                continue
            timestamp_ms = record.timestamp_ms
            if logged:
                key = (tid, new, producer_id, value.producer_epoch, value.last_update_timestamp_ms)
                clock.record(key, timestamp_ms, received_ms, producer_id, partition, draining)
            else:
                record_append_latency[new](received_ms - timestamp_ms, received_ms, tid, producer_id)
            if old != ABSENT and old_packed >> PRODUCER_ID_SHIFT != producer_id:
                self._producer_id_rotations += 1
            if action & COMPLETES:
                # Prepare -> complete of the same kind, both appends counted (the prepare perhaps by the
                # exporter of the coordinator before a move: `pending`). Under the prepare's producer
                # id: the one its markers carry (a TV2 COMPLETE_* may carry the next one).
                if prepared & 1:
                    self._record_completion[(action >> 3) & 1](
                        timestamp_ms - (prepared >> 1), received_ms, tid, old_packed >> PRODUCER_ID_SHIFT
                    )
            elif action & ENDS_TRANSACTION:
                start_ms = value.start_timestamp_ms
                result = new - TransactionState.PREPARE_COMMIT  # 0 commit, 1 abort
                if result and is_timeout_abort(
                    old_packed >> PRODUCER_ID_SHIFT,
                    (old_packed >> EPOCH_SHIFT) & EPOCH_MASK,
                    producer_id,
                    value.producer_epoch,
                    timestamp_ms,
                    start_ms,
                    value.transaction_timeout_ms,
                ):
                    self._timeouts += 1
                    result = _TIMEOUT
                if self._record_duration:
                    self._record_duration[result](timestamp_ms - start_ms, received_ms, tid, producer_id)

    def _count_unknown_tags(
        self, partition: int, offset: int, tid: str, unknown: tuple[tuple[int, bytes], ...]
    ) -> None:
        counts = self._unknown_tagged_fields
        labels: dict[str, int] = {}  # each label once per record, with its first tag (named in the warning)
        for tag, _ in unknown:
            labels.setdefault(str(tag) if tag <= MAX_TAG_LABEL else OTHER_TAGS, tag)
        for label, tag in labels.items():
            seen = counts.get(label, 0)
            counts[label] = seen + 1
            if not seen:
                log.warning(
                    "__transaction_state partition %d offset %d (transactional id %r): tagged field %d is not one "
                    "this exporter knows (a newer Kafka's?); its records are decoded without it and counted in "
                    'kafka_transaction_state_log_unknown_tagged_fields_total{tag="%s"} (this is said once per tag)',
                    partition,
                    offset,
                    tid[:100],
                    tag,
                    label,
                )

    def apply_batch(self, events: Iterable[Event], now_ms: int | None = None) -> None:
        """Applies events in order under `lock`, taking it once for the whole batch; then, at `now_ms`
        (the wall clock, if given), counts the records and lines that waited for each other in vain."""
        apply = self.apply
        with self._lock:
            for event in events:
                apply(event)
            if now_ms is not None:
                self._append_clock.expire(now_ms)

    def _apply_control(self, event: Event) -> None:
        if type(event) is UndecodableRecord:
            reason = event.error.reason
            self._decode_errors[reason] += 1
            if reason == "unknown_value_version" and self._decode_errors[reason] == 1:
                log.warning(
                    "__transaction_state partition %d offset %d: %s, which this exporter cannot read (a newer "
                    "Kafka's?); such records are skipped and counted in "
                    'kafka_transaction_state_log_decode_errors_total{reason="unknown_value_version"} (this is '
                    "said once)",
                    event.partition,
                    event.offset,
                    event.error.detail,
                )
            part = self._partitions.get(event.partition)
            if part is not None:
                part.next_offset = max(part.next_offset, event.offset + 1)
        elif type(event) is PartitionProgress:
            part = self._partitions.get(event.partition)
            if part is not None:
                part.next_offset = max(part.next_offset, event.position)
                part.high_watermark = event.high_watermark
        elif type(event) is PartitionAssigned:
            # A (re)assignment replays the partition from scratch.
            self._partitions[event.partition] = PartitionState(
                live=False, here=event.here, counting_since_ms=event.counting_since_ms
            )
        elif type(event) is PartitionDraining:
            part = self._partitions.get(event.partition)
            if part is not None:
                part.live = False  # its gauges and rows are the new leader's exporter's now
                part.draining = part.here = True
            self._append_clock.leadership_lost(event.partition)
        elif type(event) is PartitionReplayed:
            part = self._partitions.get(event.partition)
            if part is not None:
                part.live = True
            if event.takeover_replay_ms is not None:
                self._takeovers += 1
                self._takeover_replay_ms += event.takeover_replay_ms
        elif type(event) is PartitionRevoked:
            self._partitions.pop(event.partition, None)
            if event.drain is not None:
                self._drains[event.drain] = self._drains.get(event.drain, 0) + 1
        elif type(event) is SourceStatus:
            self._source_up = event.up
        else:
            self._apply_broker_log(event)

    def _apply_broker_log(self, event: Event) -> None:
        if type(event) is MarkerWriteRetried:
            self._marker_retries[event.error] = self._marker_retries.get(event.error, 0) + 1
            notes.note_marker_error(self._partitions.values(), event)
        elif type(event) is TransactionLogAppendFailed:
            key = (event.target_state, event.error)
            self._append_errors[key] = self._append_errors.get(key, 0) + 1
            notes.note_append_error(self._partitions.values(), event)
            if event.transactional_id is not None:
                self._append_clock.failed(event.transactional_id, event.target_state, event.seen_ms)
        elif type(event) is MarkerWriteFailed:
            self._marker_failures[event.error] = self._marker_failures.get(event.error, 0) + 1
            notes.note_marker_error(self._partitions.values(), event)
        elif type(event) is CompleteAppendRetried:
            self._complete_append_retries += 1
            tid = event.transactional_id
            for part in self._partitions.values():  # rare: a scan beats knowing the partition count
                if tid in part.pending:
                    part.retrying.add(tid)
                    break
        elif type(event) is BrokerLogStats:
            totals = self._broker_log
            totals.lines += event.lines
            totals.truncated += event.truncated
            totals.malformed += event.malformed
            totals.unrecognized += event.unrecognized
            totals.rotations += event.rotations
            totals.unplaced += event.unplaced
            if event.utc_offset_ms is not None:
                totals.utc_offset_ms = event.utc_offset_ms
        elif type(event) is HangingScanCompleted:
            if event.ok:
                self._hanging_scan = event
            else:
                self._hanging_scan_errors += 1
        elif type(event) is CoordinatorLogAtDebug:
            self._append_clock.presume(event.seen_ms)
        elif type(event) is CoordinatorLoadStarted:
            self._loads.started(event)
        elif type(event) is CoordinatorLoadFinished:
            self._loads.finished(event)
        elif type(event) is CoordinatorStarting:
            self._loads.restarted()
        elif type(event) is CoordinatorChanged:
            if not event.elected:
                self._loads.resigned(event.partition)
            # An ownership signal for the topic source (exporter.app); and, following every partition,
            # whose lines the log holds.
            coordinated = self._partitions.get(event.partition)
            if coordinated is not None and self._all_partitions:
                coordinated.here = event.elected
        elif type(event) is BrokerVersionSeen:
            self._broker_version = from_log(event.version)
        elif type(event) is BrokerVersionAnswered:
            if self._broker_version is None or self._broker_version.source != LOG:  # the log's word stands
                self._broker_version = event.version
        elif type(event) is KnownBugsCounted:
            self._known_bug_matches = {**dict.fromkeys(self._known_bug_matches, 0), **event.counts}
        else:
            raise TypeError(f"not a source event: {event!r}")

    # --- Queries (any thread: each takes the lock itself) ---

    def snapshot(self, now_ms: int, late_padding_ms: int, read_sinks: Callable[[], T]) -> tuple[ModelSnapshot, T]:
        """The counters and gauges at `now_ms`, and `read_sinks()`'s answer from the same instant: the
        observation sinks are written by `apply`, so a scrape reads them while no record is applied
        (a histogram's count then equals the records counted)."""
        with self._lock:
            pending, oldest_prepare_ms = aggregates.pending_markers(self._partitions.values())
            snapshot = ModelSnapshot(
                source_up=self._source_up,
                transactions_by_state=aggregates.transactions_by_state(self._partitions.values()),
                late_transactions=aggregates.late_transactions(self._partitions.values(), now_ms, late_padding_ms),
                stuck_prepares=aggregates.stuck_prepares(self._partitions.values(), now_ms, late_padding_ms),
                pending_markers=pending,
                oldest_prepare_ms=oldest_prepare_ms,
                tombstones=self._tombstones,
                decode_errors=dict(self._decode_errors),
                unknown_tagged_fields=dict(self._unknown_tagged_fields),
                unwritten_states=dict(self._unwritten_states),
                append_errors=dict(self._append_errors),
                marker_retries=dict(self._marker_retries),
                marker_failures=dict(self._marker_failures),
                complete_append_retries=self._complete_append_retries,
                broker_log=BrokerLogStats(**{f: getattr(self._broker_log, f) for f in BrokerLogStats.__slots__}),
                timeouts=self._timeouts,
                producer_id_rotations=self._producer_id_rotations,
                partitions_taken_over=self._takeovers,
                takeover_replay_seconds=self._takeover_replay_ms / 1000,
                partition_drains=dict(self._drains),
                hanging_scan=self._hanging_scan,
                hanging_scan_errors=self._hanging_scan_errors,
                broker_version=self._broker_version,
                known_bug_matches=dict(self._known_bug_matches),
                partitions=tuple(
                    PartitionRow(partition, part.live, part.consumer_lag(), part.last_record_timestamp_ms)
                    for partition, part in sorted(self._partitions.items())
                ),
                append_clock=self._append_clock_row(),
                coordinator_loads=self._loads.row(),
                ids_near_epoch_exhaustion=ids_near_exhaustion(self._partitions.values()),
                highest_producer_epoch=highest_epochs(self._partitions.values()),
            )
            return snapshot, read_sinks()

    def in_flight_transactions(
        self, states: Iterable[int] | None, limit: int, min_age_ms: int, now_ms: int
    ) -> InFlightSelection:
        """The oldest `limit` transactions in `states` (of ONGOING and PREPARE_*; None: all three) of
        the live partitions that entered their state at least `min_age_ms` before `now_ms`."""
        with self._lock:  # only references are copied under it (no allocation per transaction)
            entries: list[InFlightEntry] = []
            append_errors: dict[int, dict[tuple[int, str], tuple[int, int]]] = {}
            for partition, part in self._partitions.items():
                if part.live:
                    for state in IN_FLIGHT_STATES if states is None else states:
                        entries += part.inflight[state].values()
                    if part.append_errors:
                        append_errors[partition] = part.append_errors
        return select_in_flight(entries, limit, min_age_ms, now_ms, append_errors)

    def tracked_id(self, transactional_id: str) -> TrackedId | None:
        """`transactional_id`'s last written state, producer id and epoch; None if not tracked."""
        with self._lock:
            for part in self._partitions.values():
                packed = part.states.get(transactional_id)
                if packed is not None:
                    state, producer_id, producer_epoch = unpack(packed)
                    return TrackedId(TransactionState(state), producer_id, producer_epoch)
        return None

    def coordinator_logs(self) -> dict[int, CoordinatorLog]:
        """What the coordinator's log showed of each `__transaction_state` partition it loaded, by
        partition (exporter.model.coordinator_loads), for the known-bug check of the view's rows."""
        with self._lock:
            return self._loads.logs()

    def coordinator_clock(self) -> bool:
        """Whether the coordinator's own clock times the appends, its lines read (see
        exporter.model.append_clock): the tail then fetches for freshness alone."""
        with self._lock:
            return self._append_clock.confirmed

    def last_hanging_scan(self) -> HangingScanCompleted | None:
        with self._lock:
            return self._hanging_scan

    def broker_version(self) -> BrokerVersion | None:
        """The broker's own version as learned: its log's startup line, else its ApiVersions answer."""
        with self._lock:
            return self._broker_version

    # --- Aggregates (under the lock) ---

    def _append_clock_row(self) -> AppendClockRow:
        clock = self._append_clock
        return AppendClockRow(
            clock=COORDINATOR if clock.coordinator else FETCH,
            coordinator_timed=tuple(clock.coordinator_timed),
            untimed=tuple(clock.untimed),
            unmatched=dict(clock.unmatched),
            negative=clock.negative,
        )

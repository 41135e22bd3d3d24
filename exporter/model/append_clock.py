"""AppendClock: which clock times each live record's append, and the join that reads the coordinator's.

Two clocks can time a transition's `__transaction_state` append:
- the coordinator's own (COORDINATOR): its DEBUG `succeeded` line, written in the append's callback,
  minus the record's CreateTime (stamped when the coordinator built the record): the interval
  KIP-1344's histogram measures, to the ms. It needs --broker-log and the line at DEBUG.
- the fetch (FETCH): when the exporter received the record, minus the same CreateTime: an upper
  bound, looser by the fetch's delay (the tail's resolution).

The coordinator's clock is presumed in force from the start, when a broker log is read (`presumed`:
deploy/ configures its DEBUG lines), else from the first `succeeded` line, and for the partitions whose
coordinator writes the log read (`here`): their live records wait for their line (and lines for
their record: either may come first) in insertion-ordered buffers, matched by the five fields both
carry (id, target state, producer id and epoch, last update). A record whose line has not come
within `hold_ms` is counted, not timed (UNTIMED), by why its line never came: the coordinator logged
its append as failed (APPEND_FAILED: a leader stepping down fails its pending appends, though a
follower may keep the record), its broker lost the partition while the record waited or before it
was read (LEADERSHIP_LOST: appended but its line never written, e.g. the broker killed with the
line in its log's buffer; the hold outlasts a dead broker's fencing, 9 s in KRaft and 18 s in
ZooKeeper mode by default), or nothing tells (EXPIRED). A line waits longer for its record, LINE_HOLD_MS: a partition taken over or
drained is read after its coordinator wrote the lines (a SIGKILLed leader is fenced after the
controller's session timeout, 9 s by default, and its successor answers once its high watermark has
caught up); a line whose record has not come then is dropped and counted. When records wait
out the hold for no known reason and no line at all came for as long (the logger at INFO, set back
to it, the file unreadable or rotated away, a broker restart that reset a run-time level), the fetch
clock is in force again until a line comes back, and those records are timed by it, as received; the
tail then fetches at its resolution again.

Each transition is timed at most once: while the fetch clock is in force, the keys of the records it
timed are kept for `hold_ms`, so their lines, arriving once the coordinator's clock is back, are
dropped (counted as such) rather than waiting for a record that came already.

Memory: each buffer holds at most `max_waiting` entries (the oldest leaves first, counted as
evicted) plus, for the expiry, the keys in arrival order for `hold_ms` (the lines' for LINE_HOLD_MS).
"""

from __future__ import annotations

import json
import logging
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from exporter.codec.states import TransactionState
from exporter.contracts.events import TransitionAppended

log = logging.getLogger(__name__)
# Every transition timed, at DEBUG, with the clock that timed it: what tests hold to the coordinator's
# own lines and Kafka's DumpLogSegments (tests/integration/broker_truth.py).
_timed_log = logging.getLogger(__name__ + ".timed")

COORDINATOR = "coordinator"
FETCH = "fetch"
UNTIMED = "untimed"
# Why a record or a line waited in vain.
EXPIRED = "expired"  # its partner did not come within the hold
EVICTED = "evicted"  # more than max_waiting were waiting
ALREADY_TIMED = "already_timed"  # (a line) its record was timed by the fetch clock
APPEND_FAILED = "append_failed"  # (a record) the coordinator logged its append as failed
LEADERSHIP_LOST = "leadership_lost"  # (a record) read in a drain, its line never written
UNMATCHED_REASONS = {
    "record": (EXPIRED, APPEND_FAILED, LEADERSHIP_LOST, EVICTED),
    "line": (EXPIRED, EVICTED, ALREADY_TIMED),
}

HOLD_MS = 30_000
FIRST_LINE_HOLD_MS = 5_000
LINE_HOLD_MS = 60_000
MAX_WAITING = 16_384

# (transactional id, target state, producer id, producer epoch, last update ms): what a record's value
# and its `succeeded` line both name.
Key = tuple[str, int, int, int, int]
# Received ms, CreateTime ms, producer id (the rest is its key), its partition, whether its broker lost
# the partition.
Record = tuple[int, int, int, int, bool]
Line = tuple[int, int]  # seen ms, appended ms (UTC)
V = TypeVar("V", bound=tuple[Any, ...])  # an entry, its arrival (ms) first
LatencySink = Callable[[int, int, str, int], None]


class AppendClock:
    def __init__(
        self,
        record_latency: Sequence[LatencySink],
        hold_ms: int = HOLD_MS,
        max_waiting: int = MAX_WAITING,
        presumed: bool = False,
    ) -> None:
        """`record_latency`: the append-latency sinks' record methods, by target state; `presumed`: the
        coordinator's clock in force from the start (a broker log is read), so the first records of a
        coordinator whose log holds no line yet wait for theirs."""
        self._record_latency = record_latency
        self._hold_ms = hold_ms
        self._max = max_waiting
        self.coordinator = presumed  # the clock in force: the coordinator's, else the fetch's
        # Whether the log has shown its lines (since the start or the last fall back): only then does
        # the tail fetch for freshness alone; a presumed clock keeps the fetch at its resolution, so
        # records the log turns out not to time are timed by the fetch as promptly as ever.
        self.confirmed = False
        self._records: OrderedDict[Key, Record] = OrderedDict()
        self._lines: OrderedDict[Key, Line] = OrderedDict()
        # Records the fetch clock timed, by key, with when they were received (see the docstring).
        self._fetch_timed: OrderedDict[Key, tuple[int]] = OrderedDict()
        # Appends the coordinator logged as failed, by (id, target state), with when: the reason a
        # record of theirs has no line (a follower kept it as the leader stepped down).
        self._failed: OrderedDict[tuple[str, int], tuple[int]] = OrderedDict()
        self._last_line_ms = 0  # when the last `succeeded` line was read
        # Counters: transitions timed by the coordinator's clock and untimed, by target state (those
        # the fetch clock timed are the histograms' counts less the coordinator's); unmatched records
        # and lines by (kind, reason); coordinator-clock latencies below 0, recorded as 0.
        self.coordinator_timed = [0] * 6
        self.untimed = [0] * 6
        self.unmatched: dict[tuple[str, str], int] = {
            (kind, reason): 0 for kind, reasons in UNMATCHED_REASONS.items() for reason in reasons
        }
        self.negative = 0
        self._log_timed = _timed_log.isEnabledFor(logging.DEBUG)  # (set at start: read once)

    def record(
        self, key: Key, timestamp_ms: int, received_ms: int, producer_id: int, partition: int = 0, lost: bool = False
    ) -> None:
        """A live record with a target state, received at `received_ms`, of a partition whose
        coordinator writes the log read (the model times the others' by the fetch itself); `lost`:
        read in a drain, after the broker lost the partition."""
        if not self.coordinator:
            self._record_latency[key[1]](received_ms - timestamp_ms, received_ms, key[0], producer_id)
            if self._log_timed:
                _log(key, received_ms - timestamp_ms, FETCH)
            self._remember(self._fetch_timed, key, (received_ms,), None)
            return
        line = self._lines.pop(key, None)
        if line is not None:
            seen_ms, appended_ms = line
            self._time(key, appended_ms, timestamp_ms, seen_ms if seen_ms > received_ms else received_ms, producer_id)
        else:
            self._remember(self._records, key, (received_ms, timestamp_ms, producer_id, partition, lost), "record")

    def line(self, event: TransitionAppended) -> None:
        """The coordinator's `succeeded` line of a transition."""
        seen_ms = self._last_line_ms = event.seen_ms
        if not self.confirmed:
            self.coordinator = self.confirmed = True
            log.info("append latency: timed by the coordinator's own clock (its `succeeded` lines in the broker log)")
        key = (
            event.transactional_id,
            event.target_state,
            event.producer_id,
            event.producer_epoch,
            event.last_update_ms,
        )
        if self._fetch_timed and self._fetch_timed.pop(key, None) is not None:
            self.unmatched["line", ALREADY_TIMED] += 1
            return
        record = self._records.pop(key, None)
        if record is None:
            self._remember(self._lines, key, (seen_ms, event.appended_ms), "line")
            return
        received_ms, timestamp_ms, producer_id, _, _ = record
        self._time(key, event.appended_ms, timestamp_ms, received_ms if received_ms > seen_ms else seen_ms, producer_id)

    def presume(self, seen_ms: int) -> None:
        """The log read held `succeeded` lines before the exporter started: the coordinator's clock is
        in force until records wait out the hold without a line, as if a line had just come."""
        self._last_line_ms = max(self._last_line_ms, seen_ms)
        if not self.confirmed:
            self.coordinator = self.confirmed = True
            log.info(
                "append latency: timed by the coordinator's own clock (the broker log held its `succeeded` "
                "lines when the exporter started)"
            )

    def leadership_lost(self, partition: int) -> None:
        """The broker lost `partition` (a drain began): its records waiting for their lines may have
        none (rare: the waiting records are scanned)."""
        records = self._records
        for key, entry in records.items():
            if entry[3] == partition and not entry[4]:
                records[key] = (*entry[:4], True)

    def failed(self, transactional_id: str, target_state: int, seen_ms: int) -> None:
        """The coordinator logged an append of `transactional_id` to `target_state` as failed."""
        self._failed.pop((transactional_id, target_state), None)
        self._failed[transactional_id, target_state] = (seen_ms,)
        while len(self._failed) > self._max:
            self._failed.popitem(last=False)

    def replayed(self, key: Key) -> None:
        """A replayed record (history, never timed): its line, if waiting, is not a missing record's."""
        if self._lines:
            self._lines.pop(key, None)

    def expire(self, now_ms: int) -> None:
        """Counts what waited longer than the hold at `now_ms`, and goes back to the fetch clock when
        records waited in vain while no line came."""
        cutoff = now_ms - self._hold_ms
        # Presumed but no line read yet: a fresh coordinator's first line comes within ms of its
        # append, so its records wait a short hold, a log at INFO delaying them no longer than that.
        records_cutoff = cutoff if self.confirmed else now_ms - min(self._hold_ms, FIRST_LINE_HOLD_MS)
        # No line for the whole hold: records waiting in vain for no known reason are the fetch's.
        falling_back = self.coordinator and self._last_line_ms < records_cutoff
        records_expired = self._expire(self._records, "record", records_cutoff, falling_back)
        self._expire(self._lines, "line", now_ms - LINE_HOLD_MS)
        self._expire(self._fetch_timed, None, cutoff)
        # (A failure line waits twice the hold: its record may wait the whole hold after it.)
        self._expire(self._failed, None, cutoff - self._hold_ms)
        if records_expired and falling_back:
            self.coordinator = self.confirmed = False
            log.warning(
                "append latency: no `succeeded` line in the broker log for %.0f s while %d record(s) waited for "
                "theirs (the logger kafka.coordinator.transaction.TransactionStateManager no longer at DEBUG, or "
                "the file unreadable or rotated away?): timed by the fetch bound until the lines come back; see "
                "txn_exporter_append_latency_clock_info",
                self._hold_ms / 1000,
                records_expired,
            )

    @property
    def waiting(self) -> tuple[int, int]:
        """(records waiting for their line, lines waiting for their record)."""
        return len(self._records), len(self._lines)

    def _time(self, key: Key, appended_ms: int, timestamp_ms: int, now_ms: int, producer_id: int) -> None:
        latency = appended_ms - timestamp_ms
        if latency < 0:  # the line's time placed a little early (a clock step): never below 0
            self.negative += 1
            latency = 0
        state = key[1]
        self.coordinator_timed[state] += 1
        self._record_latency[state](latency, now_ms, key[0], producer_id)
        if self._log_timed:
            _log(key, latency, COORDINATOR)

    def _remember(self, buffer: OrderedDict[Key, V], key: Key, entry: V, kind: str | None) -> None:
        """Adds `entry` at the buffer's end; the oldest beyond max_waiting leaves, counted as evicted,
        and so does a waiting one of the same key (a transition repeated within one ms: the next line
        or record matches the newer)."""
        if key in buffer:
            evicted = [(key, buffer.pop(key))]
        elif len(buffer) < self._max:  # (the usual case, first)
            buffer[key] = entry
            return
        else:
            evicted = []
        buffer[key] = entry
        while len(buffer) > self._max:
            evicted.append(buffer.popitem(last=False))
        if evicted and kind is not None:
            self.unmatched[kind, EVICTED] += len(evicted)
            if kind == "record":
                for old, _ in evicted:
                    self.untimed[old[1]] += 1

    def _expire(self, buffer: OrderedDict[Any, V], kind: str | None, cutoff: int, fetch_timed: bool = False) -> int:
        """Drops the entries that arrived before `cutoff`, counted for `kind` by reason; returns how
        many expired for no known reason (a record: no failure logged, its broker still leading),
        which, if `fetch_timed`, are timed by the fetch clock (as received) instead."""
        unexplained = 0
        while buffer:
            key, entry = next(iter(buffer.items()))
            if entry[0] >= cutoff:
                break
            del buffer[key]
            reason = EXPIRED
            if kind == "record":
                if (key[0], key[1]) in self._failed:
                    reason = APPEND_FAILED
                elif entry[4]:
                    reason = LEADERSHIP_LOST
                elif fetch_timed:
                    received_ms, timestamp_ms, producer_id, _, _ = entry
                    self._record_latency[key[1]](received_ms - timestamp_ms, received_ms, key[0], producer_id)
                    self._remember(self._fetch_timed, key, (received_ms,), None)
                    unexplained += 1
                    continue
                self.untimed[key[1]] += 1
            if kind is not None:
                self.unmatched[kind, reason] += 1
            unexplained += reason == EXPIRED
        return unexplained


def _log(key: Key, latency_ms: int, clock: str) -> None:
    tid, state, producer_id, producer_epoch, last_update_ms = key
    fields = {
        "transactional_id": tid,
        "state": TransactionState(state).name,
        "producer_id": producer_id,
        "producer_epoch": producer_epoch,
        "last_update_ms": last_update_ms,
        "latency_ms": latency_ms,
        "clock": clock,
    }
    _timed_log.debug("timed %s", json.dumps(fields, ensure_ascii=False))

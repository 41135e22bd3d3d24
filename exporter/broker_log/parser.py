"""BrokerLogParser: broker log lines in, source events out. Stateful (pairs lines), but no I/O.

Cheap by design, since nearly every line of a broker log is of no interest: a line is only decoded
and matched against a regex when it contains `coordinator.transaction.` (the loggers of every line
read here: kafka.* up to 4.x, org.apache.kafka.* for the classes 4.x moved) or, for a stack-trace
line, `Received fatal error`; the broker's startup line (`Kafka version: `) is looked for once per
batch of lines, and its events follow the batch's others.

- A coordinator line repeated with only its time changed (a held partition's marker retry, thousands
  a second) is parsed once: results are cached by the text after the time (at most CACHE_SIZE
  entries and CACHE_BYTES of text: lines reach 64 KiB, so entries alone would allow 64 MiB).
  Marker errors are then stamped with the time they were read (`feed`'s `now_ms`: the line's own
  time has no zone), which the transactions view shows as "last seen".
- A line that does not start with `[` continues the previous entry (stack traces); only the one
  exception line of a fatal marker error is read from continuations. A coordinator line that
  neither starts with `[` nor looks like a stack trace line is in another layout: malformed.
- What the log shows it cannot carry is recorded for the follower to warn about (pure: no logging
  here): the first malformed line, the first unrecognized line of each logger, whether the first
  LAYOUT_SAMPLE lines hold any in Kafka's default layout and which levels they hold, and failed
  appends seen at INFO only (the raw error needs the DEBUG line).
- A successful append's DEBUG `succeeded` line (one per transition the coordinator appends, thousands
  a second on a busy coordinator) is parsed on a path of its own, before the cache (no two are
  alike): a TransitionAppended with the line's time placed in UTC (exporter.broker_log.local_time),
  the coordinator's own clock for the append latency. A line whose time cannot be placed is counted
  (`unplaced`).
- The coordinator's loads of `__transaction_state` partitions (INFO `Loading ...` and `Finished loading
  ...` lines of TransactionStateManager) are stamped, as marker errors are, with the time they were read.
- A failed append writes a DEBUG line (raw error) and an INFO line (mapped error). With DEBUG on,
  the DEBUG line comes first: it is held until the INFO line of the same transactional id, and the
  pair counts once with the raw error. An INFO line alone counts with the mapped error. A DEBUG line
  whose INFO line never comes is counted when more than MAX_UNPAIRED are waiting, or their
  transactional ids (chosen by clients, up to 32 KiB each) exceed MAX_UNPAIRED_BYTES, oldest first.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence

from exporter.broker_log.lines import (
    MALFORMED,
    UNRECOGNIZED,
    AppendFailureLine,
    TransitionLine,
    parse_entry,
    parse_fatal_continuation,
    parse_succeeded,
    usual_succeeded,
)
from exporter.broker_log.local_time import LocalTimes
from exporter.contracts.events import (
    BrokerVersionSeen,
    CompleteAppendRetried,
    CoordinatorChanged,
    CoordinatorLoadFinished,
    CoordinatorLoadStarted,
    CoordinatorStarting,
    MarkerWriteFailed,
    MarkerWriteRetried,
    TransactionLogAppendFailed,
    TransitionAppended,
)

BrokerLogEvent = (
    TransactionLogAppendFailed
    | MarkerWriteRetried
    | MarkerWriteFailed
    | CompleteAppendRetried
    | CoordinatorChanged
    | CoordinatorLoadStarted
    | CoordinatorLoadFinished
    | CoordinatorStarting
    | TransitionAppended
    | BrokerVersionSeen
)

_NEEDLE = b"coordinator.transaction."
_FATAL_NEEDLE = b"Received fatal error"
_VERSION = b"Kafka version: "
# At DEBUG (which --broker-log asks of it) TransactionStateManager logs every transition it appends,
# thousands a second on a busy coordinator; of its lines only successful appends (" succeeded" just
# before the logger), failed ones (both of theirs say "failed due to") and a partition's load (its
# `Loading` and `Finished loading` lines) are read. The others (TRACE, the load's other INFO lines)
# are passed over here, before the decode, the frame and the cache.
_STATE_MANAGER_ENDS = (b".TransactionStateManager)", b".TransactionStateManager)\r")
_FAILED = b"failed due to"
_LOAD = b" transaction metadata from __transaction_state-"
_SUCCEEDED = b" succeeded ("
MAX_UNPAIRED = 1024
MAX_UNPAIRED_BYTES = 1 << 20
CACHE_SIZE = 1024
CACHE_BYTES = 1 << 20
LAYOUT_SAMPLE = 200
SAMPLE_CHARS = 300
_MAX_SAMPLED_LOGGERS = 16
# Stack-trace lines: `\tat ...`, `\t... 12 more`, `Caused by: ...`, `java.lang.SomeException: ...`.
_TRACE_LINE = re.compile(rb"[ \t]|Caused by|Suppressed|[\w$.]+(Exception|Error|Throwable)\b")
# `[%d] %p %m (%c)`: the time in brackets, the level, and the logger in parentheses at the end.
_FRAMED = re.compile(rb"\[[^\]]+\] ([A-Z]+) .* \([\w$.]+\)\r?$")
_NOT_CACHED = object()


class BrokerLogParser:
    def __init__(self) -> None:
        # transactional id -> its DEBUG line, waiting for the INFO line (insertion order = age).
        self._unpaired: dict[str, AppendFailureLine] = {}
        self._unpaired_bytes = 0  # of their transactional ids
        # Line text after the time -> parse result (events are frozen, so they can be shared).
        self._cache: dict[bytes, object] = {}
        self._cache_bytes = 0  # of its keys
        self.lines = 0
        self.malformed = 0
        self.unrecognized = 0
        # What the log cannot carry (see the module's docstring).
        self.malformed_sample: str | None = None
        self.unrecognized_samples: dict[str, str] = {}  # logger -> its first unrecognized line
        self.layout_sampled = 0  # of the first LAYOUT_SAMPLE lines
        self.layout_framed = 0  # of those, in Kafka's default layout
        self.layout_first_line = ""
        self.levels: set[str] = set()  # of the framed ones
        self.append_failures_raw = 0  # DEBUG lines of failed appends
        self.append_failures_info_only = 0  # INFO lines of failed appends without their DEBUG line
        self._now_ms = 0  # when the lines being fed were read
        self.times = LocalTimes()  # the `succeeded` lines' times in UTC
        self.unplaced = 0  # `succeeded` lines whose time could not be placed

    def feed(self, lines: Sequence[bytes], now_ms: int = 0) -> list[BrokerLogEvent]:
        """Parses complete lines (bytes, without their newline) in file order, read at `now_ms`."""
        self._now_ms = now_ms
        events: list[BrokerLogEvent] = []
        if self.layout_sampled < LAYOUT_SAMPLE:
            self._sample_layout(lines[: LAYOUT_SAMPLE - self.layout_sampled])
        count = 0
        needle, fatal, state_manager_ends, failed = _NEEDLE, _FATAL_NEEDLE, _STATE_MANAGER_ENDS, _FAILED
        append, place = events.append, self.times.place
        for line in lines:
            count += 1
            # rfind, not `in`: a coordinator line's needles are in its end (the logger's name), found
            # at once from there; a line without them is scanned whole either way.
            if line.rfind(needle) >= 0:
                if line[:1] == b"[":
                    if not line.endswith(state_manager_ends):
                        self._entry(line, events)
                    elif line.rfind(_SUCCEEDED) >= 0:
                        # Read here, in the loop: thousands a second, nearly all in the usual words.
                        usual = usual_succeeded(line) or self._unusual_succeeded(line)
                        if usual is None:
                            continue
                        time, tid, state, producer_id, producer_epoch, last_update_ms = usual
                        appended_ms = place(time, last_update_ms, now_ms)
                        if appended_ms is None:
                            self.unplaced += 1
                        else:
                            append(
                                TransitionAppended(
                                    tid, state, producer_id, producer_epoch, last_update_ms, appended_ms, now_ms
                                )
                            )
                    elif failed in line or _LOAD in line or b"] " not in line:
                        self._entry(line, events)
                elif not _TRACE_LINE.match(line):  # not a stack-trace frame of a coordinator class
                    self._malformed(line)
            elif fatal in line and line[:1] != b"[":
                event = parse_fatal_continuation(line.decode("utf-8", "replace"))
                if event is not None:
                    events.append(_stamped(event, now_ms))
        # The broker's startup line (AppInfoParser): rare, so looked for in the whole batch at once, then
        # line by line in a batch that has it. The lines that match nothing (nearly all) take 20% more
        # CPU for it; a check of each line took 50% more (bench/broker_log_lines.py's "other").
        if _VERSION in b"".join(lines):
            for line in lines:
                if _VERSION in line and line[:1] == b"[":
                    self._entry(line, events)
        self.lines += count
        return events

    def _entry(self, line: bytes, events: list[BrokerLogEvent]) -> None:
        cache = self._cache
        body = line[line.find(b"] ") + 1 :]
        parsed = cache.get(body, _NOT_CACHED)
        if parsed is _NOT_CACHED:
            parsed = parse_entry(line.decode("utf-8", "replace").rstrip("\r"))
            if len(cache) >= CACHE_SIZE or self._cache_bytes + len(body) > CACHE_BYTES:
                cache.clear()
                self._cache_bytes = 0
            if len(body) <= CACHE_BYTES:
                cache[body] = parsed
                self._cache_bytes += len(body)
        if parsed is None:
            return
        if type(parsed) is AppendFailureLine:
            self._append_failure(parsed, events)
        elif parsed is MALFORMED:
            self._malformed(line)
        elif parsed is UNRECOGNIZED:
            self._unrecognized(line)
        elif type(parsed) in _MARKER_ERRORS:
            events.append(_stamped(parsed, self._now_ms))  # type: ignore[arg-type]  # because its type is in _MARKER_ERRORS
        elif type(parsed) in _LOAD_EVENTS:
            events.append(_stamped_load(parsed, self._now_ms))  # type: ignore[arg-type]  # because its type is in _LOAD_EVENTS
        elif type(parsed) is BrokerVersionSeen:
            events.append(BrokerVersionSeen(parsed.version, self._now_ms))
        else:
            events.append(parsed)  # type: ignore[arg-type]  # because parse_entry's other results are events

    def _unusual_succeeded(self, line: bytes) -> tuple[bytes, str, int, int, int, int] | None:
        """usual_succeeded's fields of a `succeeded` line in other words than the usual (see feed), or
        None, the line counted as malformed or unrecognized."""
        parsed = parse_succeeded(line.decode("utf-8", "replace").rstrip("\r"))
        if type(parsed) is not TransitionLine:
            if parsed is MALFORMED:
                self._malformed(line)
            else:
                self._unrecognized(line)
            return None
        tid, state, producer_id, producer_epoch, last_update_ms, time = parsed
        return time.encode(), tid, state, producer_id, producer_epoch, last_update_ms

    def _unrecognized(self, line: bytes) -> None:
        self.unrecognized += 1
        samples = self.unrecognized_samples
        if len(samples) < _MAX_SAMPLED_LOGGERS:
            logger = line[line.rfind(b" (") + 2 :].rstrip(b"\r)").decode("utf-8", "replace")
            samples.setdefault(logger, _sample(line))

    def _append_failure(self, line: AppendFailureLine, events: list[BrokerLogEvent]) -> None:
        unpaired = self._unpaired
        tid = line.transactional_id
        if line.raw:
            self.append_failures_raw += 1
            previous = self._pop_unpaired(tid)
            if previous is not None:  # its INFO line never came: count it on its own
                events.append(self._append_failed(previous, previous.error))
            unpaired[tid] = line
            self._unpaired_bytes += len(tid)
            while len(unpaired) > MAX_UNPAIRED or self._unpaired_bytes > MAX_UNPAIRED_BYTES:
                oldest = self._pop_unpaired(next(iter(unpaired)))
                assert oldest is not None
                events.append(self._append_failed(oldest, oldest.error))
            return
        debug = self._pop_unpaired(tid)
        if debug is None:
            self.append_failures_info_only += 1
        error = line.error if debug is None else debug.error
        events.append(self._append_failed(line, error))

    def _append_failed(self, line: AppendFailureLine, error: str) -> TransactionLogAppendFailed:
        return TransactionLogAppendFailed(line.target_state, error, line.transactional_id, self._now_ms)

    def _pop_unpaired(self, tid: str) -> AppendFailureLine | None:
        line = self._unpaired.pop(tid, None)
        if line is not None:
            self._unpaired_bytes -= len(tid)
        return line

    def _malformed(self, line: bytes) -> None:
        self.malformed += 1
        if self.malformed_sample is None:
            self.malformed_sample = _sample(line)

    def _sample_layout(self, lines: Sequence[bytes]) -> None:
        for line in lines:
            framed = _FRAMED.match(line)
            if framed is not None:
                self.layout_framed += 1
                self.levels.add(framed[1].decode())
            elif not self.layout_sampled:
                self.layout_first_line = _sample(line)
            self.layout_sampled += 1


def _sample(line: bytes) -> str:
    return line[:SAMPLE_CHARS].decode("utf-8", "replace").rstrip("\r")


_MARKER_ERRORS = (MarkerWriteRetried, MarkerWriteFailed)
_LOAD_EVENTS = (CoordinatorLoadStarted, CoordinatorLoadFinished)


def _stamped_load(
    event: CoordinatorLoadStarted | CoordinatorLoadFinished, now_ms: int
) -> CoordinatorLoadStarted | CoordinatorLoadFinished:
    # A new event per line, as _stamped's.
    return dataclasses.replace(event, seen_ms=now_ms)


def _stamped(event: MarkerWriteRetried | MarkerWriteFailed, now_ms: int) -> MarkerWriteRetried | MarkerWriteFailed:
    # A new event per line: the cached one is shared by every repeat of the line.
    return type(event)(event.error, event.transactional_id, event.partition, now_ms)

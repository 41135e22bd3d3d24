"""BrokerLogParser: broker log lines in, source events out. Stateful (pairs lines), but no I/O.

Cheap by design, since nearly every line of a broker log is of no interest: a line is only decoded
and matched against a regex when it contains `coordinator.transaction.` (the loggers of every line
read here: kafka.* up to 4.x, org.apache.kafka.* for the classes 4.x moved) or, for a stack-trace
line, `Received fatal error`.

- A coordinator line repeated with only its time changed (a held partition's marker retry, thousands
  a second) is parsed once: results are cached by the text after the time (CACHE_SIZE entries).
  Marker errors are then stamped with the time they were read (`feed`'s `now_ms`: the line's own
  time has no zone), which the transactions view shows as "last seen".
- A line that does not start with `[` continues the previous entry (stack traces); only the one
  exception line of a fatal marker error is read from continuations.
- A failed append writes a DEBUG line (raw error) and an INFO line (mapped error). With DEBUG on,
  the DEBUG line comes first: it is held until the INFO line of the same transactional id, and the
  pair counts once with the raw error. An INFO line alone counts with the mapped error. A DEBUG line
  whose INFO line never comes is counted when more than MAX_UNPAIRED are waiting, oldest first.
"""

from __future__ import annotations

from collections.abc import Iterable

from exporter.broker_log.lines import (
    MALFORMED,
    UNRECOGNIZED,
    AppendFailureLine,
    parse_entry,
    parse_fatal_continuation,
)
from exporter.sources.events import (
    CompleteAppendRetried,
    CoordinatorChanged,
    MarkerWriteFailed,
    MarkerWriteRetried,
    TransactionLogAppendFailed,
)

BrokerLogEvent = (
    TransactionLogAppendFailed | MarkerWriteRetried | MarkerWriteFailed | CompleteAppendRetried | CoordinatorChanged
)

_NEEDLE = b"coordinator.transaction."
_FATAL_NEEDLE = b"Received fatal error"
MAX_UNPAIRED = 1024
CACHE_SIZE = 1024
_NOT_CACHED = object()


class BrokerLogParser:
    def __init__(self) -> None:
        # transactional id -> its DEBUG line, waiting for the INFO line (insertion order = age).
        self._unpaired: dict[str, AppendFailureLine] = {}
        # Line text after the time -> parse result (events are frozen, so they can be shared).
        self._cache: dict[bytes, object] = {}
        self.lines = 0
        self.malformed = 0
        self.unrecognized = 0
        self._now_ms = 0

    def feed(self, lines: Iterable[bytes], now_ms: int = 0) -> list[BrokerLogEvent]:
        """Parses complete lines (bytes, without their newline) in file order, read at `now_ms`."""
        self._now_ms = now_ms
        events: list[BrokerLogEvent] = []
        count = 0
        needle, fatal = _NEEDLE, _FATAL_NEEDLE
        for line in lines:
            count += 1
            if needle in line:
                if line[:1] == b"[":  # else a stack-trace frame of a coordinator class
                    self._entry(line, events)
            elif fatal in line and line[:1] != b"[":
                event = parse_fatal_continuation(line.decode("utf-8", "replace"))
                if event is not None:
                    events.append(_stamped(event, now_ms))
        self.lines += count
        return events

    def _entry(self, line: bytes, events: list[BrokerLogEvent]) -> None:
        cache = self._cache
        body = line[line.find(b"] ") + 1 :]
        parsed = cache.get(body, _NOT_CACHED)
        if parsed is _NOT_CACHED:
            parsed = parse_entry(line.decode("utf-8", "replace").rstrip("\r"))
            if len(cache) >= CACHE_SIZE:
                cache.clear()
            cache[body] = parsed
        if parsed is None:
            return
        if type(parsed) is AppendFailureLine:
            self._append_failure(parsed, events)
        elif parsed is MALFORMED:
            self.malformed += 1
        elif parsed is UNRECOGNIZED:
            self.unrecognized += 1
        elif type(parsed) in _MARKER_ERRORS:
            events.append(_stamped(parsed, self._now_ms))  # type: ignore[arg-type]
        else:
            events.append(parsed)  # type: ignore[arg-type]

    def _append_failure(self, line: AppendFailureLine, events: list[BrokerLogEvent]) -> None:
        unpaired = self._unpaired
        tid = line.transactional_id
        if line.raw:
            previous = unpaired.pop(tid, None)
            if previous is not None:  # its INFO line never came: count it on its own
                events.append(TransactionLogAppendFailed(previous.target_state, previous.error))
            unpaired[tid] = line
            if len(unpaired) > MAX_UNPAIRED:
                oldest = unpaired.pop(next(iter(unpaired)))
                events.append(TransactionLogAppendFailed(oldest.target_state, oldest.error))
            return
        debug = unpaired.pop(tid, None)
        error = line.error if debug is None else debug.error
        events.append(TransactionLogAppendFailed(line.target_state, error))


_MARKER_ERRORS = (MarkerWriteRetried, MarkerWriteFailed)


def _stamped(event: MarkerWriteRetried | MarkerWriteFailed, now_ms: int) -> MarkerWriteRetried | MarkerWriteFailed:
    # A new event per line: the cached one is shared by every repeat of the line.
    return type(event)(event.error, event.transactional_id, event.partition, now_ms)

"""Logging of the long-running commands: text or JSON lines on stderr, identical repeats collapsed.

`configure(level, fmt, repeat_seconds)` installs one stderr handler on the root logger with a
`RepeatFilter`: the first of identical messages (same logger, level and rendered text) passes, the
others within `repeat_seconds` are counted instead of printed, and once the window is over the
count is reported ("... (repeated K times in the last N s)", "repeated once" for one) with the next
occurrence, or on its own by `flush()` (called at exit, and whenever any record passes after the
window expired), so a burst that stops is still accounted for. A summary on its own is stamped with
the time it is printed (that of the record it comes before, or of flush()), not that of the repeat
it counts, so summaries come in order and timestamps never go backwards.

`kafka_client_logger()` is the `logger` setting of every confluent-kafka client the project makes:
librdkafka's own lines go through `logging` at levels that fit them, never raw to stderr.

A record's text is the logger's message only: nothing here adds settings or client config, so what
is secret stays wherever the caller kept it (Settings.redacted() for the settings).
"""

from __future__ import annotations

import json
import logging
import math
import sys
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Literal, TextIO

from exporter import defaults

LogFormat = Literal["text", "json"]
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
# Client libraries that narrate every connection at INFO: held at WARNING unless the level is DEBUG.
_CHATTY_LIBRARIES = ("kafka",)  # kafka-python (the hanging-transactions scan)
_MAX_TRACKED = 1000  # distinct messages remembered at once; beyond, the oldest are reported early


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time (RFC 3339, UTC), level, logger, message, and exc_info."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, object] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        repeated = getattr(record, "repeated", None)
        if repeated:
            entry["repeated"] = repeated
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        elif record.exc_text:
            entry["exception"] = record.exc_text
        return json.dumps(entry, ensure_ascii=False, default=str)


class _Seen:
    __slots__ = ("count", "record", "since")

    def __init__(self, since: float, record: logging.LogRecord) -> None:
        self.since = since
        self.count = 0
        self.record = record


class RepeatFilter(logging.Filter):
    """Collapses identical records within `window` seconds; see the module docstring."""

    def __init__(
        self, window: float, emit: Callable[[logging.LogRecord], object], clock: Callable[[], float] = time.monotonic
    ) -> None:
        super().__init__()
        self.window = window
        self._emit = emit  # where the "repeated K times" summaries go (the handler, unfiltered)
        self._clock = clock
        self._seen: dict[tuple[str, int, str], _Seen] = {}
        self._lock = threading.Lock()

    def filter(self, record: logging.LogRecord) -> bool:
        if self.window <= 0 or getattr(record, "_summary", False):
            return True
        key = (record.name, record.levelno, record.getMessage())
        now = self._clock()
        with self._lock:
            seen = self._seen.get(key)
            if seen is not None and now - seen.since < self.window:
                seen.count += 1
                seen.record = record
                return False
            if seen is not None:
                # This record restarts the window and carries the count of the last one.
                del self._seen[key]
                if seen.count:
                    _mark_repeated(record, seen.count, now - seen.since)
            # Emitted under the lock, before this record and stamped with its time: summaries stay
            # in the order they are due, and timestamps never go backwards.
            self._report_expired(now, record)
            self._seen[key] = _Seen(now, record)
        return True

    def flush(self) -> None:
        """Reports every pending count now (at exit)."""
        with self._lock:
            self._report_expired(float("inf"), None)

    def _report_expired(self, now: float, stamp: logging.LogRecord | None) -> None:
        """Forgets windows that are over (or the oldest, past _MAX_TRACKED) and prints the summaries
        of those that had repeats, stamped with `stamp`'s time (else now). Called with the lock held."""
        overflow = len(self._seen) - _MAX_TRACKED + 1
        for key, seen in list(self._seen.items()):
            if now - seen.since < self.window and overflow <= 0:
                continue
            overflow -= 1
            del self._seen[key]
            if seen.count:
                self._emit(self._summary(seen, stamp))

    def _summary(self, seen: _Seen, stamp: logging.LogRecord | None) -> logging.LogRecord:
        # The repeated record's logger, level, text and origin; the time of `stamp`, else of now.
        times = stamp.__dict__ if stamp is not None else vars(logging.makeLogRecord({}))
        summary = logging.makeLogRecord({**seen.record.__dict__, **{k: times[k] for k in _RECORD_TIMES}})
        summary.exc_info = summary.exc_text = None
        _mark_repeated(summary, seen.count, self._clock() - seen.since)
        summary._summary = True
        return summary


_RECORD_TIMES = ("created", "msecs", "relativeCreated")


def _mark_repeated(record: logging.LogRecord, count: int, seconds: float) -> None:
    times = "once" if count == 1 else f"{count} times"
    record.msg = f"{record.getMessage()} (repeated {times} in the last {max(1, math.ceil(seconds))} s)"
    record.args = None
    record.repeated = count


_installed: tuple[logging.Handler, RepeatFilter] | None = None


def configure(
    level: str = defaults.LOG_LEVEL,
    fmt: LogFormat = defaults.LOG_FORMAT,
    repeat_seconds: float = defaults.LOG_REPEAT_SECONDS,
    stream: TextIO | None = None,
) -> RepeatFilter:
    """Replaces the root logger's handlers with one stderr handler in `fmt`; returns its filter."""
    global _installed
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else logging.Formatter(TEXT_FORMAT))
    repeats = RepeatFilter(repeat_seconds, emit=lambda record: handler.handle(record))
    handler.addFilter(repeats)
    root = logging.getLogger()
    if _installed is not None:
        _installed[1].flush()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
    for name in _CHATTY_LIBRARIES:
        chatty = logging.getLogger(name)
        chatty.setLevel(logging.NOTSET if root.level <= logging.DEBUG else max(root.level, logging.WARNING))
    _installed = (handler, repeats)
    return repeats


def flush() -> None:
    """Reports the pending repeat counts of the installed handler (call before exiting)."""
    if _installed is not None:
        _installed[1].flush()


class _KafkaClientLog(logging.LoggerAdapter):
    """What confluent-kafka calls for each librdkafka line (`log(level, fmt, facility, name, text)`,
    the syslog level already mapped to `logging`'s), with the level mapped once more."""

    def __init__(self, logger: logging.Logger, errors_logged: bool) -> None:
        super().__init__(logger, {})
        self._errors_logged = errors_logged

    def log(self, level: int, msg: object, *args: object, **kwargs: Any) -> None:  # (kwargs: logging's, passed on)
        if level < logging.WARNING or (self._errors_logged and level >= logging.ERROR):
            level = logging.DEBUG
        super().log(level, msg, *args, **kwargs)


def kafka_client_logger(name: str = "librdkafka", *, errors_logged: bool = False) -> logging.LoggerAdapter:
    """The `logger` setting for a confluent-kafka client, so librdkafka's lines go through `logging`
    (format, level, repeat suppression) instead of raw to stderr (`%6|...|BGQUEUE|...`). Its
    informational lines (connection narration, queue purges) go at DEBUG. With `errors_logged` (the
    client's error_cb logs each error itself), its error lines go at DEBUG too, so a broker that is
    down is reported once, not twice. Warnings (a setting ignored, a retry) stay warnings.
    A client delivers these lines from its poll(); an AdminClient that is never polled drops them
    (its calls raise their errors)."""
    return _KafkaClientLog(logging.getLogger(name), errors_logged)

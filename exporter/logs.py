"""Logging of the long-running commands: text or JSON lines on stderr, identical repeats collapsed.

`configure(level, fmt, repeat_seconds)` installs one stderr handler on the root logger with a
`RepeatFilter`: the first of identical messages (same logger, level and rendered text) passes, the
others within `repeat_seconds` are counted instead of printed, and once the window is over the
count is reported ("... (repeated K times in the last N s)") with the next occurrence, or on its
own by `flush()` (called at exit, and whenever any record passes after the window expired), so a
burst that stops is still accounted for.

A record's text is the logger's message only: nothing here adds settings or client config, so what
is secret stays wherever the caller kept it (Settings.redacted() for the settings).
"""

from __future__ import annotations

import json
import logging
import sys
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Literal, TextIO

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
    __slots__ = ("since", "count", "record")

    def __init__(self, since: float, record: logging.LogRecord) -> None:
        self.since = since
        self.count = 0
        self.record = record


class RepeatFilter(logging.Filter):
    """Collapses identical records within `window` seconds; see the module docstring."""

    def __init__(self, window: float, emit: Callable[[logging.LogRecord], None],
                 clock: Callable[[], float] = time.monotonic) -> None:
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
            expired = self._expire(now)
            if seen is not None and seen.count:
                # This record restarts the window and carries the count of the last one.
                expired = [s for s in expired if s is not seen]
                _mark_repeated(record, seen.count, now - seen.since)
            self._seen[key] = _Seen(now, record)
        for summary in expired:
            self._emit(summary)
        return True

    def flush(self) -> None:
        """Reports every pending count now (at exit)."""
        with self._lock:
            pending = self._expire(float("inf"))
        for summary in pending:
            self._emit(summary)

    def _expire(self, now: float) -> list[logging.LogRecord]:
        """Forgets windows that are over (or the oldest, past _MAX_TRACKED); returns the summaries
        of those that had repeats. Called with the lock held."""
        summaries = []
        overflow = len(self._seen) - _MAX_TRACKED + 1
        for key, seen in list(self._seen.items()):
            if now - seen.since < self.window and overflow <= 0:
                continue
            overflow -= 1
            del self._seen[key]
            if seen.count:
                summary = logging.makeLogRecord(seen.record.__dict__)
                summary.exc_info = summary.exc_text = None
                _mark_repeated(summary, seen.count, min(now, self._clock()) - seen.since)
                summary._summary = True
                summaries.append(summary)
        return summaries


def _mark_repeated(record: logging.LogRecord, count: int, seconds: float) -> None:
    record.msg = f"{record.getMessage()} (repeated {count} times in the last {seconds:.0f} s)"
    record.args = None
    record.repeated = count


_installed: tuple[logging.Handler, RepeatFilter] | None = None


def configure(level: str = "INFO", fmt: LogFormat = "text", repeat_seconds: float = 60.0,
              stream: TextIO | None = None) -> RepeatFilter:
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

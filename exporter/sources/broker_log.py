"""The broker-log source: follows one broker log file (`server.log`) and yields typed events.

The coordinator writes failed `__transaction_state` appends, WriteTxnMarkers retries and failures,
final COMPLETE_* append retries and its elections into the broker's own log, never into the topic;
exporter.broker_log parses those lines, this file only reads them.

Reading: `poll()` reads what was appended since the last call (never blocks) and returns the events
of the complete lines, plus a BrokerLogStats event when anything was read.
- Start: at the end of the file by default (only what the broker logs from now on), or at its
  beginning with `from_start`. A file that does not exist yet is waited for and read from its
  beginning once it appears (all of it is new).
- Rotation by rename (log4j's rolling appenders, logrotate's default): when the path names another
  file, the old one is read to its end first (the writer may have written to it after our last
  read), then the new one from its beginning.
- Rotation by copytruncate: the file is truncated in place. Noticed when it is shorter than the
  position, or when the bytes before the position are no longer those read (it was truncated and
  written past the position since). What was written between the last read and the copy is read from
  the copy: the newest file beside it whose name starts with the file's name and that holds the
  same bytes before the position (server.log.1, server.log-20260101...). Then the file is read from
  its beginning. If no copy is found, those lines are lost (logged).
- Long lines: a line longer than `max_line_bytes` keeps its first and last halves, the middle is
  dropped (a transaction over thousands of partitions prints them all; the parsed fields are at the
  head and the tail), and it is counted; memory stays within about twice the limit.
Two rotations between polls lose the middle file's unread tail: poll at least every few seconds.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from pathlib import Path

from exporter.broker_log.parser import BrokerLogEvent, BrokerLogParser
from exporter.sources.events import BrokerLogStats

log = logging.getLogger(__name__)

DEFAULT_MAX_LINE_BYTES = 64 * 1024
_FINGERPRINT_BYTES = 64
_ELISION = b" ... "

Event = BrokerLogEvent | BrokerLogStats


class BrokerLogFollower:
    def __init__(
        self, path: str | Path, *, from_start: bool = False, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if max_line_bytes < 2 * _FINGERPRINT_BYTES:
            raise ValueError(f"max_line_bytes must be at least {2 * _FINGERPRINT_BYTES}")
        self.path = Path(path)
        self._from_start = from_start
        self._max = max_line_bytes
        self._half = max_line_bytes // 2
        self._parser = BrokerLogParser()
        self._clock = clock
        self._fd: int | None = None
        self._identity: tuple[int, int] | None = None  # (st_dev, st_ino) of the open file
        self._position = 0  # bytes consumed from the open file, the partial line included
        # The first and the last bytes consumed, to recognise the file (copytruncate).
        self._head = b""
        self._fingerprint = b""
        self._partial = b""  # an incomplete line (or, once cut, its head)
        self._cut_tail: bytes | None = None  # the tail of an over-long incomplete line
        self._skip_fragment = False  # started mid-line at the end: drop up to the first newline
        self._stats = BrokerLogStats()
        # Where "now" is: a file there at start is read from its end (unless from_start).
        self._first_open = True
        try:
            self._open()
        except OSError as e:  # unreadable for now: poll() retries, and reports
            log.warning("cannot open broker log %s: %s", self.path, e)
        self._first_open = False

    # --- API ---

    def poll(self) -> list[Event]:
        lines: list[bytes] = []
        self._read(lines)
        parser = self._parser
        before = (parser.lines, parser.malformed, parser.unrecognized)
        events: list[Event] = list(parser.feed(lines, int(self._clock() * 1000)))
        stats = self._stats
        stats.lines += parser.lines - before[0]
        stats.malformed += parser.malformed - before[1]
        stats.unrecognized += parser.unrecognized - before[2]
        if stats.lines or stats.rotations or stats.truncated:
            events.append(stats)
            self._stats = BrokerLogStats()
        return events

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    # --- Reading ---

    def _read(self, lines: list[bytes]) -> None:
        if self._fd is None and not self._open():
            return
        fd = self._fd
        assert fd is not None
        if self._truncated(fd):
            self._stats.rotations += 1
            log.info("%s was truncated (copytruncate): reading it again from its beginning", self.path)
            self._read_copy(lines)
            self._flush_partial(lines)
            self._position, self._head, self._fingerprint = 0, b"", b""
        self._drain(fd, lines)
        try:
            stat = os.stat(self.path)
        except FileNotFoundError:
            return  # renamed away, the new file not created yet: keep reading the old one
        if (stat.st_dev, stat.st_ino) != self._identity:
            self._drain(fd, lines)  # written to the old file after our read, before the rename
            self._flush_partial(lines)
            self.close()
            self._stats.rotations += 1
            log.info("%s was rotated (renamed): following the new file", self.path)
            if self._open():
                assert self._fd is not None
                self._drain(self._fd, lines)

    def _open(self) -> bool:
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            return False
        stat = os.fstat(fd)
        self._fd, self._identity = fd, (stat.st_dev, stat.st_ino)
        self._position, self._head, self._fingerprint = 0, b"", b""
        if self._first_open and not self._from_start and stat.st_size:
            self._position = stat.st_size
            self._head = os.pread(fd, _FINGERPRINT_BYTES, 0)
            self._fingerprint = os.pread(fd, _FINGERPRINT_BYTES, max(0, stat.st_size - _FINGERPRINT_BYTES))
            self._skip_fragment = not self._fingerprint.endswith(b"\n")
        return True

    def _truncated(self, fd: int) -> bool:
        size = os.fstat(fd).st_size
        if size < self._position:
            return True
        return bool(self._position) and not self._same_bytes(fd)

    def _same_bytes(self, fd: int) -> bool:
        """Whether the file behind `fd` holds the first and last bytes consumed where they were read.
        (Log lines end alike, with their logger's name, but start with a timestamp.)"""
        head, tail = self._head, self._fingerprint
        return os.pread(fd, len(head), 0) == head and os.pread(fd, len(tail), self._position - len(tail)) == tail

    def _read_copy(self, lines: list[bytes]) -> None:
        """Reads what was written after our position before the truncation, from the rotated copy."""
        position = self._position
        if not position:
            return
        candidates = []
        for sibling in self.path.parent.glob(self.path.name + "?*"):
            try:
                stat = sibling.stat()
            except OSError:
                continue
            if stat.st_size >= position and not sibling.name.endswith((".gz", ".bz2", ".xz", ".zst")):
                candidates.append((stat.st_mtime, sibling))
        for _, sibling in sorted(candidates, reverse=True):
            try:
                fd = os.open(sibling, os.O_RDONLY)
            except OSError:
                continue
            try:
                if self._same_bytes(fd):
                    os.lseek(fd, position, os.SEEK_SET)
                    self._drain(fd, lines, seek=False)
                    return
            finally:
                os.close(fd)
        log.warning("%s was truncated, and no copy of it was found beside it: lines written between the "
                    "last read and the truncation are lost", self.path)

    def _drain(self, fd: int, lines: list[bytes], seek: bool = True) -> None:
        if seek:
            os.lseek(fd, self._position, os.SEEK_SET)
        while True:
            data = os.read(fd, self._max)
            if not data:
                return
            if seek:
                if len(self._head) < _FINGERPRINT_BYTES and len(self._head) == self._position:
                    self._head += data[: _FINGERPRINT_BYTES - len(self._head)]
                self._position += len(data)
                self._fingerprint = (self._fingerprint + data)[-_FINGERPRINT_BYTES:]
            self._consume(data, lines)

    def _consume(self, data: bytes, lines: list[bytes]) -> None:
        parts = data.split(b"\n")
        rest = parts.pop()
        if parts:
            if self._partial or self._cut_tail is not None:
                parts[0] = self._complete(parts[0])
            if self._skip_fragment:
                self._skip_fragment = False
                del parts[0]
            lines.extend(parts)
        self._add_partial(rest)

    def _add_partial(self, data: bytes) -> None:
        if self._cut_tail is not None:
            self._cut_tail = (self._cut_tail + data)[-self._half :]
            return
        self._partial += data
        if len(self._partial) > self._max:
            self._partial, self._cut_tail = self._partial[: self._half], self._partial[-self._half :]

    def _complete(self, end: bytes) -> bytes:
        """The incomplete line so far followed by `end`, cut to the limit if too long."""
        head, tail = self._partial, self._cut_tail
        self._partial, self._cut_tail = b"", None
        if tail is None:
            line = head + end
            if len(line) <= self._max:
                return line
            head, tail = line[: self._half], line[-self._half :]
        else:
            tail = (tail + end)[-self._half :]
        self._stats.truncated += 1
        return head + _ELISION + tail

    def _flush_partial(self, lines: list[bytes]) -> None:
        """The old file ended without a newline: its last line is complete nonetheless."""
        if self._partial or self._cut_tail is not None:
            line = self._complete(b"")
            if self._skip_fragment:
                self._skip_fragment = False
            else:
                lines.append(line)

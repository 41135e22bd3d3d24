"""The broker-log source: follows one broker log file (`server.log`) and yields typed events.

The coordinator writes failed `__transaction_state` appends, WriteTxnMarkers retries and failures,
final COMPLETE_* append retries and its elections into the broker's own log, never into the topic;
exporter.broker_log parses those lines, this file only reads them.

Reading: `poll()` reads what was appended since the last call (never blocks) and returns the events
of the complete lines, plus a BrokerLogStats event when anything was read.
- Start: at the end of the file by default (only what the broker logs from now on), or at its
  beginning with `from_start`. A file that does not exist yet is waited for and read from its
  beginning once it appears (all of it is new), after any file rotated away before it appeared.
- Rotated files are the file's siblings whose names extend its own: Kafka's rolling appenders
  (`server.log.YYYY-MM-DD-HH`: log4j 1 and reload4j's DailyRollingFileAppender in 3.x, log4j2's
  RollingFile `server.log.%d{yyyy-MM-dd-HH}` in 4.x), size-based ones (`server.log.1`) and
  logrotate's (`server.log.1`, `server.log-YYYYMMDD`); compressed ones (.gz...) cannot be read. The
  siblings present at start, and those read since, are remembered by inode (and first bytes, as an
  inode can be reused); the directory is listed only when the file was rotated, or changed while
  nothing of it was read.
- Rotation by rename (log4j's rolling appenders, logrotate's default): when the path names another
  file, the old one is read to its end first (the writer may have written to it after our last
  read), then every file rotated since (two rotations between polls leave one nobody has read),
  then the new one from its beginning.
- Rotation by copytruncate: the file is truncated in place. Noticed when it is shorter than the
  position, when the bytes before the position are no longer those read (it was truncated and
  written past the position since), or, while nothing of it was read, when a new sibling that is
  not a copy of its current bytes appeared. What was written between the last read and the copy is
  read from the copy (the sibling that starts with the same bytes), then every later copy, then the
  file from its beginning. If no copy is found, those lines are lost (logged). A copy still being
  made (a prefix of the live file) is left for later.
- Files rotated since the last poll are read oldest first, by the time of their first line (the
  default layout starts every line with it; else by modification time, then name), so a DEBUG line
  and its INFO line in two files still pair.
- A file is recognised by the first and the last 64 bytes read of it: log writers write whole lines
  (log4j: at least 8 KiB at once), and a line starts with its time to the millisecond.
- What the log cannot carry (another layout, no INFO lines, unrecognized lines, failed appends
  without their DEBUG line) is warned about once each (exporter.broker_log.gaps), and counted.
- Long lines: a line longer than `max_line_bytes` keeps its first and last halves, the middle is
  dropped (a transaction over thousands of partitions prints them all; the parsed fields are at the
  head and the tail), and it is counted; memory stays within about twice the limit.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

from exporter.broker_log.gaps import gaps
from exporter.broker_log.parser import BrokerLogEvent, BrokerLogParser
from exporter.contracts.events import BrokerLogStats, CoordinatorLogAtDebug, TransitionAppended

log = logging.getLogger(__name__)

DEFAULT_MAX_LINE_BYTES = 64 * 1024
_FINGERPRINT_BYTES = 64
# How far back from its end a log started at its end is looked at for the coordinator's `succeeded`
# lines (the logger at DEBUG): a few hundred of them, only once.
LOOK_BACK_BYTES = 64 * 1024
_ELISION = b" ... "
_COMPRESSED = (".gz", ".bz2", ".xz", ".zst", ".zip", ".lz4")

Event = BrokerLogEvent | BrokerLogStats | CoordinatorLogAtDebug
Identity = tuple[int, int]  # (st_dev, st_ino)


class _Source(NamedTuple):
    """A file to read from `start` to its end during a rotation."""

    fd: int
    start: int
    head: bytes  # its first bytes: the time of its first line orders it
    mtime_ns: int
    name: str


class BrokerLogFollower:
    def __init__(
        self,
        path: str | Path,
        *,
        from_start: bool = False,
        max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if max_line_bytes < 2 * _FINGERPRINT_BYTES:
            raise ValueError(f"max_line_bytes must be at least {2 * _FINGERPRINT_BYTES}")
        self.path = Path(path)
        self._max = max_line_bytes
        self._half = max_line_bytes // 2
        self._parser = BrokerLogParser()
        self._clock = clock
        self._fd: int | None = None
        self._identity: Identity | None = None  # of the open file
        self._position = 0  # bytes consumed from the open file, the partial line included
        # The first and the last bytes consumed, to recognise the file (copytruncate).
        self._head = b""
        self._fingerprint = b""
        # (size, mtime) of the open file while nothing of it is consumed: a change means a look for copies.
        self._unread_signature: tuple[int, int] | None = None
        # Rotated siblings already accounted for: identity -> (size, first bytes) when last listed.
        self._rotated: dict[Identity, tuple[int, bytes]] = {}
        self._partial = b""  # an incomplete line (or, once cut, its head)
        self._cut_tail: bytes | None = None  # the tail of an over-long incomplete line
        self._skip_fragment = False  # started mid-line at the end: drop up to the first newline
        self._stats = BrokerLogStats()
        self._warned: set[str] = set()  # gaps of the log already warned about (exporter.broker_log.gaps)
        self._offset_told: int | None = None  # the UTC offset of its times last logged
        self._at_debug_before = False  # `succeeded` lines before the end it started at: said at the first poll
        try:
            self._rotated = {identity: (stat.st_size, _head_of(path)) for identity, path, stat in self._siblings()}
            fd = self._open()
        except OSError as e:  # unreadable for now: poll() retries, and reports
            log.warning("cannot open broker log %s: %s", self.path, e)
        else:
            if fd is not None:
                self._follow(fd, at_end=not from_start)
                self._at_debug_before = not from_start and _succeeded_before(fd, self._position, clock)

    # --- API ---

    def poll(self) -> list[Event]:
        lines: list[bytes] = []
        self._read(lines)
        parser = self._parser
        before = (parser.lines, parser.malformed, parser.unrecognized, parser.unplaced)
        events: list[Event] = list(parser.feed(lines, int(self._clock() * 1000)))
        stats = self._stats
        stats.lines += parser.lines - before[0]
        stats.malformed += parser.malformed - before[1]
        stats.unrecognized += parser.unrecognized - before[2]
        stats.unplaced += parser.unplaced - before[3]
        for key, message in gaps(parser, self._warned):
            self._warned.add(key)
            log.warning("broker log %s: %s", self.path, message)
        offset = parser.times.offset_ms
        if offset != self._offset_told and offset is not None:
            log.info("broker log %s: its times are UTC%s (learned from its `succeeded` lines)", self.path, _utc(offset))
            self._offset_told = offset
        if self._at_debug_before:
            events.append(CoordinatorLogAtDebug(int(self._clock() * 1000)))
            self._at_debug_before = False
        if stats.lines or stats.rotations or stats.truncated:
            stats.utc_offset_ms = offset
            events.append(stats)
            self._stats = BrokerLogStats()
        return events

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    # --- Following the file and its rotations ---

    def _read(self, lines: list[bytes]) -> None:
        fd = self._fd
        if fd is None:
            new = self._open()
            if new is not None:  # appeared: files rotated away before it come first
                self._rotate(lines, new, renamed=False, truncated=False)
            return
        try:
            stat = os.stat(self.path)
        except FileNotFoundError:
            stat = None  # renamed away, the new file not created yet: keep reading the old one
        renamed = stat is not None and (stat.st_dev, stat.st_ino) != self._identity
        truncated = self._truncated(fd)
        # A missing path: the open file was renamed, its successor not created yet. It is read on (the
        # writer may not have reopened yet); files rotated after it, once the path names a file again.
        if not (renamed or truncated or self._unread_changed(fd)):
            self._drain(fd, lines)
            return
        new = self._open() if renamed else None
        self._rotate(lines, new, renamed, truncated)

    def _rotate(self, lines: list[bytes], new: int | None, renamed: bool, truncated: bool) -> None:
        """Reads, in order: the rest of the open file (or of its copy, if it was truncated), the files
        rotated since the last listing, the open file from its beginning if nothing of it was read or it
        was truncated (ordered among them), then the file now at the path (`new`) from its beginning."""
        old = self._fd
        position = self._position if old is not None else 0
        try:
            copy, rotated = self._rotations(new if new is not None else old, position, truncated)
        except BaseException:
            if new is not None:
                os.close(new)
            raise
        try:
            self._count_and_log(renamed, truncated, copy, len(rotated))
            if old is not None:
                head, stat = os.pread(old, _FINGERPRINT_BYTES, 0), os.fstat(old)
                if renamed and self._identity is not None:  # now one of the rotated files (open, so known)
                    self._rotated[self._identity] = (stat.st_size, head)
                if truncated or not position:  # its earlier lines may be in copies of it
                    rotated.append(_Source(old, 0, head, stat.st_mtime_ns, ""))
                else:
                    self._drain(old, lines)  # its rest, written before anything rotated after it
            if copy is not None and copy.fd >= 0:
                os.lseek(copy.fd, copy.start, os.SEEK_SET)
                self._drain(copy.fd, lines, seek=False)
            self._flush_partial(lines)  # the old file's last line ends where the old file ends
            ordered = _oldest_first(rotated)
            for n, source in enumerate(ordered, 1):
                if source.fd == old:  # read as the followed file, which it stays unless renamed
                    self._follow(old, at_end=False)
                    self._drain(old, lines)
                    if new is None and n == len(ordered):
                        continue  # still written to: its last line may not be complete yet
                else:
                    os.lseek(source.fd, source.start, os.SEEK_SET)
                    self._drain(source.fd, lines, seek=False)
                self._flush_partial(lines)
        finally:
            for held in (copy, *rotated):
                if held is not None and held.fd >= 0 and held.fd != old:
                    os.close(held.fd)
        if new is not None:
            self.close()
            self._follow(new, at_end=False)
            self._drain(new, lines)

    def _rotations(self, live: int | None, position: int, truncated: bool) -> tuple[_Source | None, list[_Source]]:
        """Lists the siblings: the copy of the open file's consumed bytes if it was truncated (fd -1 when
        the copy holds nothing unread), and the files rotated since the last listing. Remembers them."""
        copy: _Source | None = None
        rotated: list[_Source] = []
        remembered: dict[Identity, tuple[int, bytes]] = {}
        try:
            for identity, path, stat in self._siblings():
                if identity == self._identity:
                    continue  # the open file, renamed: read through its descriptor
                known = self._rotated.get(identity)
                if not stat.st_size:
                    continue  # nothing to read (yet: a copy just begun is empty)
                if known is not None and known[0] == stat.st_size:
                    remembered[identity] = known
                    continue
                try:
                    fd = os.open(path, os.O_RDONLY)
                except OSError:
                    continue
                keep = False
                try:
                    head = os.pread(fd, _FINGERPRINT_BYTES, 0)
                    source = _Source(fd, 0, head, stat.st_mtime_ns, path.name)
                    if known is not None and known[1] == head:
                        pass  # seen before and grown since (a writer that had not reopened): not a rotation
                    elif position and head and head == self._head[: len(head)]:  # a copy of what we read
                        if truncated and copy is None:
                            keep = stat.st_size >= position and self._same_bytes(fd)
                            copy = source._replace(start=position) if keep else source._replace(fd=-1)
                    elif live is not None and _is_prefix(fd, stat.st_size, live):
                        continue  # a copy of the live file still being made (or not truncated yet): later
                    else:
                        rotated.append(source)
                        keep = True
                    remembered[identity] = (stat.st_size, head)
                finally:
                    if not keep:
                        os.close(fd)
        except BaseException:
            for held in (copy, *rotated):
                if held is not None and held.fd >= 0:
                    os.close(held.fd)
            raise
        self._rotated = remembered
        return copy, rotated

    def _count_and_log(self, renamed: bool, truncated: bool, copy: _Source | None, rotated: int) -> None:
        self._stats.rotations += renamed + truncated + rotated
        if truncated:
            log.info(
                "%s was truncated (copytruncate): reading the rest from its copy, then it from its beginning", self.path
            )
            if copy is None:
                log.warning(
                    "%s was truncated, and no copy of it was found beside it: lines written between the "
                    "last read and the truncation are lost",
                    self.path,
                )
        if renamed:
            log.info("%s was rotated (renamed): following the new file", self.path)
        if rotated:
            log.info("%s: reading %d file(s) rotated since the last read", self.path, rotated)

    def _open(self) -> int | None:
        try:
            return os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            return None

    def _follow(self, fd: int, *, at_end: bool) -> None:
        """Makes `fd` the open file, at its end or its beginning."""
        if self._fd is not None and self._fd != fd:
            os.close(self._fd)
        stat = os.fstat(fd)
        self._fd, self._identity = fd, (stat.st_dev, stat.st_ino)
        self._position, self._head, self._fingerprint = 0, b"", b""
        self._unread_signature = (stat.st_size, stat.st_mtime_ns)
        if at_end and stat.st_size:
            self._position = stat.st_size
            self._head = os.pread(fd, _FINGERPRINT_BYTES, 0)
            self._fingerprint = os.pread(fd, _FINGERPRINT_BYTES, max(0, stat.st_size - _FINGERPRINT_BYTES))
            self._skip_fragment = not self._fingerprint.endswith(b"\n")

    def _siblings(self) -> list[tuple[Identity, Path, os.stat_result]]:
        """Files beside the followed one whose names extend its name, i.e. its rotations."""
        name = self.path.name
        found: list[tuple[Identity, Path, os.stat_result]] = []
        try:
            entries = os.scandir(self.path.parent)
        except FileNotFoundError:  # the broker has not created its log directory yet
            return found
        with entries:
            for entry in entries:
                if len(entry.name) > len(name) and entry.name.startswith(name) and not entry.name.endswith(_COMPRESSED):
                    try:
                        if entry.is_file():
                            stat = entry.stat()
                            found.append(((stat.st_dev, stat.st_ino), Path(entry.path), stat))
                    except OSError:
                        continue
        return found

    def _truncated(self, fd: int) -> bool:
        size = os.fstat(fd).st_size
        if size < self._position:
            return True
        return bool(self._position) and not self._same_bytes(fd)

    def _unread_changed(self, fd: int) -> bool:
        """Whether the open file, of which nothing was consumed yet, changed since the last look (it may
        have been written, copied and truncated in between: its copy holds the first lines)."""
        if self._position:
            return False
        stat = os.fstat(fd)
        signature = (stat.st_size, stat.st_mtime_ns)
        changed, self._unread_signature = signature != self._unread_signature, signature
        return changed

    def _same_bytes(self, fd: int) -> bool:
        """Whether the file behind `fd` holds the first and last bytes consumed where they were read.
        (Log lines end alike, with their logger's name, but start with a timestamp.)"""
        head, tail = self._head, self._fingerprint
        return os.pread(fd, len(head), 0) == head and os.pread(fd, len(tail), self._position - len(tail)) == tail

    # --- Reading bytes into lines ---

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
        """A file ended without a newline: its last line is complete nonetheless."""
        if self._partial or self._cut_tail is not None:
            line = self._complete(b"")
            if self._skip_fragment:
                self._skip_fragment = False
            else:
                lines.append(line)


def _utc(offset_ms: int) -> str:
    """`+05:30`, `-03:00`, `+00:00`."""
    minutes = abs(offset_ms) // 60_000
    return f"{'-' if offset_ms < 0 else '+'}{minutes // 60:02d}:{minutes % 60:02d}"


def _head_of(path: Path) -> bytes:
    try:
        with path.open("rb") as f:
            return f.read(_FINGERPRINT_BYTES)
    except OSError:
        return b""


def _is_prefix(fd: int, size: int, live: int) -> bool:
    """Whether the file behind `fd` (`size` bytes) starts the live file: a copy still being made, or
    made and not truncated yet. (Compared at its first and last bytes.)"""
    if not size or size > os.fstat(live).st_size:
        return False
    tail_at = max(0, size - _FINGERPRINT_BYTES)
    return os.pread(fd, _FINGERPRINT_BYTES, 0) == os.pread(live, _FINGERPRINT_BYTES, 0) and os.pread(
        fd, _FINGERPRINT_BYTES, tail_at
    ) == os.pread(live, size - tail_at, tail_at)


def _oldest_first(sources: list[_Source]) -> list[_Source]:
    """By the time that starts the first line (`[YYYY-MM-DD HH:MM:SS,mmm]`, which sorts as text) when
    every file starts with one, else by modification time (coarse: files rotated in a burst may tie),
    then name."""
    times = [s.head[1 : s.head.find(b"]")] if s.head[:1] == b"[" and b"]" in s.head else None for s in sources]
    if None in times:
        return sorted(sources, key=lambda s: (s.mtime_ns, s.name))
    return [s for _, s in sorted(zip(times, sources), key=lambda pair: (pair[0], pair[1].mtime_ns, pair[1].name))]


def _succeeded_before(fd: int, end: int, clock: Callable[[], float]) -> bool:
    """Whether the last LOOK_BACK_BYTES before `end` hold a `succeeded` line of the coordinator's (its
    first, partial line dropped), read by a parser of their own: nothing in them is counted."""
    if not end:
        return False
    start = max(0, end - LOOK_BACK_BYTES)
    lines = os.pread(fd, end - start, start).split(b"\n")
    lines = lines[1:] if start else lines
    parser = BrokerLogParser()
    found = any(type(event) is TransitionAppended for event in parser.feed(lines, int(clock() * 1000)))
    return found or parser.unplaced > 0

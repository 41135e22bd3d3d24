"""Segment files of `__transaction_state` on disk (a broker's log dir, or a copy of one).

A live broker's segments may shrink or go while they are read (truncated, cleaned, deleted): they
are read with pread in pieces, never mapped, so that is an error of that file (SegmentShrank, or the
OSError of a file gone before it was opened; one deleted once open is read whole, as Linux keeps it).
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TypeVar, overload

from exporter.codec.partitions import PartitionsMemo
from exporter.codec.record import TransactionLogRecord
from exporter.codec.record_batch import BatchError, Decoded, RecordError, RecordMaker, decode_pieces
from exporter.codec.value import Partitions, PartitionsField, ValueMaker, value_from_fields

_M = TypeVar("_M")
_V = TypeVar("_V")
_R = TypeVar("_R")

_PARTITION_DIR = re.compile(r"^__transaction_state-(\d+)$")


class NotARegularFile(OSError):
    """A path naming a FIFO, a device, a socket...: never a segment, and reading it could block
    forever (a FIFO) or never end (/dev/zero)."""


def check_regular(path: Path) -> None:
    """Raises NotARegularFile for an existing path that is not a regular file (FileNotFoundError
    and other OSErrors pass through, for the reader to report)."""
    mode = os.stat(path).st_mode
    if not stat.S_ISREG(mode):
        raise NotARegularFile(f"{path}: not a regular file ({_kind(mode)}), so not a segment")


class SegmentShrank(OSError):
    """The file got shorter while it was read: its broker truncated it (a follower's truncation, a
    segment it recovered) or replaced it. What was read before is decoded; the rest is not."""


class _SegmentFile:
    """A segment file read in pieces (exporter.codec.record_batch.PieceReader), with pread: a file
    that shrinks meanwhile is a SegmentShrank, never a fault (a mapped file truncated under its map
    kills the process with SIGBUS)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.size = 0
        self._fd = -1

    def __enter__(self) -> _SegmentFile:
        # Non-blocking, so a FIFO that replaced the file after check_regular cannot hang the open.
        self._fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK)
        try:
            st = os.fstat(self._fd)
            if not stat.S_ISREG(st.st_mode):
                raise NotARegularFile(f"{self.path}: not a regular file ({_kind(st.st_mode)}), so not a segment")
            self.size = st.st_size  # taken once: bytes appended afterwards are not read
            os.posix_fadvise(self._fd, 0, 0, os.POSIX_FADV_SEQUENTIAL)  # read once, front to back
        except BaseException:
            os.close(self._fd)
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        os.close(self._fd)

    def read(self, position: int, n: int) -> bytes:
        data = os.pread(self._fd, n, position)
        while len(data) < n:  # at the end of the file: it shrank since it was opened
            more = os.pread(self._fd, n - len(data), position + len(data))
            if not more:
                now = os.fstat(self._fd).st_size
                raise SegmentShrank(
                    f"{self.path}: truncated to {now} bytes while being read (it had {self.size}): what it "
                    f"held from byte {position} on is not decoded (its broker truncated or replaced it)"
                )
            data += more
        return data


@overload
def read_segment(path: Path, partitions: bool = True) -> Iterator[Decoded]: ...
@overload
def read_segment(
    path: Path, partitions: bool, make_record: RecordMaker[_V, _R], make_value: ValueMaker[PartitionsField, _V]
) -> Iterator[_R | RecordError | BatchError]: ...
@overload
def read_segment(
    path: Path,
    partitions: PartitionsMemo[_M],
    make_record: RecordMaker[_V, _R],
    make_value: ValueMaker[Partitions | _M | None, _V],
) -> Iterator[_R | RecordError | BatchError]: ...
def read_segment(
    path: Path,
    partitions: bool | PartitionsMemo[Any] = True,
    make_record: RecordMaker[Any, object] = TransactionLogRecord,
    make_value: ValueMaker[Any, object] = value_from_fields,
) -> Iterator[object]:
    """Decodes one segment file (the options are decode_batches'), read in pieces, in flat memory.
    Raises NotARegularFile, OSError if it cannot be read, or SegmentShrank if it shrinks meanwhile
    (after the records read before); bad bytes come as errors."""
    return decode_pieces(_SegmentFile(path), partitions, make_record, make_value)


def partition_of(path: Path) -> int | None:
    """The `__transaction_state` partition a segment belongs to, from its directory name."""
    match = _PARTITION_DIR.match(path.resolve().parent.name)
    return int(match.group(1)) if match else None


def segments_in(log_dir: Path) -> list[Path]:
    """Every `__transaction_state-N/*.log` under a log dir, by partition then base offset."""
    found = [p for p in log_dir.glob("__transaction_state-*/*.log") if partition_of(p) is not None]
    return sorted(found, key=lambda p: (partition_of(p), p.name))


def _kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISDIR, "a directory"),
    ):
        if test(mode):
            return name
    return "unknown type"

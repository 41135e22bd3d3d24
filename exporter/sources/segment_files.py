"""Segment files of `__transaction_state` on disk (a broker's log dir, or a copy of one)."""

from __future__ import annotations

import mmap
import os
import re
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from inspect import GEN_CLOSED, getgeneratorstate
from itertools import islice
from pathlib import Path
from typing import Any, TypeVar, overload

from exporter.codec.record_batch import BatchError, Decoded, RecordError, RecordMaker, decode_batches
from exporter.codec.transaction_log import (
    Partitions,
    PartitionsField,
    PartitionsMemo,
    TransactionLogRecord,
    TransactionLogValue,
    ValueMaker,
)

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


@contextmanager
def mapped(path: Path) -> Iterator[bytes | mmap.mmap]:
    """The file's bytes, mapped read-only rather than read: memory stays flat whatever its size
    (the kernel pages it in and out). Raises NotARegularFile, or OSError if it cannot be read.

    Opened non-blocking, so a FIFO that replaced the file after check_regular cannot hang the open.
    The size is taken once: bytes appended afterwards are not seen. (A segment truncated by its
    broker while it is mapped would fault on the lost pages: decode copies of live segments.)"""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise NotARegularFile(f"{path}: not a regular file ({_kind(st.st_mode)}), so not a segment")
        if st.st_size == 0:
            yield b""  # mmap refuses empty files
            return
        with mmap.mmap(fd, 0, access=mmap.ACCESS_READ) as data:
            data.madvise(mmap.MADV_SEQUENTIAL)  # read once, front to back
            yield data
    finally:
        os.close(fd)


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
    make_value: ValueMaker[Any, object] = TransactionLogValue,
) -> Iterator[object]:
    """Decodes one segment file (the options are decode_batches'). Raises NotARegularFile or OSError
    if it cannot be read; bad bytes come as errors.

    The pages read are dropped from the process every _RELEASE_EVERY items (they stay in the page
    cache): else a mapped file's pages count in the process's resident memory until it ends."""
    with mapped(path) as data:
        items = decode_batches(data, partitions, make_record, make_value)
        if isinstance(data, bytes):
            yield from items
            return
        while getgeneratorstate(items) != GEN_CLOSED:
            yield from islice(items, _RELEASE_EVERY)
            data.madvise(mmap.MADV_DONTNEED)


_RELEASE_EVERY = 1 << 16  # records: about 10 MiB of a segment


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

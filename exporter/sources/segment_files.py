"""Segment files of `__transaction_state` on disk (a broker's log dir, or a copy of one)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

from exporter.codec.record_batch import Decoded, decode_batches

_PARTITION_DIR = re.compile(r"^__transaction_state-(\d+)$")


def read_segment(path: Path) -> Iterator[Decoded]:
    """Decodes one segment file. Raises OSError if it cannot be read; bad bytes come as errors.

    A segment is at most `segment.bytes` (100 MiB by default for this topic), so it is read whole:
    one system call, then decoding runs over a bytes object at memory speed.
    """
    yield from decode_batches(path.read_bytes())


def partition_of(path: Path) -> int | None:
    """The `__transaction_state` partition a segment belongs to, from its directory name."""
    match = _PARTITION_DIR.match(path.resolve().parent.name)
    return int(match.group(1)) if match else None


def segments_in(log_dir: Path) -> list[Path]:
    """Every `__transaction_state-N/*.log` under a log dir, by partition then base offset."""
    found = [p for p in log_dir.glob("__transaction_state-*/*.log") if partition_of(p) is not None]
    return sorted(found, key=lambda p: (partition_of(p), p.name))

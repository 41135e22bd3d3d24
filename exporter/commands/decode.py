"""`txn-exporter decode FILE...`: segment files to one JSON object per line.

The output is a public contract (field names and order):
  {"offset", "timestamp_ms", "transactional_id", "value"}   value: null for a tombstone, else
  {"version", "producer_id", "producer_epoch", "transaction_timeout_ms", "state", "partitions",
   "last_update_timestamp_ms", "start_timestamp_ms", "previous_producer_id", "next_producer_id",
   "client_transaction_version", "next_producer_epoch"}
  {"offset", "error"} for an undecodable record, {"position", "error"} for an undecodable batch.
When several files are decoded (a directory, or more than one FILE), every line ends with
"partition" (the __transaction_state partition, from the directory name; null if none) and "file",
as grep names the file of each line only when given several.
Exit status 1 if any error was met (bad bytes, a file that is not a segment, an unreadable file),
2 if a path is not a regular file (nothing is decoded then), else 0.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from itertools import chain
from json.encoder import encode_basestring as _json_str
from pathlib import Path
from typing import TextIO

from exporter.codec import TransactionLogRecord, TransactionState
from exporter.codec.record_batch import BatchError, RecordError
from exporter.sources.segment_files import NotARegularFile, check_regular, partition_of, read_segment, segments_in

_PROG = "txn-exporter decode"


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "decode",
        help="decode __transaction_state segment files to JSON lines",
        description="Decode __transaction_state segment files (or log dirs holding them) to one JSON "
        "object per record. Exit status 1 if any record, batch or file could not be decoded.",
    )
    parser.add_argument(
        "files", nargs="+", type=Path, metavar="FILE",
        help="a segment file (NNN.log), a __transaction_state-N directory, or a broker log dir",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    paths = _expand(args.files)
    named = len(args.files) > 1 or any(path.is_dir() for path in args.files)
    for path in paths:
        try:
            check_regular(path)
        except NotARegularFile as e:
            print(f"{_PROG}: {e}", file=sys.stderr)
            return 2
        except OSError:
            pass  # a missing or unreadable file is reported when it is read, and the others decoded
    out = sys.stdout
    failed = False
    try:
        for path in paths:
            tail = _names(path) if named else ""
            try:
                failed |= decode_file(path, out, tail)
            except BrokenPipeError:
                raise
            except OSError as e:
                print(f"{_PROG}: cannot read {path}: {e.strerror or e}", file=sys.stderr)
                failed = True
        out.flush()
    except BrokenPipeError:
        # The reader went away (`decode DIR | head`): stop quietly, as Unix tools do. What is still
        # buffered goes nowhere instead of raising again at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), out.fileno())
        return 128 + signal.SIGPIPE
    return 1 if failed else 0


def _expand(paths: list[Path]) -> list[Path]:
    expanded: list[Path] = []
    for path in paths:
        if not path.is_dir():
            expanded.append(path)  # a missing file is reported when it is read
        elif path.name.startswith("__transaction_state-"):
            expanded.extend(sorted(path.glob("*.log")))
        else:
            expanded.extend(segments_in(path))
    return expanded


def _names(path: Path) -> str:
    """The fields that end each line of a file when several are decoded."""
    partition = partition_of(path)
    return f', "partition": {"null" if partition is None else partition}, "file": {_json_str(str(path))}'


def decode_file(path: Path, out: TextIO, tail: str = "") -> bool:
    """Writes one line per record or error (each ending with `tail`, see _names); returns True if
    any error was met. A file in which no batch decodes is said not to be a segment, on stderr."""
    failed = False
    lines: list[str] = []
    append = lines.append
    cache: dict = {}
    items = read_segment(path)
    first = next(items, None)
    flushed = False
    for item in chain((first,), items) if first is not None else ():
        if type(item) is TransactionLogRecord:
            append(format_record(item, cache, tail))
        elif type(item) is RecordError:
            failed = True
            append(f'{{"offset": {item.offset}, "error": {_json_str(str(item.error))}{tail}}}\n')
        else:
            assert type(item) is BatchError
            failed = True
            append(f'{{"position": {item.position}, "error": {_json_str(str(item.error))}{tail}}}\n')
        if len(lines) >= _LINES_PER_WRITE:  # a write per line costs as much as formatting half of one
            out.write("".join(lines))
            lines.clear()
            flushed = True
    if type(first) is BatchError and first.position == 0 and len(lines) == 1 and not flushed:
        # Not one batch in the whole file, from its first byte on: a README, an index, a text file.
        print(f"{_PROG}: {path}: not a __transaction_state segment (no record batch in it; {first.error})",
              file=sys.stderr)
        return True
    out.write("".join(lines))
    return failed


_LINES_PER_WRITE = 4096
_STATE_NAMES = {state: state.name for state in TransactionState}


def format_record(record: TransactionLogRecord, cache: dict | None = None, tail: str = "") -> str:
    """One JSON line. Built by hand: json.dumps of a dict per record would halve the throughput.
    `cache` (kept across the records of a file) holds the text of partitions that repeat; `tail`,
    fields to end the object with (see _names)."""
    v = record.value
    if v is None:
        return (
            f'{{"offset": {record.offset}, "timestamp_ms": {record.timestamp_ms}, '
            f'"transactional_id": {_json_str(record.transactional_id)}, "value": null{tail}}}\n'
        )
    p = v.partitions
    if not p:
        partitions = "null" if p is None else "{}"
    elif cache is None:
        partitions = "{" + ", ".join(_entry_json(topic, ids) for topic, ids in p.items()) + "}"
    elif len(p) == 1:
        # One topic: the whole text made once per distinct (topic, ids).
        ((topic, ids),) = p.items()
        key = (topic, *ids)
        partitions = cache.get(key)
        if partitions is None:
            if len(cache) >= _CACHED_PARTITIONS:
                cache.clear()
            partitions = cache[key] = "{" + _entry_json(topic, ids) + "}"
    else:
        # Several topics: each entry's text made once per distinct (topic, ids), under another key
        # than a whole one-topic text (None first).
        entries = []
        for topic, ids in p.items():
            key = (None, topic, *ids)
            text = cache.get(key)
            if text is None:
                if len(cache) >= _CACHED_PARTITIONS:
                    cache.clear()
                text = cache[key] = _entry_json(topic, ids)
            entries.append(text)
        partitions = "{" + ", ".join(entries) + "}"
    return (
        f'{{"offset": {record.offset}, "timestamp_ms": {record.timestamp_ms}, '
        f'"transactional_id": {_json_str(record.transactional_id)}, "value": '
        f'{{"version": {v.version}, "producer_id": {v.producer_id}, "producer_epoch": {v.producer_epoch}, '
        f'"transaction_timeout_ms": {v.transaction_timeout_ms}, "state": "{_STATE_NAMES[v.state]}", "partitions": {partitions}, '
        f'"last_update_timestamp_ms": {v.last_update_timestamp_ms}, "start_timestamp_ms": {v.start_timestamp_ms}, '
        f'"previous_producer_id": {v.previous_producer_id}, "next_producer_id": {v.next_producer_id}, '
        f'"client_transaction_version": {v.client_transaction_version}, "next_producer_epoch": {v.next_producer_epoch}}}{tail}}}\n'
    )


_CACHED_PARTITIONS = 65536


def _entry_json(topic: str, ids: list[int]) -> str:
    return f"{_json_str(topic)}: [{', '.join(map(str, ids))}]"

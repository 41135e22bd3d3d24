"""`txn-exporter decode FILE...`: segment files to one JSON object per line.

The output is a public contract (field names and order):
  {"offset", "timestamp_ms", "transactional_id", "value"}   value: null for a tombstone, else
  {"version", "producer_id", "producer_epoch", "transaction_timeout_ms", "state", "partitions",
   "last_update_timestamp_ms", "start_timestamp_ms", "previous_producer_id", "next_producer_id",
   "client_transaction_version", "next_producer_epoch"}
  {"offset", "error"} for an undecodable record, {"position", "error"} for an undecodable batch.
Exit status 1 if any error was met (bad bytes or an unreadable file), else 0.
"""

from __future__ import annotations

import argparse
import sys
from json.encoder import encode_basestring as _json_str
from pathlib import Path
from typing import TextIO

from exporter.codec import TransactionLogRecord
from exporter.codec.record_batch import BatchError, RecordError
from exporter.sources.segment_files import read_segment, segments_in


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
    out = sys.stdout
    failed = False
    for path in _expand(args.files):
        try:
            failed |= decode_file(path, out)
        except OSError as e:
            print(f"txn-exporter decode: cannot read {path}: {e.strerror or e}", file=sys.stderr)
            failed = True
    out.flush()
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


def decode_file(path: Path, out: TextIO) -> bool:
    """Writes one line per record or error; returns True if any error was met."""
    failed = False
    write = out.write
    for item in read_segment(path):
        if type(item) is TransactionLogRecord:
            write(format_record(item))
        elif type(item) is RecordError:
            failed = True
            write(f'{{"offset": {item.offset}, "error": {_json_str(str(item.error))}}}\n')
        else:
            assert type(item) is BatchError
            failed = True
            write(f'{{"position": {item.position}, "error": {_json_str(str(item.error))}}}\n')
    return failed


def format_record(record: TransactionLogRecord) -> str:
    """One JSON line. Built by hand: json.dumps of a dict per record would halve the throughput."""
    head = f'{{"offset": {record.offset}, "timestamp_ms": {record.timestamp_ms}, "transactional_id": {_json_str(record.transactional_id)}, "value": '
    v = record.value
    if v is None:
        return head + "null}\n"
    if v.partitions is None:
        partitions = "null"
    else:
        partitions = "{" + ", ".join(f"{_json_str(t)}: [{', '.join(map(str, ids))}]" for t, ids in v.partitions.items()) + "}"
    return (
        f'{head}{{"version": {v.version}, "producer_id": {v.producer_id}, "producer_epoch": {v.producer_epoch}, '
        f'"transaction_timeout_ms": {v.transaction_timeout_ms}, "state": "{v.state.name}", "partitions": {partitions}, '
        f'"last_update_timestamp_ms": {v.last_update_timestamp_ms}, "start_timestamp_ms": {v.start_timestamp_ms}, '
        f'"previous_producer_id": {v.previous_producer_id}, "next_producer_id": {v.next_producer_id}, '
        f'"client_transaction_version": {v.client_transaction_version}, "next_producer_epoch": {v.next_producer_epoch}}}}}\n'
    )

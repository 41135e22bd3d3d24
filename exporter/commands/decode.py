"""`txn-exporter decode FILE...`: segment files to one JSON object per line.

The output is a public contract (field names and order):
  {"offset", "timestamp_ms", "transactional_id", "value"}   value: null for a tombstone, else
  {"version", "producer_id", "producer_epoch", "transaction_timeout_ms", "state", "partitions",
   "last_update_timestamp_ms", "start_timestamp_ms", then each tagged field of the codec's table}
  (the codec's VALUE_FIELDS, in order, the tagged ones by tag: docs/commands.md names today's; a
  tagged field added there comes last), then, only in a value carrying tagged fields this decoder
  does not name (a newer Kafka's), "unknown_tagged_fields": [{"tag", "bytes" (hex)}...]
  {"offset", "error"} for an undecodable record, {"position", "error"} for an undecodable batch.
When several files are decoded (a directory, or more than one FILE), every line ends with
"partition" (the __transaction_state partition, from the directory name; null if none) and "file",
as grep names the file of each line only when given several.
Exit status 1 if any error was met (bad bytes, a file that is not a segment, an unreadable file, a
file cut short while it was read: a live broker's, its lines up to there written, then one line on
stderr), 2 if a path is not a regular file (nothing is decoded then), else 0.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from itertools import islice
from json.encoder import encode_basestring as _json_str
from operator import attrgetter
from pathlib import Path
from typing import Any, TextIO

from exporter.codec import PARTITIONS_SKIPPED, TransactionLogRecord, TransactionState
from exporter.codec.partitions import PartitionsMemo
from exporter.codec.record_batch import BatchError, RecordError, RecordMaker
from exporter.codec.value import TAGGED_FIELDS, VALUE_FIELDS, Partitions, ValueMaker
from exporter.sources.segment_files import (
    NotARegularFile,
    SegmentShrank,
    check_regular,
    partition_of,
    read_segment,
    segments_in,
)

_PROG = "txn-exporter decode"


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "decode",
        help="decode __transaction_state segment files to JSON lines",
        description="Decode __transaction_state segment files (or log dirs holding them) to one JSON "
        "object per record. Exit status 1 if any record, batch or file could not be decoded.",
    )
    parser.add_argument(
        "files",
        nargs="+",
        type=Path,
        metavar="FILE",
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
    partitions, make_record, make_value = _line_makers(tail)
    # The codec hands over each record as its JSON line (see _line_makers), errors as objects.
    items = read_segment(path, partitions=partitions, make_record=make_record, make_value=make_value)
    first = True
    shrank = None
    # A write per line costs as much as formatting half of one: one per _LINES_PER_WRITE.
    while True:
        chunk: list[str | RecordError | BatchError] = []
        try:
            chunk.extend(islice(items, _LINES_PER_WRITE))  # (extend keeps what came before an error)
        except SegmentShrank as e:  # a live segment cut short: what was read is written, then said
            shrank = e
        if not chunk:
            break
        try:
            text = "".join(chunk)  # type: ignore[arg-type]  # because an error among the lines raises TypeError, caught here
        except TypeError:  # errors among the lines (rare): no loop over the lines otherwise
            failed = True
            if first and len(chunk) == 1 and type(chunk[0]) is BatchError and chunk[0].position == 0:
                # Not one batch in the whole file, from its first byte on: a README, an index, a text file.
                print(
                    f"{_PROG}: {path}: not a __transaction_state segment (no record batch in it; {chunk[0].error})",
                    file=sys.stderr,
                )
                return True
            text = "".join(item if isinstance(item, str) else _error_line(item, tail) for item in chunk)
        out.write(text)
        first = False
        if shrank is not None:
            break
    if shrank is not None:
        out.flush()  # its lines before the error line
        print(f"{_PROG}: {shrank}", file=sys.stderr)
        return True
    return failed


def _error_line(item: RecordError | BatchError, tail: str) -> str:
    if type(item) is RecordError:
        return f'{{"offset": {item.offset}, "error": {_json_str(str(item.error))}{tail}}}\n'
    return f'{{"position": {item.position}, "error": {_json_str(str(item.error))}{tail}}}\n'


_LINES_PER_WRITE = 4096
_PREVIOUS_PRODUCER_ID_DEFAULT = TAGGED_FIELDS[0].default  # (the codec checks it is PreviousProducerId's)
# The state's JSON string, by state.
_STATE_JSON = {state: f'"{state.name}"' for state in TransactionState}
# A value's fields in the codec's order (what make_value is called with), unknown tagged fields last.
_VALUE_FIELDS = attrgetter(*(f.name for f in VALUE_FIELDS), "unknown_tagged_fields")


def tagged_json(others: tuple[object, ...]) -> str:
    """The end of a value's JSON after its first tagged field (PreviousProducerId, which make_value
    writes itself): the other tagged fields of the codec's table in its order, at their defaults when
    not in `others` (what the codec passed after the first: a prefix of them, maybe then the unknown
    ones), then "unknown_tagged_fields" if any, and the closing brace."""
    rest = TAGGED_FIELDS[1:]
    known, unknown = others[: len(rest)], others[len(rest)] if len(others) > len(rest) else ()
    text = "".join(f', "{f.name}": {v}' for f, v in zip(rest, (*known, *(f.default for f in rest[len(known) :]))))
    if unknown:  # (rare: a newer Kafka's tagged fields)
        shown = ", ".join(f'{{"tag": {tag}, "bytes": "{raw.hex()}"}}' for tag, raw in unknown)  # type: ignore[attr-defined]
        text += f', "unknown_tagged_fields": [{shown}]'
    return text + "}"


def format_record(record: TransactionLogRecord, tail: str = "") -> str:
    """The JSON line decode_file writes for `record` (`tail`: see _names)."""
    _, make_record, make_value = _line_makers(tail)
    v = record.value
    value = None
    if v is not None:
        partitions = v.partitions
        if partitions is PARTITIONS_SKIPPED:  # (it failed on them further on, less plainly)
            raise TypeError("cannot format a record decoded without its partitions (PARTITIONS_SKIPPED)")
        value = make_value(*_VALUE_FIELDS(v))
    return make_record(record.offset, record.timestamp_ms, record.transactional_id, value)


def partitions_json(partitions: Partitions | None) -> str:
    """A partitions array's JSON: {topic: [ids]} in the coordinator's order, or null."""
    if partitions is None:
        return "null"
    return (
        "{"
        + ", ".join([f"{_json_str(topic)}: [{', '.join(map(str, ids))}]" for topic, ids in partitions.items()])
        + "}"
    )


def _line_makers(
    tail: str,
) -> tuple[PartitionsMemo[str], RecordMaker[str, str], ValueMaker[Partitions | str | None, str]]:
    """The codec's partitions, make_record and make_value (see decode_batches) for lines ending
    with `tail`: each record's JSON line straight from its parsed fields, with no object in between.
    Built by hand: json.dumps of a dict per record would halve the throughput.

    Two caches: the text of each distinct partitions array, made once while the codec's memo holds it
    (PartitionsMemo), and the text around the fields that take few values, made once per distinct set
    of them. Kept: without either, decode takes 12% or 34% more CPU time, below 2x DumpLogSegments'
    (docs/benchmarks.md#decode-txn-exporter-decode-against-dumplogsegments)."""
    few_values: dict[tuple[int, int, int, TransactionState, tuple[Any, ...]], tuple[str, str, str]] = {}

    def make_value(
        version: int,
        producer_id: int,
        producer_epoch: int,
        transaction_timeout_ms: int,
        state: TransactionState,
        partitions: Partitions | str | None,
        last_update_timestamp_ms: int,
        start_timestamp_ms: int,
        previous_producer_id: int = _PREVIOUS_PRODUCER_ID_DEFAULT,
        *others: Any,
    ) -> str:
        # (The codec's tagged fields in VALUE_FIELDS' order, a prefix of them, maybe then the
        # unknown ones: see ValueMaker; the first is PreviousProducerId.) The fields that take few
        # values are looked up, as three fragments of text, by their values: all but the producer
        # id, the timestamps and PreviousProducerId (usually the producer id).
        key = (version, producer_epoch, transaction_timeout_ms, state, others)
        fragments = few_values.get(key)
        if fragments is None:
            if len(few_values) >= _CACHED_FRAGMENTS:
                few_values.clear()
            fragments = few_values[key] = (
                f'{{"version": {version}, "producer_id": ',
                f', "producer_epoch": {producer_epoch}, "transaction_timeout_ms": {transaction_timeout_ms}, '
                f'"state": {_STATE_JSON[state]}, "partitions": ',
                tagged_json(others),
            )
        lead, middle, end = fragments
        if type(partitions) is not str:  # else the codec's memo made it
            # (`type() is not str`, cheaper than isinstance here, does not narrow the type for mypy.)
            partitions = partitions_json(partitions)  # type: ignore[arg-type]
        return (
            f'{lead}{producer_id}{middle}{partitions}, "last_update_timestamp_ms": {last_update_timestamp_ms}, '
            f'"start_timestamp_ms": {start_timestamp_ms}, "previous_producer_id": {previous_producer_id}{end}'
        )

    def make_record(offset: int, timestamp_ms: int, transactional_id: str, value: str | None) -> str:
        return (
            f'{{"offset": {offset}, "timestamp_ms": {timestamp_ms}, '
            f'"transactional_id": {_json_str(transactional_id)}, '
            f'"value": {"null" if value is None else value}{tail}}}\n'
        )

    return PartitionsMemo(partitions_json, _CACHED_ARRAYS), make_record, make_value


_CACHED_ARRAYS = 16384  # a few MiB of keys and text; 4x that saves ~0.5% of the time for 4x the memory
_CACHED_FRAGMENTS = 16384

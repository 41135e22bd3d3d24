"""What the application tests (test_streams_eos.py, test_consume_transform_produce.py) hold the
exporter to: DumpLogSegments' records once every transaction has settled, and the lifecycles the
Spark pipeline computes from a broker's `__transaction_state` segment files, through the functions
its Spark stages run (exporter.pipeline.decode's decode_segment_files, then exporter.pipeline.
lifecycles' lifecycles_of_sorted on the transitions sorted as tables.lifecycles sorts them) in this
process: no Spark session (tens of seconds each) for a few hundred transactions."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from txn_workshop.harness.broker import KafkaBroker
from txn_workshop.harness.transaction_log_dump import DumpedRecord

CLUSTER = "it"
_SETTLED = {"EMPTY", "COMPLETE_COMMIT", "COMPLETE_ABORT", None}


def settled_records(broker: KafkaBroker, keep: Callable[[str], bool], timeout: float = 30) -> list[DumpedRecord]:
    """DumpLogSegments' records of the ids ``keep`` accepts, once the last record of each is settled
    (EMPTY, COMPLETE_*): a client's commit or abort returns once its PREPARE_* is written, the markers
    and the COMPLETE_* follow."""
    deadline = time.monotonic() + timeout
    while True:
        records = [r for r in broker.transaction_log_records() if keep(r.transactional_id)]
        last = {r.transactional_id: r.state for r in records}
        unsettled = {tid: state for tid, state in last.items() if state not in _SETTLED}
        if not unsettled:
            return records
        assert time.monotonic() < deadline, f"transactions not settled: {unsettled}"
        time.sleep(0.5)


def segment_lifecycles(segments: list[Path]) -> list[dict]:
    """One dict per transaction (the pipeline's lifecycles table's columns), open ones included."""
    # The spark extra's pyarrow, imported here: make check's setup has none, and collects the modules
    # that import this one (their tests need a broker: not run there).
    import pyarrow as pa
    import pyarrow.compute as pc

    from exporter.pipeline.decode import TRANSITIONS_SCHEMA, decode_segment_files, partition_of_path
    from exporter.pipeline.lifecycles import INPUT_COLUMNS, lifecycles_of_sorted

    files = pa.RecordBatch.from_pydict(
        {
            "cluster": [CLUSTER] * len(segments),
            "path": [str(p) for p in segments],
            "partition": [partition_of_path(str(p)) for p in segments],
        }
    )
    transitions = pa.Table.from_batches(list(decode_segment_files([files])), TRANSITIONS_SCHEMA)
    rows = transitions.filter(pc.and_(pc.is_null(transitions["error"]), pc.is_valid(transitions["transactional_id"])))
    ordered = rows.select(list(INPUT_COLUMNS)).sort_by(
        [
            ("cluster", "ascending"),
            ("transactional_id", "ascending"),
            ("partition", "ascending"),
            ("offset", "ascending"),
        ]
    )
    return [row for batch in lifecycles_of_sorted(ordered.to_batches()) for row in batch.to_pylist()]

"""Each step of the pipeline (build, report, backfill, stream) on data with none of a kind: the most
common input (a healthy cluster: no late or hanging transaction, no abort, no timeout) and the
emptier ones (nothing completed or prepared, no transaction at all, no record at all). Every table
is written and read with its schema, empty or not; the report says in words what there is none of.
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("pyspark")  # the spark extra, which make check's setup leaves out

from exporter.pipeline import stream, tables
from exporter.pipeline.backfill import write_openmetrics
from exporter.pipeline.report import write_report
from exporter.pipeline.sources import segment_input
from tests.pipeline.builders import Log, S

pytestmark = pytest.mark.spark
T0 = 1_795_000_000_000  # a fixed instant (epoch ms), so every run builds the same logs


def _healthy(log: Log) -> None:
    """Commits only, markers written within 100 ms: no late, hanging, aborted, timed-out or open."""
    log.add("ok", T0, S.EMPTY)
    for i in range(4):
        log.transaction("ok", T0 + 1_000 + i * 10_000, T0 + 1_050 + i * 10_000, T0 + 1_100 + i * 10_000)


def _only_open(log: Log) -> None:
    """Transactions begun and still ONGOING, within their timeout: nothing completed or prepared."""
    log.add("a", T0, S.EMPTY)
    log.add("a", T0 + 1_000, S.ONGOING, partitions={"orders": [0]}, start=T0 + 1_000)
    log.add("b", T0 + 2_000, S.ONGOING, pid=2, partitions={"orders": [1]}, start=T0 + 2_000)


def _no_transactions(log: Log) -> None:
    """Producer ids given out (EMPTY) and a tombstone: records, but no transaction."""
    log.add("a", T0, S.EMPTY)
    log.add("b", T0 + 1_000, S.EMPTY, pid=2)
    log.add("b", T0 + 2_000, None)


def _no_records(log: Log) -> None:
    """An empty segment (a partition's first, active segment before any write)."""


SCENARIOS = {
    "healthy": _healthy,
    "only_open": _only_open,
    "no_transactions": _no_transactions,
    "no_records": _no_records,
}
# What each report must say in words (and what tables are empty).
WORDS = {
    "healthy": [
        "No transaction was aborted.",
        "No transaction timed out.",
        "No late or hanging transactions",
        "No transactional id had an abort or a timeout",
    ],
    "only_open": ["No transaction completed", "No transaction was prepared", "No late or hanging transactions"],
    "no_transactions": [
        "No transactions in the records read",
        "No transaction completed",
        "No transaction was prepared",
        "No late or hanging transactions",
        "No transactional ids",
    ],
    "no_records": [
        "No records were read",
        "No transaction completed",
        "No transaction was prepared",
        "No late or hanging transactions",
        "No transactional ids",
    ],
}
EMPTY = {
    "healthy": {"candidates"},
    "only_open": {"pending_history", "candidates"},
    "no_transactions": {"lifecycles", "pending_history", "candidates", "transactional_ids"},
    "no_records": set(tables.COLUMNS),
}


def _segments(root: Path, name: str) -> Path:
    log = Log(0)
    SCENARIOS[name](log)
    log.write(root / name)
    return root / name


@pytest.fixture(scope="module")
def segments(tmp_path_factory):
    root = tmp_path_factory.mktemp("none-of-a-kind")
    return {name: _segments(root, name) for name in SCENARIOS}


@pytest.fixture(scope="module")
def built(spark, segments, tmp_path_factory):
    outs = {}
    for name, path in segments.items():
        out = str(tmp_path_factory.mktemp(f"built-{name}"))
        tables.build(spark, [], [segment_input("c", str(path))], out)
        outs[name] = out
    return outs


@pytest.fixture(scope="module")
def streamed(spark, segments, tmp_path_factory):
    """The stream's micro-batch step and its end on the same records, in two micro-batches."""
    outs = {}
    for name, path in segments.items():
        out = str(tmp_path_factory.mktemp(f"streamed-{name}"))
        Path(out, "stream").mkdir()
        store = stream.StreamState(out)
        decoded = tables.decode_segments(spark, [segment_input("c", str(path))]).persist()
        for batch_id, where in enumerate(["offset < 2", "offset >= 2"]):
            stream.process_batch(spark, store, decoded.where(where), batch_id)
        decoded.unpersist()
        stream.finish(spark, out, tables.DEFAULT_RESOLUTION_S, tables.DEFAULT_LATE_MARKERS_MS)
        outs[name] = out
    return outs


@pytest.mark.parametrize("name", SCENARIOS)
def test_build_writes_every_table_readable_with_its_schema(spark, built, name):
    for table in tables.COLUMNS:
        df = tables.read_table(spark, built[name], table)
        assert df.schema.simpleString() == spark.createDataFrame([], tables.schema(table)).schema.simpleString()
        assert (df.count() == 0) == (table in EMPTY[name]), table
        if table not in EMPTY[name]:  # what was written is what the schema says
            written = spark.read.parquet(f"{built[name]}/{table}").schema
            assert written.simpleString() == df.schema.simpleString(), table


@pytest.mark.parametrize("name", SCENARIOS)
def test_report_says_what_there_is_none_of(spark, built, name, tmp_path, recwarn):
    page = tmp_path / "report.html"
    write_report(spark, built[name], page)
    text = page.read_text()
    for words in WORDS[name]:
        assert words in text, words
    assert not [w for w in recwarn if "matplotlib" in str(w.filename) or "legend" in str(w.message)]


@pytest.mark.parametrize("name", SCENARIOS)
def test_backfill_over_none(spark, built, name, tmp_path):
    om = tmp_path / "history.om"
    samples = write_openmetrics(spark, built[name], om)
    text = om.read_text()
    assert text.endswith("# EOF\n")
    assert (samples == 0) == (name != "healthy")
    assert samples == len([line for line in text.splitlines() if not line.startswith("#")])


@pytest.mark.parametrize("name", SCENARIOS)
def test_stream_over_none_gives_the_batch_tables_and_report(spark, built, streamed, name, tmp_path):
    def rows(out, table):
        df = tables.read_table(spark, out, table)
        if table == "lifecycles":  # the stream keeps open transactions apart, in its state
            df = df.where("result is not null")
        order = [c for c in ("cluster", "transactional_id", "begin_ms", "time_ms") if c in df.columns]
        return [r.asDict() for r in df.orderBy(*order).collect()]

    for table in ("lifecycles", "pending_history", "candidates", "transactional_ids", "as_of"):
        assert rows(streamed[name], table) == rows(built[name], table), table
    page = tmp_path / "report.html"
    write_report(spark, streamed[name], page)
    assert all(words in page.read_text() for words in WORDS[name])


def test_a_stream_that_read_nothing_still_writes_every_table(spark, tmp_path):
    out = str(tmp_path / "out")
    Path(out, "stream").mkdir(parents=True)
    stream.finish(spark, out, tables.DEFAULT_RESOLUTION_S, tables.DEFAULT_LATE_MARKERS_MS)
    for table in tables.COLUMNS:
        assert tables.read_table(spark, out, table).count() == 0
    write_report(spark, out, tmp_path / "report.html")
    assert "No records were read" in (tmp_path / "report.html").read_text()


def test_a_rebuild_with_none_left_leaves_none(spark, segments, tmp_path):
    """The derived tables are computed from every lifecycle in OUT: a rebuild that has no late
    transaction left replaces the earlier build's candidates (it did not overwrite an empty set)."""
    late = Log(0)
    late.transaction("slow", T0, T0 + 1_000, T0 + 200_000)  # markers 199 s
    late.write(tmp_path / "late")
    out = str(tmp_path / "out")
    tables.build(spark, [], [segment_input("c", str(tmp_path / "late"))], out)
    assert tables.read_table(spark, out, "candidates").count() == 1
    tables.build(spark, [], [segment_input("c", str(segments["healthy"]))], out)
    assert tables.read_table(spark, out, "candidates").count() == 0
    assert {r["transactional_id"] for r in tables.read_table(spark, out, "transactional_ids").collect()} == {"ok"}

"""`txn-exporter pipeline` against a real broker (Kafka 4.4.0, transaction.version 2) and Spark local[2].

First: Spark's Kafka source really reads `__transaction_state` (its default offset reader drops
internal topics; the session sets useDeprecatedOffsetFetching). Then: the lifecycle table equals
what the workload did, segment-file input and Kafka input give the same tables, a stream with tiny
micro-batches keeps open transactions across them and ends with the batch tables, and the pending
history agrees with the live exporter's gauge over the same window. And the same build, run by
`txn-exporter pipeline build --master spark://...` on a real standalone cluster (a master and two
one-core workers from pyspark's own launcher), writes tables identical to the local run's.

JVMs: one broker plus Spark's; the gauge test needs a two-broker cluster (held markers) and runs
Spark only after both brokers are stopped (on a copy of their segments).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

pytest.importorskip("pyspark")  # the spark extra, which make check's setup leaves out

from exporter.contracts.lifecycle import pending_at
from exporter.pipeline import tables
from exporter.pipeline.sources import segment_input
from exporter.pipeline.stream import run_stream
from tests.integration.exporter_process import ExporterProcess
from tests.pipeline.spark import spark_session_for_tests
from txn_workshop.harness.admin import create_topic
from txn_workshop.harness.spark_cluster import SparkStandalone, spark_class
from txn_workshop.harness.workload import _producer, hold_markers, run_mix

pytestmark = pytest.mark.spark
IDS = ["life-0", "life-1"]
COMMITS, ABORTS, TIMEOUTS = 3, 2, 1


@pytest.fixture(scope="module")
def spark():
    return spark_session_for_tests()


@pytest.fixture(scope="module")
def workload(kafka_broker_factory):
    broker = kafka_broker_factory("4.4.0", 2)
    create_topic(broker.bootstrap_servers, "life-orders", partitions=3)
    result = run_mix(broker.bootstrap_servers, "life-orders", IDS, commits=COMMITS, aborts=ABORTS, timeouts=TIMEOUTS)
    return broker, result


def _kafka(broker, cluster="k"):
    return tables.KafkaInput(cluster, broker.bootstrap_servers)


def test_spark_reads_transaction_state_from_kafka(spark, workload):
    broker, _ = workload
    raw = tables.kafka_raw(spark, _kafka(broker))
    rows = tables.decode_kafka(raw).where("transactional_id like 'life-%'").collect()
    assert rows, "Spark's Kafka source returned nothing from __transaction_state"
    assert {r["transactional_id"] for r in rows} == set(IDS)
    assert all(r["error"] is None for r in rows)
    # Every id lives in one coordinator partition; offsets strictly increase within it.
    for tid in IDS:
        mine = [r for r in rows if r["transactional_id"] == tid]
        assert len({r["partition"] for r in mine}) == 1
        offsets = [r["offset"] for r in sorted(mine, key=lambda r: r["offset"])]
        assert len(set(offsets)) == len(offsets)


@pytest.fixture(scope="module")
def built(spark, workload, tmp_path_factory):
    """The batch pipeline over Kafka ("k") and over a copy of the broker's segments ("s")."""
    broker, _ = workload
    root = tmp_path_factory.mktemp("pipeline-it")
    copy = root / "segments"
    for part in Path(broker.log_dirs).glob("__transaction_state-*"):
        shutil.copytree(part, copy / part.name)
    out = str(root / "out")
    tables.build(spark, [_kafka(broker)], [segment_input("s", str(copy))], out)
    return out


@pytest.fixture(scope="module")
def standalone(tmp_path_factory):
    with SparkStandalone(tmp_path_factory.mktemp("spark-standalone"), workers=2, cores=1, memory="1g") as cluster:
        yield cluster


@pytest.fixture(scope="module")
def built_on_cluster(built, workload, standalone):
    """The CLI's build of the same inputs (Kafka and the same segment copy) on the standalone cluster."""
    broker, _ = workload
    out = Path(built).parent / "out-cluster"
    env = dict(os.environ, TXN_EXPORTER_SPARK_DRIVER_MEMORY="1g", SPARK_LOCAL_IP="127.0.0.1")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "exporter",
            "pipeline",
            "build",
            "--quiet",
            "--master",
            standalone.url,
            "--out",
            str(out),
            "--kafka",
            f"k={broker.bootstrap_servers}",
            "--segments",
            f"s={Path(built).parent / 'segments'}",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return str(out)


def _rows(spark, out, table, cluster, order):
    df = spark.read.parquet(f"{out}/{table}").where(f"cluster = '{cluster}'").drop("cluster")
    return [r.asDict() for r in df.orderBy(*order).collect()]


def test_lifecycles_equal_what_the_workload_did(spark, built, workload):
    _, result = workload
    lcs = [
        r
        for r in _rows(spark, built, "lifecycles", "k", ["transactional_id", "begin_ms"])
        if r["transactional_id"] in IDS
    ]
    for tid in IDS:
        mine = [r for r in lcs if r["transactional_id"] == tid]
        counts = result.per_id[tid]
        assert sum(r["result"] == "commit" for r in mine) == counts.commits
        assert sum(r["result"] == "abort" for r in mine) == counts.aborts + counts.timeouts
        assert sum(r["result"] is None for r in mine) == 0
        timed_out = [r for r in mine if r["timed_out"]]
        assert len(timed_out) == counts.timeouts
        # The timed-out producers are the hanging children (transaction.timeout.ms 2000, a new epoch);
        # client aborts (60000) never count.
        assert {r["transaction_timeout_ms"] for r in timed_out} == {2000}
        assert all(r["abort_cause"] == "client" for r in mine if r["result"] == "abort" and not r["timed_out"])
        assert all(r["transaction_timeout_ms"] == 60000 for r in mine if not r["timed_out"])
        assert mine[-1]["timed_out"]  # run_mix times out last
        assert all(r["partitions"] == ["life-orders-0", "life-orders-1", "life-orders-2"] for r in mine)
    summary = {r["transactional_id"]: r for r in _rows(spark, built, "transactional_ids", "k", ["transactional_id"])}
    assert all(summary[t]["timeouts"] == TIMEOUTS and summary[t]["commits"] == COMMITS for t in IDS)


@pytest.mark.parametrize(
    "table, order",
    [
        ("transitions", ["partition", "offset"]),
        ("lifecycles", ["transactional_id", "begin_ms"]),
        ("pending_history", ["time_ms"]),
        ("transactional_ids", ["transactional_id"]),
    ],
)
def test_segment_files_and_kafka_give_the_same_tables(spark, built, table, order):
    kafka, segments = _rows(spark, built, table, "k", order), _rows(spark, built, table, "s", order)
    assert kafka and kafka == segments


def test_a_standalone_cluster_gives_the_local_tables(spark, built, built_on_cluster, standalone):
    for table, order in [
        ("transitions", ["partition", "offset"]),
        ("lifecycles", ["transactional_id", "begin_ms"]),
        ("pending_history", ["time_ms"]),
        ("transactional_ids", ["transactional_id"]),
        ("candidates", ["transactional_id", "begin_ms"]),
    ]:
        for cluster in ("k", "s"):
            local = _rows(spark, built, table, cluster, order)
            assert _rows(spark, built_on_cluster, table, cluster, order) == local, (table, cluster)
            assert local or table == "candidates", (table, cluster)
    # The work ran on the cluster's executors, one on each worker (Kafka reads included: the
    # connector jars reached them), not in the driver.
    apps = standalone.status()["completedapps"] + standalone.status()["activeapps"]
    assert [a["name"] for a in apps] == ["txn-exporter pipeline"]
    for i in range(standalone.workers):
        assert list(standalone.worker_dir(i).glob("app-*/*/stderr")), f"no executor ran on worker {i}"


def test_spark_submit_without_the_connector_says_what_to_add(workload, tmp_path):
    """Under spark-submit the driver's JVM is up before the pipeline runs: without --jars, a Kafka
    input gets one line naming the fix, at once, instead of Spark's KAFKA_DATA_SOURCE_NOT_ENABLED."""
    broker, _ = workload
    import exporter

    main = Path(exporter.__file__).with_name("__main__.py")
    done = subprocess.run(
        [
            str(spark_class().with_name("spark-submit")),
            "--master",
            "local[1]",
            "--conf",
            "spark.ui.enabled=false",
            "--driver-memory",
            "512m",
            str(main),
            "pipeline",
            "build",
            "--quiet",
            "--out",
            str(tmp_path / "out"),
            "--kafka",
            f"k={broker.bootstrap_servers}",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        stdin=subprocess.DEVNULL,
        env=dict(
            os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1"
        ),
    )
    output = done.stdout + done.stderr  # spark-submit passes the Python driver's stderr to its stdout
    assert done.returncode == 2, output[-3000:]
    assert "Spark's Kafka connector is not on this spark-submit's classpath: add --jars" in output
    assert "Traceback" not in output


def test_stream_keeps_open_transactions_across_micro_batches(spark, built, workload, tmp_path):
    broker, _ = workload
    out = str(tmp_path / "stream")
    # 12 records per micro-batch (a transaction writes 4 to 5): about a third of the transactions span
    # two, in some 13 micro-batches (7 a batch made 22 of them, a minute and a half of the suite).
    run_stream(
        spark,
        [_kafka(broker)],
        out,
        checkpoint=f"{out}/checkpoint",
        trigger="available-now",
        max_offsets_per_trigger=12,
    )
    batches = len(list(Path(out, "checkpoint", "commits").glob("[0-9]*")))
    assert batches > 5

    def lifecycles(path):
        # The batch run sees the records present when it ran: compare the workload's ids.
        rows = _rows(spark, path, "lifecycles", "k", ["transactional_id", "begin_ms"])
        return [r for r in rows if r["transactional_id"] in IDS]

    streamed = lifecycles(out)
    assert streamed == lifecycles(built)
    # Replaying a committed micro-batch (as Spark does after a crash) changes nothing.
    from exporter.pipeline.stream import StreamState, process_batch

    store = StreamState(out)
    process_batch(spark, store, None, store.committed())
    assert lifecycles(out) == streamed


def test_pending_history_agrees_with_the_live_gauge(own_broker, tmp_path):
    """Held markers on a two-broker cluster: the exporter's gauge, sampled every 250 ms, and the
    pipeline's history at 1 s resolution (exact pending count at each second) agree wherever the
    gauge was steady for a second either side."""
    first = own_broker(transaction_state_partitions=3)
    follower = own_broker(join=first, node_id=2)
    bootstrap = first.bootstrap_servers
    create_topic(bootstrap, "held", partitions=1, replication_factor=2)
    exporter = ExporterProcess(bootstrap, "--all-partitions", log=tmp_path / "exporter.log")
    samples: list[tuple[float, float]] = []
    stop = threading.Event()
    try:
        exporter.wait_ready()

        def sample():
            while not stop.is_set():
                value = exporter.value("kafka_transactions_with_pending_markers")
                if value is not None:
                    samples.append((time.time() * 1000, value))
                time.sleep(0.25)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        producers = [_producer(bootstrap, f"held-{i}") for i in range(3)]
        for p in producers:
            p.init_transactions(30)
            p.begin_transaction()
            p.produce("held", value=b"x", partition=0)
            p.flush(30)
        time.sleep(3)
        with hold_markers(follower, "held"):
            for p in producers:
                p.commit_transaction(30)  # returns at PREPARE_COMMIT; markers are retried
                time.sleep(2)
            time.sleep(3)
        time.sleep(5)  # released: the markers complete
        stop.set()
        sampler.join(5)
    finally:
        stop.set()
        exporter.stop()
    first_log_dirs = Path(first.log_dirs)
    follower.stop()
    first.stop()
    assert max(v for _, v in samples) == 3

    spark = spark_session_for_tests()
    out = str(tmp_path / "out")
    tables.build(spark, [], [segment_input("live", str(first_log_dirs))], out, resolution_s=1)
    history = {r["time_ms"]: r["pending"] for r in spark.read.parquet(f"{out}/pending_history").collect()}
    lcs = spark.read.parquet(f"{out}/lifecycles").collect()
    intervals = [(r["prepare_ms"], r["complete_ms"]) for r in lcs if r["prepare_ms"] is not None]
    compared = []
    for t, pending in sorted(history.items()):
        near = [v for s, v in samples if abs(s - t) <= 1000]
        if len(near) >= 2 and len(set(near)) == 1:  # steady gauge around t (scrapes are slow under load)
            assert pending == near[0] == pending_at(intervals, t), (t, pending, near)
            compared.append(pending)
    assert len(compared) >= 3 and max(compared) > 0, (compared, sorted(history.items()), samples)
    assert max(history.values()) == 3


def test_a_healthy_cluster_through_the_cli(own_broker, tmp_path):
    """The most common input: a cluster where every transaction committed in time (no abort, no
    timeout, none late, hanging or open). As a user runs it: build and stream from Kafka, then report
    and backfill. Each step exits 0 with only its step lines on the terminal (the JVM's output goes
    to OUT/logs), the stream ends with the batch tables, and the report says what there is none of."""
    import pyarrow.dataset as ds

    broker = own_broker(transaction_state_partitions=3)
    create_topic(broker.bootstrap_servers, "ok-orders", partitions=2)
    run_mix(broker.bootstrap_servers, "ok-orders", ["ok-0", "ok-1"], commits=3, aborts=0)
    built, streamed = tmp_path / "built", tmp_path / "streamed"
    kafka = f"k={broker.bootstrap_servers}"
    step = re.compile(r"^\[ *\d+\.\ds\] ")
    for argv in (
        ["build", "--out", built, "--kafka", kafka],
        ["stream", "--out", streamed, "--kafka", kafka],
        ["report", "--out", built, "--html", tmp_path / "report.html"],
        ["backfill", "--out", streamed, "--file", tmp_path / "history.om"],
    ):
        done = subprocess.run(
            [sys.executable, "-m", "exporter", "pipeline", *map(str, argv)],
            capture_output=True,
            text=True,
            timeout=600,
            stdin=subprocess.DEVNULL,
        )
        assert done.returncode == 0, done.stderr[-4000:]
        assert done.stdout == "" and all(step.match(line) for line in done.stderr.splitlines()), done.stderr
        log = Path(argv[2]) / "logs" / f"spark-{argv[0]}.log"
        assert f"(Spark's log: {log})" in done.stderr
        assert "Using incubator modules" in log.read_text()  # the JVM's start-up lines: in the log

    def rows(out, table):
        data = ds.dataset(out / table, partitioning="hive").to_table().to_pylist()
        return sorted(data, key=lambda r: [r.get(c) or 0 for c in ("transactional_id", "begin_ms", "time_ms")])

    lifecycles = rows(built, "lifecycles")
    assert len(lifecycles) == 6 and {r["result"] for r in lifecycles} == {"commit"}
    for table in ("lifecycles", "pending_history", "transactional_ids", "as_of"):
        assert rows(streamed, table) == rows(built, table), table
    assert rows(built, "candidates") == rows(streamed, "candidates") == []
    page = (tmp_path / "report.html").read_text()
    for words in (
        "No transaction was aborted.",
        "No transaction timed out.",
        "No late or hanging transactions",
        "No transactional id had an abort or a timeout",
    ):
        assert words in page, words
    assert "kafka_txn_history_pending_markers{" in (tmp_path / "history.om").read_text()

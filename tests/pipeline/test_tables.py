"""The pipeline's tables on a local SparkSession, from synthetic segments built with the codec's encoders."""

import json
import shutil
import subprocess
import time
import urllib.parse
import urllib.request

import pytest

pytest.importorskip("pyspark")  # the spark extra, which make check's setup leaves out

from exporter.cli import main
from exporter.contracts.lifecycle import pending_at
from exporter.pipeline import tables
from exporter.pipeline.backfill import write_openmetrics
from exporter.pipeline.report import write_report
from exporter.pipeline.sources import segment_input
from tests.pipeline.builders import Log, S
from txn_workshop.harness.processes import free_port

pytestmark = pytest.mark.spark
T0 = 1_795_000_000_000  # a fixed instant (epoch ms), so every run builds the same logs


@pytest.fixture(scope="module")
def built(spark, tmp_path_factory):
    """Two clusters; cluster a: commits, a client abort, a timeout, markers held across minutes, an
    open transaction and a hanging prepare; cluster b: one commit."""
    root = tmp_path_factory.mktemp("pipeline")
    p0, p1 = Log(0), Log(1)
    p0.add("x", T0, S.EMPTY)
    p0.transaction("x", T0 + 1_000, T0 + 2_000, T0 + 3_000)
    p0.transaction("x", T0 + 4_000, T0 + 5_000, T0 + 6_000, commit=False)
    p0.transaction("x", T0 + 7_000, T0 + 70_000, T0 + 70_500, commit=False, timeout=60_000, abort_epoch=1)  # timeout
    p0.transaction("x", T0 + 80_000, T0 + 90_000, T0 + 200_000)  # markers pending ~2 minutes
    p1.transaction("y", T0 + 95_000, T0 + 96_000, T0 + 150_000)
    p1.add(
        "y", T0 + 160_000, S.ONGOING, partitions={"orders": [3]}, start=T0 + 160_000, timeout=10_000
    )  # open past timeout
    p1.add("z", T0 + 170_000, S.ONGOING, pid=2, partitions={"o": [1]}, start=T0 + 170_000)
    p1.add("z", T0 + 171_000, S.PREPARE_COMMIT, pid=2, partitions={"o": [1]}, start=T0 + 170_000)  # pending to the end
    p0.write(root / "a")
    p1.write(root / "a")
    b = Log(4)
    b.transaction("w", T0 + 10_000, T0 + 11_000, T0 + 12_000)
    b.write(root / "b")
    out = str(root / "out")
    tables.build(
        spark,
        [],
        [segment_input("a", str(root / "a")), segment_input("b", str(root / "b"))],
        out,
        resolution_s=60,
        late_markers_ms=60_000,
    )
    return out


def test_lifecycles_by_result(spark, built):
    lc = {
        (r["cluster"], r["transactional_id"], r["begin_ms"] - T0): r
        for r in spark.read.parquet(f"{built}/lifecycles").collect()
    }
    assert {k: (r["result"], r["abort_cause"]) for k, r in lc.items()} == {
        ("a", "x", 1_000): ("commit", None),
        ("a", "x", 4_000): ("abort", "client"),
        ("a", "x", 7_000): ("abort", "timeout"),
        ("a", "x", 80_000): ("commit", None),
        ("a", "y", 95_000): ("commit", None),
        ("a", "y", 160_000): (None, None),
        ("a", "z", 170_000): (None, None),
        ("b", "w", 10_000): ("commit", None),
    }
    assert lc[("a", "x", 7_000)]["timed_out"] and lc[("a", "x", 80_000)]["markers_ms"] == 110_000
    assert lc[("a", "x", 1_000)]["partitions"] == ["orders-0", "orders-1"]
    assert str(lc[("a", "x", 1_000)]["date"]) == "2026-11-18"
    assert lc[("a", "z", 170_000)]["state"] == "PREPARE_COMMIT"


def test_pending_history_is_exact(spark, built):
    lcs = spark.read.parquet(f"{built}/lifecycles").where("cluster = 'a'").collect()
    intervals = [(r["prepare_ms"], r["complete_ms"]) for r in lcs if r["prepare_ms"] is not None]
    history = spark.read.parquet(f"{built}/pending_history").where("cluster = 'a'").orderBy("time_ms").collect()
    assert history[0]["time_ms"] == T0 // 60_000 * 60_000
    for row in history:
        t = row["time_ms"]
        assert row["pending"] == pending_at(intervals, t)
        assert row["pending_max"] == max(pending_at(intervals, s) for s in range(t, t + 60_000, 250))
    assert sum(r["prepares"] for r in history) == len(intervals)


def test_candidates_and_summary(spark, built):
    cands = {
        (r["transactional_id"], r["begin_ms"] - T0): (r["kind"], list(r["reasons"]))
        for r in spark.read.parquet(f"{built}/candidates").collect()
    }
    assert cands == {
        ("x", 7_000): ("late", ["over_timeout"]),
        ("x", 80_000): ("late", ["over_timeout", "slow_markers"]),
        ("y", 160_000): ("hanging", ["open_past_timeout"]),
    }  # z is prepared 29 s before the end of the data: not yet past --late-markers-ms
    summary = {
        (r["cluster"], r["transactional_id"]): r for r in spark.read.parquet(f"{built}/transactional_ids").collect()
    }
    x = summary[("a", "x")]
    assert (x["transactions"], x["commits"], x["aborts"], x["timeouts"], x["open"]) == (4, 2, 2, 1, 0)
    assert x["max_duration_ms"] == 120_000 and summary[("b", "w")]["commits"] == 1


def test_backfill_loads_into_prometheus_and_answers_history(spark, built, tmp_path):
    promtool, prometheus = shutil.which("promtool"), shutil.which("prometheus")
    if not promtool or not prometheus:
        pytest.skip("promtool/prometheus missing: scripts/setup installs them (Debian package prometheus)")
    om = tmp_path / "history.om"
    assert write_openmetrics(spark, built, om) > 0
    data = tmp_path / "tsdb"
    proc = subprocess.run(
        [promtool, "tsdb", "create-blocks-from", "openmetrics", str(om), str(data)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    port = free_port()
    config = tmp_path / "prometheus.yml"
    config.write_text("global: {}\n")
    server = subprocess.Popen(
        [
            prometheus,
            f"--config.file={config}",
            f"--storage.tsdb.path={data}",
            f"--web.listen-address=127.0.0.1:{port}",
            "--storage.tsdb.retention.time=100y",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:

        def query(q, t):
            url = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": q, "time": t / 1000})
            with urllib.request.urlopen(url, timeout=5) as r:
                return {
                    json.dumps(x["metric"], sort_keys=True): float(x["value"][1])
                    for x in json.load(r)["data"]["result"]
                }

        deadline = time.monotonic() + 60
        while True:
            try:
                if query("up", T0) is not None:
                    break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
        minute = T0 // 60_000 * 60_000
        # minute = T0 - 40 s. Pending: x from T0+90 s to T0+200 s, y from T0+96 s to T0+150 s.
        assert query('kafka_txn_history_pending_markers{cluster="a"}', minute + 180_000) == {
            '{"__name__": "kafka_txn_history_pending_markers", "cluster": "a"}': 2.0
        }
        assert list(query('kafka_txn_history_pending_markers{cluster="a"}', minute + 120_000).values()) == [0.0]
        totals = query('kafka_txn_history_transactions_total{cluster="a"}', minute + 6 * 60_000)
        assert sorted(totals.values()) == [2.0, 3.0]  # aborts, commits
        assert list(query("kafka_txn_history_timed_out_transactions_total", minute + 6 * 60_000).values()) in (
            [1.0, 0.0],
            [0.0, 1.0],
        )
    finally:
        server.terminate()
        server.wait(30)


def test_report_is_one_html_page_with_plots(spark, built, tmp_path):
    page = tmp_path / "report.html"
    write_report(spark, built, page)
    text = page.read_text()
    assert text.count("data:image/png;base64,") == 3 and "Top" in text and "open_past_timeout" in text


def test_cli_errors_are_one_line(tmp_path, capsys, monkeypatch):
    assert main(["pipeline", "build", "--out", str(tmp_path / "o"), "--segments", f"a={tmp_path}/nope"]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        f"txn-exporter pipeline: {tmp_path}/nope does not exist (cluster a)"
    ]
    (tmp_path / "empty").mkdir()
    assert main(["pipeline", "build", "--out", str(tmp_path / "o"), "--segments", f"a={tmp_path}/empty"]) == 2
    assert "no __transaction_state segment files" in capsys.readouterr().err
    port = free_port()  # nothing listens there
    assert (
        main(["pipeline", "build", "--out", str(tmp_path / "o"), "--kafka", f"prod=127.0.0.1:{port}", "--quiet"]) == 2
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(
        f"txn-exporter pipeline: cannot reach Kafka cluster prod at 127.0.0.1:{port}"
    )
    from exporter.pipeline import session
    from exporter.pipeline.errors import PipelineError

    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "no-java"))
    with pytest.raises(PipelineError, match="Java 17\\+ is needed to run Spark"):
        session.check_java()
    assert main(["pipeline", "report", "--out", str(tmp_path / "o"), "--html", str(tmp_path / "r.html")]) == 2
    assert "run `txn-exporter pipeline build" in capsys.readouterr().err

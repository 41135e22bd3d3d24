"""End to end: a real Prometheus (Debian binary) scrapes a real exporter on a real two-broker cluster
while a transaction's markers are held back. Every dashboard query and every alert's inputs return
data (or are expected empty, with the reason the generators give), and the stuck-markers alert goes
pending, then firing, and resolves once the markers are released.

Exemplars: Prometheus runs with exemplar storage; every panel that asks for exemplars gets some
through /api/v1/query_exemplars, naming transactional ids of the workload, and once the held
transaction completes its marker completion's exemplar names it with the producer id Kafka's own
kafka-transactions.sh describe reported for it. A transaction whose id no exemplar can carry as it
is (quotes, a backslash, too long) stays open for seconds beside the workload: Prometheus stores it,
cut to 128 characters with those characters shown as U+FFFD, and every scrape still parses.

The rules are the real ones with every `for:` shortened to 5 s (alerts.generate.with_short_for);
scrape and evaluation every second.
"""

from __future__ import annotations

import math
import re
import threading
import time

import pytest
from confluent_kafka import KafkaException, Producer

from alerts import generate as alerts_generate
from alerts import rules as alerts_rules
from dashboards import generate
from exporter import config, defaults
from queries.metrics import known
from tests.alerts.tools import Prometheus
from tests.integration.exporter_process import ExporterProcess
from txn_workshop.harness.admin import create_topic
from txn_workshop.harness.broker import KafkaBroker
from txn_workshop.harness.workload import commit_transactions, held_commit, run_mix

STUCK = "KafkaTransactionMarkersPendingTooLong"
CLUSTER = "e2e"
SHORT_FOR = "5s"
WORKLOAD_IDS = {"e2e-a", "e2e-b"}
HELD = "e2e-held"
TRANSACTIONS_TOOL = "org.apache.kafka.tools.TransactionsCommand"  # kafka-transactions.sh
UNTRUSTED = 'e2e-"untrusted"\\id-🦀-' + "x" * 120
SLOW_SECONDS = 12  # the untrusted transaction's duration: its own bucket, (10 s, 30 s]


@pytest.fixture(scope="module")
def cluster(kafka_broker_factory, tmp_path_factory):
    """Two 4.4.0 brokers; `orders` (RF 1) and every coordinator live on the first only, so its
    transactions go on while the second is stopped to hold `held`'s markers back (RF 2,
    min.insync.replicas 2)."""
    root = tmp_path_factory.mktemp("e2e-cluster")
    first = KafkaBroker("4.4.0", workdir=root / "1", transaction_state_partitions=8)
    second = KafkaBroker("4.4.0", workdir=root / "2", join=first, node_id=2)
    started = []
    try:
        for broker in (first, second):
            kafka_broker_factory.make_room()
            kafka_broker_factory.own.append(broker)
            started.append(broker)
            broker.start()
            if broker is first:
                create_topic(first.bootstrap_servers, "orders", partitions=2)
                # __transaction_state (replication factor 1) made now puts every coordinator on the
                # first broker, so no transaction of the test waits on the second while it is stopped.
                commit_transactions(first.bootstrap_servers, "e2e-setup", "orders", 1)
        create_topic(first.bootstrap_servers, "held", partitions=1, replication_factor=2)
        yield first, second
    finally:
        for broker in reversed(started):
            broker.stop()
            kafka_broker_factory.own.remove(broker)


WORKLOAD_OUTAGE = 60  # seconds of failing rounds the workload rides out before it fails the test


def _workload(bootstrap: str, stop: threading.Event, errors: list[BaseException]) -> None:
    """Rounds of the mix on `orders` until stopped. A round that fails is run again: the second broker
    is stopped and restarted under it (the markers' hold), and a client's metadata request caught in
    that restart can time out although `orders` lives on the first. Only rounds failing for
    WORKLOAD_OUTAGE seconds on end are the test's failure: then no records flow."""
    seed, failing_since = 0, None
    while not stop.is_set():
        seed += 1
        try:
            run_mix(bootstrap, "orders", sorted(WORKLOAD_IDS), commits=2, aborts=1, seed=seed)
            failing_since = None
        except KafkaException as e:
            failing_since = failing_since or time.monotonic()
            if time.monotonic() - failing_since > WORKLOAD_OUTAGE and not stop.is_set():
                errors.append(e)
                return
        except BaseException as e:
            if not stop.is_set():
                errors.append(e)
            return
        stop.wait(0.5)


def _substitute(expr: str, instance: str) -> str:
    """Grafana's variables as a dashboard with this cluster and exporter selected would send them."""
    return (
        expr.replace("$cluster", CLUSTER)
        .replace("$instance", instance)
        .replace("$partition", ".*")
        .replace("$__rate_interval", "30s")
        .replace("$__range", "5m")
    )


def _has_data(result: list[dict]) -> bool:
    return any(not math.isnan(float(sample["value"][1])) for sample in result)


_SELECTOR = re.compile(r"(?<![\w:])([a-zA-Z_][\w]*(?::[\w]+)*)\s*(\{[^}]*\})?")


def _inputs(expr: str) -> list[str]:
    """The vector selectors of an expression that name our metrics, recording rules or `up`."""
    names = set(known()) | alerts_rules.RECORDING_NAMES | {"up"}
    out = []
    for name, matchers in _SELECTOR.findall(expr):
        base = re.sub(r"_(bucket|count|sum)$", "", name)
        if name in names or base in names:
            out.append(name + (matchers or ""))
    return out


def _alert_state(prometheus: Prometheus, name: str) -> str | None:
    states = {a["state"] for a in prometheus.alerts() if a["labels"]["alertname"] == name}
    return "firing" if "firing" in states else ("pending" if "pending" in states else None)


def _wait(what: str, condition, timeout: float, interval: float = 0.25):
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out after {timeout} s waiting for {what}"
        time.sleep(interval)


def _slow_commit(bootstrap: str, transactional_id: str, seconds: float, errors: list[BaseException]) -> None:
    """One transaction left open for `seconds` before its commit."""
    try:
        producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id})
        producer.init_transactions(30)
        producer.begin_transaction()
        producer.produce("orders", value=b"slow", partition=0)
        producer.flush(30)
        time.sleep(seconds)
        producer.commit_transaction(30)
    except BaseException as e:
        errors.append(e)


def _shown_untrusted(transactional_id: str, producer_id: str) -> bool:
    """Whether an exemplar's transactional_id is UNTRUSTED as the exporter must show it: the quotes
    and the backslash as U+FFFD, cut to OpenMetrics' 128 characters with the names and producer id,
    marked by "…"."""
    safe = UNTRUSTED.replace('"', "\ufffd").replace("\\", "\ufffd")
    return (
        len("transactional_id") + len(transactional_id) + len("producer_id") + len(producer_id) == 128
        and transactional_id.endswith("…")
        and safe.startswith(transactional_id[:-1])
    )


def _producer_id(broker: KafkaBroker, transactional_id: str) -> str:
    """The producer id Kafka's kafka-transactions.sh describe reports for `transactional_id`."""
    proc = broker.run_tool(
        TRANSACTIONS_TOOL,
        "--bootstrap-server",
        broker.bootstrap_servers,
        "describe",
        "--transactional-id",
        transactional_id,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    header, row = (line.split() for line in proc.stdout.splitlines()[:2])
    return row[header.index("ProducerId")]


def _exemplar_ids(prometheus: Prometheus, expr: str, since: float) -> dict[str, set[tuple[str, float]]]:
    """transactional_id -> {(producer_id, value)} of the exemplars stored for `expr`'s series."""
    ids: dict[str, set[tuple[str, float]]] = {}
    for series in prometheus.exemplars(expr, since, time.time() + 60):
        for exemplar in series["exemplars"]:
            labels = exemplar["labels"]
            assert set(labels) == {"transactional_id", "producer_id"}, labels
            ids.setdefault(labels["transactional_id"], set()).add((labels["producer_id"], float(exemplar["value"])))
    return ids


def test_dashboards_and_alerts_on_a_real_prometheus(cluster, tmp_path):
    first, second = cluster
    started = time.time()
    broker_log = "broker_log" in config.Settings.model_fields
    args = ["--all-partitions", *(["--broker-log", str(first.server_log)] if broker_log else [])]
    exporter = ExporterProcess(first.bootstrap_servers, *args, log=tmp_path / "exporter.log")
    prometheus = None
    stop, errors = threading.Event(), []
    workload = threading.Thread(target=_workload, args=(first.bootstrap_servers, stop, errors), daemon=True)
    slow = threading.Thread(
        target=_slow_commit, args=(first.bootstrap_servers, UNTRUSTED, SLOW_SECONDS, errors), daemon=True
    )
    try:
        exporter.wait_ready()
        instance = f"127.0.0.1:{exporter.port}"
        rules = tmp_path / "rules.yml"
        rules.write_text(alerts_generate.render(alerts_generate.with_short_for(alerts_generate.rules(), SHORT_FOR)))
        prometheus = Prometheus(
            {
                "global": {"scrape_interval": "1s", "evaluation_interval": "1s", "scrape_timeout": "1s"},
                "rule_files": [str(rules)],
                "scrape_configs": [
                    {
                        "job_name": defaults.SCRAPE_JOB,
                        "static_configs": [{"targets": [instance], "labels": {"cluster": CLUSTER}}],
                    }
                ],
            },
            tmp_path / "prometheus",
            features=("exemplar-storage",),
        )
        workload.start()
        slow.start()
        _wait(
            "live records in Prometheus",
            lambda: _has_data(
                prometheus.query(
                    'sum(rate(kafka_transaction_state_log_records_total{target_state="COMPLETE_ABORT"}[30s])) > 0'
                )
            ),
            90,
        )
        assert _alert_state(prometheus, STUCK) is None

        slow.join(SLOW_SECONDS + 60)  # ended before the hold, so the outage cannot lengthen its measured duration
        with held_commit(first.bootstrap_servers, second, "held", HELD):
            _wait(
                "a pending transaction",
                lambda: _has_data(prometheus.query("kafka_transactions_with_pending_markers > 0")),
                30,
            )
            _check_queries(prometheus, instance, broker_log)
            _check_exemplar_queries(prometheus, instance, started)
            held_producer_id = _producer_id(first, HELD)
            assert _wait(f"{STUCK} pending", lambda: _alert_state(prometheus, STUCK), 60) == "pending"
            _wait(f"{STUCK} firing", lambda: _alert_state(prometheus, STUCK) == "firing", 30)
            firing = next(a for a in prometheus.alerts() if a["labels"]["alertname"] == STUCK)
            assert firing["labels"]["cluster"] == CLUSTER and firing["labels"]["instance"] == instance
            assert "none transactions are waiting" not in firing["annotations"]["description"]
            view = firing["annotations"]["transactions_url"]
            assert view.startswith(f"http://{instance}/transactions?")
            status, body = exporter.get(view.removeprefix(exporter.url))
            if status != 404:  # the exporter serves the view (issue 12): the held transaction is listed
                assert status == 200 and HELD in body, (status, body[:2000])
        _wait(f"{STUCK} resolved", lambda: _alert_state(prometheus, STUCK) is None, 60)
        # Held for tens of seconds: the slowest commit of the window, its bucket's exemplar.
        held = _wait(
            "the held transaction's exemplar",
            lambda: _exemplar_ids(
                prometheus, 'kafka_transaction_marker_completion_seconds_bucket{result="commit"}', started
            ).get(HELD),
            30,
        )
        ((producer_id, seconds),) = held
        assert producer_id == held_producer_id and seconds > 5, held
        untrusted = _wait(
            "the untrusted transaction's exemplar",
            lambda: [
                (tid, pairs)
                for tid, pairs in _exemplar_ids(
                    prometheus, 'kafka_transaction_duration_seconds_bucket{result="commit"}', started
                ).items()
                if any(_shown_untrusted(tid, producer_id) and value >= SLOW_SECONDS for producer_id, value in pairs)
            ],
            30,
        )
        assert len(untrusted) == 1, untrusted
        assert not errors, errors
        unhealthy = [r for r in prometheus.rule_health() if r[1] != "ok"]
        assert unhealthy == []
    finally:
        stop.set()
        workload.join(60)
        if prometheus is not None:
            prometheus.stop()
        exporter.stop()


def _check_exemplar_queries(prometheus: Prometheus, instance: str, since: float) -> None:
    """Every panel asking for exemplars gets some, naming transactions of the workload."""
    panels = [(d, p) for d in generate.DASHBOARDS for p in d.panels() if p.exemplars]
    assert len(panels) >= 4
    for dashboard, panel in panels:
        for query in panel.queries:
            ids = _wait(
                f"exemplars of {dashboard.uid} / {panel.title}",
                lambda: _exemplar_ids(prometheus, _substitute(query.expr, instance), since),  # noqa: B023 (waited on here)
                30,
            )
            for tid, pairs in ids.items():
                for producer_id, value in pairs:
                    assert tid in WORKLOAD_IDS | {HELD} or _shown_untrusted(tid, producer_id), ids
                    assert int(producer_id) >= 0 and value >= 0, ids


def _check_queries(prometheus: Prometheus, instance: str, broker_log: bool) -> None:
    """While the markers are held: every panel query and every alert input has data, unless listed."""
    missing, checked = [], 0
    for dashboard in generate.DASHBOARDS:
        for panel in dashboard.panels():
            for query in panel.queries:
                result = prometheus.query(_substitute(query.expr, instance))  # raises on a PromQL error
                checked += 1
                if panel.expected_empty is None and not _has_data(result):
                    missing.append(f"{dashboard.uid} / {panel.title}: {query.expr}")
    for alert in alerts_rules.ALERTS:
        prometheus.query(alert.expr)
        for selector in _inputs(alert.expr):
            checked += 1
            if alert.expected_empty is None and not _has_data(prometheus.query(selector)):
                missing.append(f"alert {alert.name}: {selector}")
    assert checked > 50
    assert missing == [], "no data (add expected_empty with the reason if that is right):\n" + "\n".join(missing)
    # The exporter's own process, under its job, on both dashboards (queries.metrics.PROCESS).
    itself = [q.expr for d in generate.DASHBOARDS for p in d.panels() for q in p.queries if "process_cpu" in q.expr]
    assert len(itself) >= 2 and all(f'job="{defaults.SCRAPE_JOB}"' in expr for expr in itself)
    assert _has_data(prometheus.query(f'process_resident_memory_bytes{{job="{defaults.SCRAPE_JOB}"}}'))
    if broker_log:  # the coordinator retries the held markers with NOT_ENOUGH_REPLICAS, and logs it
        _wait(
            "marker retries from the broker log",
            lambda: _has_data(
                prometheus.query('kafka_transaction_marker_retries_total{error=~"NOT_ENOUGH_REPLICAS.*"}')
            ),
            30,
        )

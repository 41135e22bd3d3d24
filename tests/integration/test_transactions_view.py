"""The transactions view (GET /transactions, `txn-exporter transactions`) of a real exporter on real
two-broker clusters of 4.4.0 and 3.9.2: a commit whose markers are held back appears with what
Kafka's own `kafka-transactions.sh describe` says of it, its age growing and the held partition's
marker error from the broker log, then disappears once the markers are written; filters and the
limit hold on real data; Debian's chromium loads the page. Two exporters, one beside each broker,
merged by `txn-exporter transactions` (given both, or a real Prometheus scraping both), each row
naming its broker, and by the first exporter's cluster page (--peer); once one exporter is stopped,
the other's rows and a line naming the stopped one."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

from exporter.cli import main
from tests.alerts.tools import Prometheus
from tests.integration.exporter_process import ExporterProcess
from tests.view import chromium
from txn_workshop.harness.admin import TRANSACTION_STATE_TOPIC, create_topic
from txn_workshop.harness.broker import KafkaBroker
from txn_workshop.harness.workload import held_commit, reassign_partitions, transaction_state_partition

OPEN = [f"view-open-{n}" for n in range(3)]


@pytest.fixture(scope="module", params=["4.4.0", "3.9.2"])
def cluster(request, kafka_broker_factory, tmp_path_factory):
    root = tmp_path_factory.mktemp(f"view-{request.param}")
    with kafka_broker_factory.joined_pair(root, request.param, transaction_state_partitions=4) as (first, second):
        create_topic(first.bootstrap_servers, "held", partitions=1, replication_factor=2)
        create_topic(first.bootstrap_servers, "plain", partitions=2, replication_factor=1)
        yield first, second


def view(process: ExporterProcess, query: str = "") -> dict:
    status, body = process.get(f"/transactions?{query}")
    assert status == 200, body
    return json.loads(body)


def ids(doc: dict) -> list[str]:
    return [r["transactional_id"] for r in doc["transactions"]]


def describe(broker: KafkaBroker, tid: str) -> dict[str, str]:
    """Kafka's own view of a transactional id (TransactionsCommand describe: a header and one row)."""
    header, (row,) = broker.transactions_table("describe", "--transactional-id", tid)
    return dict(zip(header, row))


def open_transactions(bootstrap: str) -> list[Producer]:
    """Transactions left ONGOING, oldest first: written and flushed, neither committed nor aborted."""
    producers = []
    for n, tid in enumerate(OPEN):
        producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid, "transaction.timeout.ms": 300000})
        producer.init_transactions(60)
        producer.begin_transaction()
        producer.produce("plain", b"open", partition=n % 2)
        producer.flush(30)
        producers.append(producer)
    return producers


def test_a_held_commit_in_the_view(cluster, exporter):
    first, second = cluster
    bootstrap = first.bootstrap_servers
    process = exporter(
        bootstrap, "--all-partitions", "--broker-log", str(first.server_log), "--hanging-scan-interval-seconds", "0"
    )
    assert view(process)["transactions"] == []
    producers = open_transactions(bootstrap)
    process.wait_for(lambda: ids(view(process)) == OPEN, 60, "three ONGOING transactions, oldest first")

    with held_commit(bootstrap, second, "held", "view-held"):

        def held_with_error() -> bool:
            rows = [r for r in view(process)["transactions"] if r["transactional_id"] == "view-held"]
            return bool(rows and rows[0]["state"] == "PREPARE_COMMIT" and rows[0]["marker_errors"])

        process.wait_for(held_with_error, 60, "the held commit with its marker error")
        truth = describe(first, "view-held")
        (held,) = view(process, "state=PREPARE_COMMIT")["transactions"]
        assert truth["TransactionState"].replace("_", "").lower() == "preparecommit"
        assert (held["producer_id"], held["producer_epoch"]) == (int(truth["ProducerId"]), int(truth["ProducerEpoch"]))
        assert held["partitions"] == truth["TopicPartitions"].split(",") == ["held-0"]
        assert held["transaction_timeout_ms"] == int(truth["TransactionTimeoutMs"])
        assert held["coordinator_partition"] in range(4) and not held["late"]
        (error,) = held["marker_errors"]
        assert (error["partition"], error["error"]) == ("held-0", "NOT_ENOUGH_REPLICAS") and error["count"] >= 1
        age = held["age_seconds"]
        process.wait_for(
            lambda: view(process, "state=PREPARE_COMMIT")["transactions"][0]["age_seconds"] > age + 1,
            30,
            "its age growing",
        )

        # Filters and the limit, on what the exporter holds now: three ONGOING, one PREPARE_COMMIT.
        everything = view(process)
        assert ids(everything) == [*OPEN, "view-held"] and everything["in_flight_matching"] == 4
        limited = view(process, "limit=2")
        assert ids(limited) == OPEN[:2] and limited["in_flight_matching"] == 4
        assert ids(view(process, "state=ONGOING&limit=1")) == OPEN[:1]
        assert ids(view(process, "min_age=1h")) == []
        assert process.get("/transactions?state=DONE")[0] == 400

        cli = subprocess.run(
            [sys.executable, "-m", "exporter", "transactions", "--url", process.url, "--state", "PREPARE_COMMIT"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert cli.returncode == 0, cli.stderr
        assert cli.stdout.splitlines()[1].split()[:2] == ["view-held", "PREPARE_COMMIT"]

        dom = chromium.dump_dom(f"{process.url}/transactions")
        assert dom.count('data-label="Transactional id"') == 4
        assert "view-held" in dom and "NOT_ENOUGH_REPLICAS" in dom and "held-0" in dom

    process.wait_for(lambda: "view-held" not in ids(view(process)), 60, "the held commit completed")
    for producer in producers:
        producer.abort_transaction(60)
    process.wait_for(lambda: view(process)["transactions"] == [], 60, "the open transactions aborted")


JOB = "kafka-txn-exporter"


def coordinated_by(broker: KafkaBroker, per_broker: int, plan: Path) -> dict[int, list[str]]:
    """Per broker, `per_broker` transactional ids whose coordinator it is (the leader of their
    __transaction_state partition). The topic's partitions (replication factor 1) may all have gone
    to the first broker, when it was created before the second joined: the odd ones are moved."""
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})

    def leaders() -> dict[int, int]:
        topic = admin.list_topics(TRANSACTION_STATE_TOPIC, timeout=30).topics[TRANSACTION_STATE_TOPIC]
        return {p: m.leader for p, m in topic.partitions.items()}

    if set(leaders().values()) != {1, 2}:
        moved = {p: 2 if p % 2 else 1 for p in leaders()}
        reassign_partitions(broker, {(TRANSACTION_STATE_TOPIC, p): [b] for p, b in moved.items()}, plan)
        wait_until(lambda: leaders() == moved, 60, "__transaction_state's odd partitions led by broker 2")
    led = leaders()
    chosen: dict[int, list[str]] = {1: [], 2: []}
    for n in range(1000):
        tid = f"merge-{n}"
        ids = chosen[led[transaction_state_partition(tid, len(led))]]
        if len(ids) < per_broker:
            ids.append(tid)
    assert all(len(ids) == per_broker for ids in chosen.values()), led
    return chosen


def merged(capsys, *args: str) -> tuple[int, dict, str]:
    """`txn-exporter transactions ARGS --json`: (status, the merged document, the table)."""
    status = main(["transactions", *args, "--json", "--timeout", "5"])
    out, err = capsys.readouterr()
    assert err == ""
    table_status = main(["transactions", *args, "--timeout", "5"])
    table, err = capsys.readouterr()
    assert (table_status, err) == (status, "")
    return status, json.loads(out), table


def target_health(prometheus: Prometheus) -> dict[str, str]:
    with urllib.request.urlopen(f"{prometheus.url}/api/v1/targets?state=active", timeout=5) as response:
        targets = json.loads(response.read())["data"]["activeTargets"]
    return {t["labels"]["instance"]: t["health"] for t in targets if t["labels"]["job"] == JOB}


def wait_until(condition, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.25)


def test_two_exporters_merged_one_stopped(cluster, exporter, capsys, tmp_path):
    first, second = cluster
    ids = coordinated_by(first, 2, tmp_path / "plan.json")
    second_exporter = exporter(second.bootstrap_servers, "--broker-id", "2", "--hanging-scan-interval-seconds", "0")
    beside = {
        # The first serves the cluster page too: its own view and its peer's (scope=cluster).
        1: exporter(
            first.bootstrap_servers,
            "--broker-id",
            "1",
            "--hanging-scan-interval-seconds",
            "0",
            "--peer",
            second_exporter.url,
        ),
        2: second_exporter,
    }
    # Oldest first alternates between the brokers: 1, 2, 1, 2.
    opened = [ids[1][0], ids[2][0], ids[1][1], ids[2][1]]
    producers = []
    for tid in opened:
        producer = Producer({"bootstrap.servers": first.bootstrap_servers, "transactional.id": tid})
        producer.init_transactions(60)
        producer.begin_transaction()
        producer.produce("plain", b"open", partition=0)
        producer.flush(30)
        producers.append(producer)
        time.sleep(0.02)  # distinct start times: the order is the opening order
    urls = ["--url", beside[1].url, "--url", beside[2].url]
    for process, broker in ((beside[1], 1), (beside[2], 2)):
        wanted = ids[broker]
        process.wait_for(lambda p=process, w=wanted: w == ids_of(view(p)), 60, f"broker {broker}'s two transactions")

    status, doc, table = merged(capsys, *urls)
    assert status == 0 and ids_of(doc) == opened
    assert [r["exporter"]["broker_id"] for r in doc["transactions"]] == [1, 2, 1, 2]
    assert [(s["ok"], s["broker"]["id"]) for s in doc["sources"]] == [(True, 1), (True, 2)]
    lines = table.splitlines()
    assert lines[0].split()[:3] == ["BROKER", "TRANSACTIONAL_ID", "STATE"]
    assert [line.split()[:3] for line in lines[1:5]] == [
        [str(b), tid, "ONGOING"] for b, tid in zip([1, 2, 1, 2], opened)
    ]
    assert "2 of 2 exporters answered." in lines
    page = view(beside[1], "scope=cluster")
    assert ids_of(page) == opened and [r["exporter"]["broker_id"] for r in page["transactions"]] == [1, 2, 1, 2]

    instances = {1: beside[1].url.removeprefix("http://"), 2: beside[2].url.removeprefix("http://")}
    prometheus = Prometheus(
        {
            "global": {"scrape_interval": "1s", "scrape_timeout": "1s"},
            "scrape_configs": [
                {"job_name": JOB, "static_configs": [{"targets": [instances[1], instances[2]]}]},
                {"job_name": "prometheus", "static_configs": [{"targets": ["127.0.0.1:1"]}]},
            ],
        },
        tmp_path / "prometheus",
    )
    try:
        wait_until(lambda: set(target_health(prometheus).values()) == {"up"}, 30, "both exporters scraped")
        status, doc, table = merged(capsys, "--prometheus", prometheus.url, "--job", JOB)
        assert status == 0 and ids_of(doc) == opened
        assert [r["exporter"]["name"] for r in doc["transactions"]] == [instances[b] for b in (1, 2, 1, 2)]
        assert {s["prometheus"]["health"] for s in doc["sources"]} == {"up"}
        assert [line.split()[:2] for line in table.splitlines()[1:5]] == [
            [str(b), tid] for b, tid in zip([1, 2, 1, 2], opened)
        ]
        status = main(["transactions", "--prometheus", prometheus.url, "--job", "kafka"])
        _, err = capsys.readouterr()
        assert status == 2 and err.startswith(f"txn-exporter transactions: Prometheus at {prometheus.url} has no")
        assert "(its jobs: kafka-txn-exporter, prometheus)" in err

        beside[2].stop()
        status, doc, table = merged(capsys, *urls)
        assert status == 1 and ids_of(doc) == ids[1]
        assert [s["ok"] for s in doc["sources"]] == [True, False]
        line = f"NOT ANSWERING: {instances[2]} ({beside[2].url}/transactions): Connection refused"
        assert [r.split()[:2] for r in table.splitlines()[1:3]] == [["1", ids[1][0]], ["1", ids[1][1]]]
        lines = table.splitlines()
        assert lines[lines.index("1 of 2 exporters answered.") + 1] == line
        # Other filters than before: not the peer's answers kept (2 s) from then.
        page = view(beside[1], "scope=cluster&limit=50")
        assert ids_of(page) == ids[1] and page["sources"][1]["error"] == "Connection refused"
        dom = chromium.dump_dom(f"{beside[1].url}/transactions?scope=cluster&limit=40")
        assert dom.count('data-label="Broker"') == 2 and all(tid in dom for tid in ids[1])
        assert f'<p class="error">{line}</p>' in dom

        wait_until(lambda: target_health(prometheus)[instances[2]] == "down", 30, "Prometheus seeing it down")
        status, doc, table = merged(capsys, "--prometheus", prometheus.url)  # the default job
        assert status == 1 and ids_of(doc) == ids[1]
        lines = table.splitlines()
        assert lines[lines.index("1 of 2 exporters answered.") + 1].startswith(f"{line} (Prometheus: down, ")
    finally:
        prometheus.stop()
        for producer in producers:
            producer.abort_transaction(60)
        producers.clear()  # no client left to retry the brokers once the module stops them
        producer = None


def ids_of(doc: dict) -> list[str]:
    return [r["transactional_id"] for r in doc["transactions"]]

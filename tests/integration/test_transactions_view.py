"""The transactions view (GET /transactions, `txn-exporter transactions`) of a real exporter on real
two-broker clusters of 4.4.0 and 3.9.2: a commit whose markers are held back appears with what
Kafka's own `kafka-transactions.sh describe` says of it, its age growing and the held partition's
marker error from the broker log, then disappears once the markers are written; filters and the
limit hold on real data; Debian's chromium loads the page."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from confluent_kafka import Producer

from tests.integration.exporter_process import ExporterProcess
from tests.view import chromium
from txn_workshop.harness.admin import create_topic
from txn_workshop.harness.broker import KafkaBroker
from txn_workshop.harness.workload import held_commit

TOOL = "org.apache.kafka.tools.TransactionsCommand"
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
    proc = broker.run_tool(TOOL, "--bootstrap-server", broker.bootstrap_servers, "describe", "--transactional-id", tid)
    assert proc.returncode == 0, proc.stderr[-2000:]
    header, row = (line.split() for line in proc.stdout.splitlines() if line.strip())
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

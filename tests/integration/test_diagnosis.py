"""The transactions view's diagnosis on real three-broker clusters of 4.4.0 and 3.9.2, one cluster and
one exporter per version shared by every scenario (CI time):

- a follower paused (SIGSTOP) under min.insync.replicas=2: the held commit's diagnosis names the paused
  broker out of the ISR and the setting (topic's own), flags the commit stuck, counts it, gives the
  runbook and Kafka's commands; the terminal table and the page in Debian's chromium show it;
- in the same hold, a partition's leadership moved (replicas reordered, preferred election): the
  NOT_LEADER_OR_FOLLOWER the coordinator met on the way is explained, naming the new leader;
- a producer killed mid-transaction: late, and DescribeProducers says the client stopped;
- a hanging transaction: its abort command, which Kafka's own tool runs, and the view then has none.

Topology: broker 1 is the controller and every `__transaction_state` partition's only replica (so the
coordinator of everything); `diag-held` lives on brokers 2 and 3 (min.insync.replicas=2), `diag-moved`
on 1, 2 and 3 (min.insync.replicas=3); broker 3 is the one paused. A paused follower whose log is not
behind stays "caught up", so a write with acks=1 after the pause moves the leader's end on and the ISR
shrinks after replica.lag.time.max.ms (2 s here). The coordinator's sweep of timed-out transactions is
set to an hour, so a killed producer's transaction stays ONGOING and late for as long as the test
looks at it.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaAdminClient, TopicPartition

from exporter.logs import kafka_client_logger
from tests.integration.exporter_process import ExporterProcess
from tests.view import chromium
from txn_workshop.harness.broker import KafkaBroker
from txn_workshop.harness.workload import timed_out_producer, unregistered_transaction

VERSIONS = ["4.4.0", "3.9.2"]
TOOL = "org.apache.kafka.tools.TransactionsCommand"
PROPERTIES = {
    "replica.lag.time.max.ms": "2000",
    # The coordinator's sweep of timed-out transactions: never during a test (see the docstring).
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "3600000",
    # unregistered_transaction's hanging transaction needs the pre-KIP-890 broker behaviour.
    "transaction.partition.verification.enable": "false",
}
CLIENT = {"logger": kafka_client_logger("librdkafka.test")}
TIMEOUT_MS = 4000  # the held transactions' own timeout: stuck after 4 s + 1 s of padding in PREPARE_*


@contextmanager
def three_brokers(pool, root: Path, version: str) -> Iterator[tuple[KafkaBroker, KafkaBroker, KafkaBroker]]:
    first = KafkaBroker(version, workdir=root / "1", transaction_state_partitions=4, broker_properties=PROPERTIES)
    brokers = (
        first,
        KafkaBroker(version, workdir=root / "2", join=first, node_id=2, broker_properties=PROPERTIES),
        KafkaBroker(version, workdir=root / "3", join=first, node_id=3, broker_properties=PROPERTIES),
    )
    try:
        for broker in brokers:
            pool.make_room()
            pool.own.append(broker)
            broker.start()
        yield brokers
    finally:
        for broker in reversed(brokers):  # joined brokers first: they need the controller to stop
            broker.stop()
            if broker in pool.own:
                pool.own.remove(broker)


@pytest.fixture(scope="module", params=VERSIONS)
def cluster(request, kafka_broker_factory, tmp_path_factory):
    root = tmp_path_factory.mktemp(f"diag-{request.param}")
    with three_brokers(kafka_broker_factory, root, request.param) as brokers:
        admin = AdminClient({"bootstrap.servers": brokers[0].bootstrap_servers, **CLIENT})
        topics = [
            NewTopic("diag-held", 1, -1, replica_assignment=[[2, 3]], config={"min.insync.replicas": "2"}),
            NewTopic("diag-moved", 1, -1, replica_assignment=[[1, 2, 3]], config={"min.insync.replicas": "3"}),
            NewTopic("diag-plain", 1, -1, replica_assignment=[[2]]),
            NewTopic("diag-ghost", 1, -1, replica_assignment=[[1]]),
        ]
        for future in admin.create_topics(topics, operation_timeout=30).values():
            future.result(60)
        process = ExporterProcess(
            brokers[0].bootstrap_servers,
            "--all-partitions",
            "--broker-log",
            str(brokers[0].server_log),
            "--late-transaction-padding-seconds",
            "1",
            "--hanging-scan-interval-seconds",
            "1",
            "--hanging-max-transaction-timeout-seconds",
            "1",
            log=root / "exporter.log",
        )
        try:
            process.wait_ready(120)
            yield brokers, process
        finally:
            process.stop()


def view(process: ExporterProcess, query: str = "") -> dict:
    status, body = process.get(f"/transactions?{query}")
    assert status == 200, body
    return json.loads(body)


def row(process: ExporterProcess, tid: str) -> dict | None:
    return next((r for r in view(process)["transactions"] if r["transactional_id"] == tid), None)


def isr(admin: KafkaAdminClient, topic: str) -> list[int] | None:
    try:
        (described,) = admin.describe_topics([topic])
        return described["partitions"][0]["isr_nodes"]
    except Exception:  # a request that went to the paused broker: ask again
        return None


def wait(condition, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.25)


def open_transaction(bootstrap: str, tid: str, topic: str) -> Producer:
    producer = Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": tid, "transaction.timeout.ms": TIMEOUT_MS, **CLIENT}
    )
    producer.init_transactions(60)
    producer.begin_transaction()
    producer.produce(topic, b"held", partition=0)
    assert producer.flush(30) == 0
    return producer


def move_leader(admin: KafkaAdminClient, topic: str, replicas: list[int]) -> None:
    """Leadership to `replicas[0]`: the same replicas reordered (no data moves), then a preferred election."""
    admin.alter_partition_reassignments({TopicPartition(topic, 0): replicas})
    wait(lambda: not admin.list_partition_reassignments(), 30, "the reordering")
    admin.elect_leaders(0, {topic: [0]}, raise_errors=False)


def test_a_paused_follower_and_a_moved_leader_explained(cluster):
    (first, _, third), process = cluster
    bootstrap = first.bootstrap_servers
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=3000)
    held = open_transaction(bootstrap, "diag-held-tx", "diag-held")
    moved = open_transaction(bootstrap, "diag-moved-tx", "diag-moved")
    third.pause()
    try:
        writer = Producer({"bootstrap.servers": bootstrap, "acks": 1, **CLIENT})
        for topic in ("diag-held", "diag-moved"):
            writer.produce(topic, b"after the pause", partition=0)
        assert writer.flush(30) == 0
        wait(lambda: isr(admin, "diag-held") == [2] and isr(admin, "diag-moved") in ([1, 2], [2, 1]), 60, "ISRs shrunk")
        held.commit_transaction(30)  # PREPARE_COMMIT written; its markers are refused from now on
        moved.commit_transaction(30)

        def diagnosed(tid: str, error: str) -> bool:
            """Stuck, `error` read, and the cluster's state looked up (a first look may time out)."""
            r = row(process, tid)
            if not (r and r["stuck"] and r["diagnosis"] and any(e["error"] == error for e in r["marker_errors"])):
                return False
            # Every fact of the refusing partition: a lookup that went to the paused broker timed out
            # (shown unknown, as it should) and is asked again.
            facts = ("leader", "isr", "min_insync_replicas")
            known = [p for p in r["diagnosis"]["partitions"] if p["errors"] and all(p[f] is not None for f in facts)]
            return bool(known) and r["coordinator_broker"] is not None

        process.wait_for(lambda: diagnosed("diag-held-tx", "NOT_ENOUGH_REPLICAS"), 60, "the held commit, stuck")
        r = row(process, "diag-held-tx")
        assert r["state"] == "PREPARE_COMMIT" and r["late"] is None and r["coordinator_broker"] == 1
        diagnosis = r["diagnosis"]
        (partition,) = [p for p in diagnosis["partitions"] if p["partition"] == "diag-held-0"]
        assert (partition["leader"], partition["replicas"], partition["isr"], partition["out_of_isr"]) == (
            2,
            [2, 3],
            [2],
            [3],
        )
        assert (partition["min_insync_replicas"], partition["min_insync_replicas_source"]) == (2, "topic")
        cause = partition["errors"][0]["cause"]
        assert "leader 2 refuses the marker" in cause and "broker 3 (" in cause
        assert "min.insync.replicas=2 (the topic's own setting)" in cause
        assert diagnosis["coordinator"]["broker"] == 1 and diagnosis["coordinator"]["partition"].startswith(
            "__transaction_state-"
        )
        assert diagnosis["runbook"]["section"] == "KafkaTransactionMarkersPendingTooLong"
        commands = [c["command"] for c in diagnosis["commands"]]
        assert (
            f"kafka-transactions.sh --bootstrap-server {bootstrap} describe --transactional-id diag-held-tx" in commands
        )
        assert f"kafka-topics.sh --bootstrap-server {bootstrap} --describe --topic diag-held" in commands
        assert any(c.endswith("--entity-name diag-held --add-config min.insync.replicas=1") for c in commands)
        assert diagnosis["abort"]["allowed"] is False
        # The ordinary cause explains it: no known bug is claimed.
        bugs = diagnosis["known_bugs"]
        assert bugs["matches"] == [] and "is below min.insync.replicas=2" in bugs["ordinary_cause"]
        # What Kafka's describe calls TransactionDurationMs: since the start, more than the time in PREPARE_*.
        assert r["duration_seconds"] > r["age_seconds"] > TIMEOUT_MS / 1000
        process.wait_for(lambda: process.value("kafka_transactions_stuck_in_prepare") == 2, 30, "two stuck counted")

        # The terminal table and the page, while it is held.
        cli = subprocess.run(
            [sys.executable, "-m", "exporter", "transactions", "--url", process.url, "--state", "PREPARE_COMMIT"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert cli.returncode == 0, cli.stderr
        assert re.search(r"diag-held-0: NOT_ENOUGH_REPLICAS x\d+, last [\d.]+ s ago", cli.stdout), cli.stdout
        assert "\nDiagnosis:\n" in cli.stdout and "  why: diag-held-0: NOT_ENOUGH_REPLICAS: leader 2" in cli.stdout
        dom = chromium.dump_dom(f"{process.url}/transactions")
        assert '<meta http-equiv="refresh" content="2">' in dom and 'data-label="Diagnosis"' in dom
        assert "ISR [2] of replicas [2, 3] is below min.insync.replicas=2" in dom and ">stuck<" in dom

        # Leadership of diag-moved from broker 1 (the coordinator itself) to broker 2: the coordinator
        # learns it first and sends to broker 2 before broker 2 knows, which answers NOT_LEADER_OR_FOLLOWER
        # for those few milliseconds. Moved back and forth until one such answer was read (at most 3 times).
        process.wait_for(lambda: diagnosed("diag-moved-tx", "NOT_ENOUGH_REPLICAS"), 60, "the moved one held")
        for _ in range(3):
            move_leader(admin, "diag-moved", [2, 1, 3])
            try:
                process.wait_for(lambda: diagnosed("diag-moved-tx", "NOT_LEADER_OR_FOLLOWER"), 10, "the leader moved")
                break
            except AssertionError:
                move_leader(admin, "diag-moved", [1, 2, 3])
                time.sleep(1)

        def moved_partition() -> dict:
            r = row(process, "diag-moved-tx")
            return next(p for p in r["diagnosis"]["partitions"] if p["partition"] == "diag-moved-0")

        # The cluster's state is cached a few seconds: the new leader shows at the next refresh.
        process.wait_for(
            lambda: moved_partition()["leader"] == 2 and moved_partition()["min_insync_replicas"] is not None,
            30,
            "the diagnosis naming the new leader",
        )
        partition = moved_partition()
        (moved_error,) = [e for e in partition["errors"] if e["error"] == "NOT_LEADER_OR_FOLLOWER"]
        assert "no longer the partition's leader" in moved_error["cause"]
        assert f"(now broker {partition['leader']})" in moved_error["cause"] and partition["leader"] == 2
        assert any(e["error"] == "NOT_ENOUGH_REPLICAS" for e in partition["errors"])  # still held at broker 2
        assert partition["min_insync_replicas"] == 3 and partition["out_of_isr"] == [3]
    finally:
        third.resume()
        admin.close()
    process.wait_for(
        lambda: {r["transactional_id"] for r in view(process)["transactions"]}.isdisjoint(
            {"diag-held-tx", "diag-moved-tx"}
        ),
        90,
        "both commits completed once broker 3 is back",
    )
    assert process.value("kafka_transactions_stuck_in_prepare") == 0


def test_a_late_ongoing_whose_client_stopped(cluster):
    (first, _, _), process = cluster
    bootstrap = first.bootstrap_servers
    timed_out_producer(bootstrap, "diag-late", "diag-plain", transaction_timeout_ms=2000, wait=False)

    def late_with_producers() -> bool:
        r = row(process, "diag-late")
        return bool(
            r
            and r["late"]
            and r["diagnosis"]
            and any(p.get("producer", {}).get("found") for p in r["diagnosis"]["partitions"])
        )

    process.wait_for(late_with_producers, 60, "the late transaction with its producer state")
    r = row(process, "diag-late")
    diagnosis = r["diagnosis"]
    assert diagnosis["runbook"]["section"] == "KafkaTransactionsLate"
    assert "the client stopped: its last write to these partitions was" in diagnosis["summary"]
    (partition,) = diagnosis["partitions"]
    producer = partition["producer"]
    assert partition["partition"] == "diag-plain-0" and partition["leader"] == 2
    assert producer["producer_epoch"] == r["producer_epoch"] and producer["transaction_start_offset"] >= 0
    assert producer["last_write_seconds_ago"] > 2
    # Held against the known bugs on its coordinator's version, from its ApiVersions answer (the exporter
    # follows every partition: its own broker is not known): these versions have every fix.
    major, minor, _ = first.version.split(".")
    assert diagnosis["known_bugs"] == {
        "matches": [],
        "not_checked": [],
        "ordinary_cause": None,
        "versions": {"coordinator": f"{major}.{minor}.x"},
    }
    assert (
        f"kafka-transactions.sh --bootstrap-server {bootstrap} describe-producers --topic diag-plain --partition 0"
        in [c["command"] for c in diagnosis["commands"]]
    )
    # A new instance of the producer fences the dead one: the coordinator aborts its transaction.
    Producer({"bootstrap.servers": bootstrap, "transactional.id": "diag-late", **CLIENT}).init_transactions(60)
    process.wait_for(lambda: row(process, "diag-late") is None, 60, "the fenced transaction aborted")


def test_a_hanging_transaction_gets_the_abort_command_that_aborts_it(cluster):
    (first, _, _), process = cluster
    bootstrap = first.bootstrap_servers
    unregistered_transaction(bootstrap, "diag-ghost", "diag-ghost")
    process.wait_for(lambda: view(process, "state=HANGING")["hanging"], 60, "a hanging transaction")
    (hanging,) = view(process, "state=HANGING")["hanging"]
    assert (hanging["topic"], hanging["partition"], hanging["verdict"]) == ("diag-ghost", 0, "hanging")
    assert hanging["runbook"]["section"] == "KafkaHangingTransactions"
    abort = hanging["abort_command"]
    assert abort == (
        f"kafka-transactions.sh --bootstrap-server {bootstrap} abort --topic diag-ghost --partition 0"
        f" --start-offset {hanging['start_offset']}"
    )
    assert [c["command"] for c in hanging["commands"]][1] == abort
    assert view(process)["hanging_scan_ms"] > 0
    # The command as printed, with Kafka's TransactionsCommand for kafka-transactions.sh.
    result = first.run_tool(TOOL, *abort.split()[1:])
    assert result.returncode == 0, result.stdout + result.stderr
    process.wait_for(lambda: not view(process, "state=HANGING")["hanging"], 60, "no hanging transaction left")

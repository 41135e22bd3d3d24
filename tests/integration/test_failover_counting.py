"""Every `__transaction_state` record counted exactly once and timed on the coordinator's clock through
failovers, as Kafka's own transactions system test bounces brokers: a three-node 4.4.0 KRaft cluster
in the deployment shape (`__transaction_state` 50 partitions, replication factor 3, min.insync.replicas
2, Kafka's default broker.session.timeout.ms), the coordinators' DEBUG lines in the file deploy/'s
logging gives them, an exporter beside each broker (`--broker-id N --broker-log txn-coordinator.log`,
bootstrapping from the whole cluster), transactions running throughout; node 2 killed (SIGKILL) and
restarted, node 3 the same, node 2 stopped cleanly (SIGTERM) and restarted, each followed by a
preferred leader election.

Truth is Kafka's: DumpLogSegments of every partition, and the coordinators' own `succeeded` lines in
their log files. Per target state the exporters' records together equal the records appended since
they started; each record they counted is timed by the coordinator's clock or, without a `succeeded`
line (a leader that stepped down or died before the append's acknowledgement), counted untimed with
that reason; no alarm is left once the transactions have settled.
"""

from __future__ import annotations

import re
import time
from collections import Counter
from pathlib import Path

import pytest
from confluent_kafka import Consumer, ElectionType, TopicPartition
from confluent_kafka.admin import AdminClient

from tests.integration.exporter_process import ExporterProcess
from tests.integration.test_decode_matches_kafka import _kafkas
from txn_workshop.harness.admin import TRANSACTION_STATE_TOPIC, create_internal_topics, create_topic
from txn_workshop.harness.broker import KafkaBroker
from txn_workshop.harness.versions import kafka_version
from txn_workshop.harness.workload import transaction_state_partition, transactions_running

VERSION = "4.4.0"
NODES = (1, 2, 3)
PARTITIONS = 50
DEPLOY_LOGGING = Path(__file__).resolve().parents[2] / "deploy" / "broker-logging"
COORDINATOR_LOG = "txn-coordinator.log"
STATES = ("EMPTY", "ONGOING", "PREPARE_COMMIT", "PREPARE_ABORT", "COMPLETE_COMMIT", "COMPLETE_ABORT")
# A `succeeded` line's transactional id and target state (both formats: 3.x's and 4.1+'s).
SUCCEEDED = re.compile(r"Updating (.*)'s transaction state to .*?txnState=(\w+).* succeeded")
CLUSTER = {
    "transaction.state.log.replication.factor": "3",
    "transaction.state.log.min.isr": "2",
    "offsets.topic.replication.factor": "3",
    # Leaders move only when the test moves them (a kill, a stop, an election).
    "auto.leader.rebalance.enable": "false",
}
# 3.x's state names in the lines and DumpLogSegments, as the exporter's target_state label has them.
_STATE_NAMES = {
    "Empty": "EMPTY",
    "Ongoing": "ONGOING",
    "PrepareCommit": "PREPARE_COMMIT",
    "PrepareAbort": "PREPARE_ABORT",
    "CompleteCommit": "COMPLETE_COMMIT",
    "CompleteAbort": "COMPLETE_ABORT",
}

pytestmark = [pytest.mark.kafka, pytest.mark.alone]


@pytest.fixture
def cluster(kafka_broker_factory, tmp_path_factory):
    root = tmp_path_factory.mktemp("failover")
    logging_config = DEPLOY_LOGGING / kafka_version(VERSION).log4j_config
    with kafka_broker_factory.joined(
        root,
        VERSION,
        len(NODES),
        broker_properties=CLUSTER,
        logging_config=logging_config,
        internal_topics_on_join=False,  # created once all three run: replication factor 3
    ) as brokers:
        bootstrap = ",".join(b.bootstrap_servers for b in brokers)
        create_internal_topics(bootstrap)
        create_topic(bootstrap, "orders", partitions=3, replication_factor=3)
        yield brokers


def _topic(bootstrap: str) -> dict[int, tuple[int, list[int], list[int]]]:
    partitions = (
        AdminClient({"bootstrap.servers": bootstrap}).list_topics(TRANSACTION_STATE_TOPIC, timeout=30).topics
    )[TRANSACTION_STATE_TOPIC].partitions
    return {p: (m.leader, list(m.replicas), sorted(m.isrs)) for p, m in partitions.items()}


def _settle(bootstrap: str, exporters: dict[int, ExporterProcess]) -> None:
    """Every replica in sync, every partition led by its preferred replica (a preferred election), and
    each exporter following exactly the partitions its broker leads, live."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + 180
    while True:
        topic = _topic(bootstrap)
        if all(isr == sorted(NODES) for _, _, isr in topic.values()):
            if all(leader == replicas[0] for leader, replicas, _ in topic.values()):
                break
            try:
                admin.elect_leaders(
                    ElectionType.PREFERRED, [TopicPartition(TRANSACTION_STATE_TOPIC, p) for p in topic]
                ).result(30)
            except Exception:  # some already led by their preferred replica: the rest moved anyway
                pass
        assert time.monotonic() < deadline, f"not settled: {topic}"
        time.sleep(1)
    for node, process in exporters.items():
        led = {str(p) for p, (leader, _, _) in topic.items() if leader == node}
        process.wait_for(
            lambda p=process, led=led: (
                {dict(labels)["partition"] for (name, labels) in p.samples() if name.endswith("lag_records")} == led
                and p.value("txn_exporter_partitions_followed", phase="live") == len(led)
            ),
            120,
            f"exporter {node} following {len(led)} partitions live",
        )


def _moved_away(bootstrap: str, node: int) -> None:
    """Until `node` leads no partition (the controller fenced it, or its shutdown moved them)."""
    deadline = time.monotonic() + 120
    while any(leader == node for leader, _, _ in _topic(bootstrap).values()):
        assert time.monotonic() < deadline, f"node {node} still leads partitions"
        time.sleep(0.5)


def _high_watermarks(bootstrap: str) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "failover-truth"})
    try:
        return {
            p: consumer.get_watermark_offsets(TopicPartition(TRANSACTION_STATE_TOPIC, p), timeout=30)[1]
            for p in range(PARTITIONS)
        }
    finally:
        consumer.close()


def _sum(exporters: dict[int, ExporterProcess], name: str, **fixed: str) -> Counter[str]:
    """The exporters' sum of `name` by target state, over the series with the `fixed` labels."""
    total: Counter[str] = Counter()
    for process in exporters.values():
        for (n, labels), value in process.samples().items():
            found = dict(labels)
            if n == name and all(found.get(k) == v for k, v in fixed.items()):
                total[found["target_state"]] += int(value)
    return total


def _succeeded_lines(brokers: list[KafkaBroker]) -> Counter[tuple[str, str]]:
    """(transactional id, target state) of every `succeeded` line the coordinators wrote."""
    lines: Counter[tuple[str, str]] = Counter()
    for broker in brokers:
        for path in broker.logs_dir.glob(COORDINATOR_LOG + "*"):
            for match in SUCCEEDED.finditer(path.read_text(errors="replace")):
                lines[match[1], _STATE_NAMES.get(match[2], match[2])] += 1
    return lines


def test_bounced_brokers_leave_every_record_counted_once_and_timed_or_untimed_with_a_reason(cluster, tmp_path):
    brokers = cluster
    bootstrap = ",".join(b.bootstrap_servers for b in brokers)
    exporters = {}
    try:
        for broker in brokers:
            exporters[broker.node_id] = ExporterProcess(
                # The exporter reaches the cluster through its own broker and the others: it drains
                # what its broker led while that broker is down.
                f"{broker.bootstrap_servers},{bootstrap}",
                "--broker-id",
                str(broker.node_id),
                "--broker-log",
                str(broker.logs_dir / COORDINATOR_LOG),
                "--hanging-scan-interval-seconds",
                "0",
                log=tmp_path / f"exporter-{broker.node_id}.log",
            )
        for process in exporters.values():
            process.wait_ready(120)
        _settle(bootstrap, exporters)
        start = _high_watermarks(bootstrap)
        # Transactional ids on every coordinator: 12 producers, each on its own partition.
        ids = [
            next(
                f"failover-{p}-{i}" for i in range(10_000) if transaction_state_partition(f"failover-{p}-{i}", 50) == p
            )
            for p in range(0, PARTITIONS, 4)
        ]
        by_node = {broker.node_id: broker for broker in brokers}
        with transactions_running(bootstrap, "orders", ids) as clients:
            time.sleep(5)
            for node, bounce in ((2, KafkaBroker.kill), (3, KafkaBroker.kill), (2, KafkaBroker.stop)):
                bounce(by_node[node])
                _moved_away(bootstrap, node)
                time.sleep(3)  # transactions on the survivors
                by_node[node].start()
                _settle(bootstrap, exporters)
                time.sleep(3)
        assert clients.commits > 0 and clients.aborts > 0, clients
        for process in exporters.values():
            process.wait_for(
                lambda p=process: p.value("kafka_transactions_with_pending_markers") == 0, 60, "no pending markers"
            )

        # Truth: DumpLogSegments of node 1's copy (every replica in sync: the leaders' records).
        records = {key: r for key, r in _kafkas(by_node[1]).items() if key[1] >= start[key[0]] and r["value"]}
        truth = Counter(_STATE_NAMES.get(r["value"]["state"], r["value"]["state"]) for r in records.values())
        wanted = {s: truth[s] for s in STATES}
        exporters[1].wait_for(
            lambda: _sum(exporters, "kafka_transaction_state_log_records_total") == wanted,
            60,
            f"records by target state {wanted}",
        )
        # Each counted record timed by the coordinator's clock, or untimed for a reason: none by the
        # fetch, none for no reason.
        transitions = "txn_exporter_append_latency_transitions_total"
        timed = _sum(exporters, transitions, clock="coordinator")
        untimed = _sum(exporters, transitions, clock="untimed")
        assert _sum(exporters, transitions, clock="fetch") == dict.fromkeys(STATES, 0)
        assert {s: timed[s] + untimed[s] for s in STATES} == wanted
        reasons = Counter()
        for process in exporters.values():
            for (name, labels), value in process.samples().items():
                if name == "txn_exporter_append_clock_unmatched_total" and dict(labels)["kind"] == "record":
                    reasons[dict(labels)["reason"]] += int(value)
        assert sum(reasons.values()) == sum(untimed.values()) and reasons["expired"] == reasons["evicted"] == 0
        # The coordinators' own lines: a record is timed where its coordinator wrote one (a transition
        # repeated alike, e.g. by a producer fenced and re-initialised, has one line each).
        lines = _succeeded_lines(brokers)
        in_window = Counter(
            (r["transactional_id"], _STATE_NAMES.get(r["value"]["state"], r["value"]["state"]))
            for r in records.values()
        )
        with_line = sum(min(n, lines[key]) for key, n in in_window.items())
        assert sum(timed.values()) == with_line, (timed, with_line)
        # Nothing left behind: no alarm, and the gauges each partition's leader's exporter alone shows.
        for process in exporters.values():
            assert process.value("kafka_transactions_stuck_in_prepare") == 0
            assert process.value("kafka_transactions_late") == 0
    finally:
        for process in exporters.values():
            process.stop()
    print(f"\nfailover: clients {clients}; records {dict(truth)}; untimed {dict(untimed)} by reason {dict(reasons)}")

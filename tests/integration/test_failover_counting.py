"""Every `__transaction_state` record counted exactly once and timed on the coordinator's clock through
failovers (txn_workshop.failover: 4.4.0, three nodes in the deployment shape, node 2 killed, node 3
killed, node 2 stopped cleanly, each restarted and led back by a preferred election), transactions
running throughout, an exporter beside each broker (`--broker-id N --broker-log txn-coordinator.log`,
bootstrapping from the whole cluster).

Truth is Kafka's: DumpLogSegments of every partition, and the coordinators' own `succeeded` lines in
their log files. Per target state the exporters' records together equal the records appended since
they started; each record is timed by the coordinator's clock exactly where its coordinator wrote a
`succeeded` line, and counted untimed, with a reason, where it wrote none (a leader killed before the
line reached its file, or stepping down); nothing is left pending, stuck or late once the
transactions have settled. The same on 3.9.2 and ZooKeeper-mode 3.9.2, and in the fetch-timed mode:
bench/failover_counting.py.
"""

from __future__ import annotations

import time
from collections import Counter

import pytest

from tests.integration.exporter_process import ExporterProcess
from tests.integration.test_decode_matches_kafka import _kafkas
from txn_workshop import failover
from txn_workshop.harness.workload import transactions_running

VERSION = "4.4.0"
STATES = ("EMPTY", "ONGOING", "PREPARE_COMMIT", "PREPARE_ABORT", "COMPLETE_COMMIT", "COMPLETE_ABORT")
TRANSITIONS = "txn_exporter_append_latency_transitions_total"

pytestmark = [pytest.mark.kafka, pytest.mark.alone]


@pytest.fixture
def cluster(kafka_broker_factory, tmp_path_factory):
    kafka_broker_factory.stop_all()  # three JVMs of its own: no session broker beside them
    with failover.cluster(VERSION, tmp_path_factory.mktemp("failover")) as brokers:
        yield brokers


def _following(exporters: dict[int, ExporterProcess], led: dict[int, set[int]]) -> None:
    """Each exporter following exactly the partitions its broker leads, live."""
    for node, process in exporters.items():
        wanted = {str(p) for p in led[node]}
        process.wait_for(
            lambda p=process, wanted=wanted: (
                {dict(labels)["partition"] for (name, labels) in p.samples() if name.endswith("lag_records")} == wanted
                and p.value("txn_exporter_partitions_followed", phase="live") == len(wanted)
            ),
            120,
            f"exporter {node} following {len(wanted)} partitions live",
        )


def _sum(exporters: dict[int, ExporterProcess], name: str, by: str = "target_state", **fixed: str) -> Counter[str]:
    """The exporters' sum of `name` by the label `by`, over the series with the `fixed` labels."""
    total: Counter[str] = Counter()
    for process in exporters.values():
        for (n, labels), value in process.samples().items():
            found = dict(labels)
            if n == name and all(found.get(k) == v for k, v in fixed.items()):
                total[found[by]] += int(value)
    return total


def _key(record: dict) -> failover.Key:
    value = record["value"]
    return (
        record["transactional_id"],
        failover.STATE_NAMES.get(value["state"], value["state"]),
        value["producer_id"],
        value["producer_epoch"],
        value["last_update_timestamp_ms"],
    )


def test_bounced_brokers_leave_every_record_counted_once_and_timed_or_untimed_with_a_reason(cluster, tmp_path):
    brokers = cluster
    bootstrap = failover.bootstrap_of(brokers)
    by_node = {broker.node_id: broker for broker in brokers}
    exporters: dict[int, ExporterProcess] = {}
    try:
        for broker in brokers:
            exporters[broker.node_id] = ExporterProcess(
                # Its own broker and the others: it drains what its broker led while that one is down.
                f"{broker.bootstrap_servers},{bootstrap}",
                "--broker-id",
                str(broker.node_id),
                "--broker-log",
                str(broker.logs_dir / failover.COORDINATOR_LOG),
                "--hanging-scan-interval-seconds",
                "0",
                log=tmp_path / f"exporter-{broker.node_id}.log",
            )
        for process in exporters.values():
            process.wait_ready(120)
        _following(exporters, failover.settle(bootstrap))
        start = failover.high_watermarks(bootstrap)
        with transactions_running(bootstrap, failover.DATA_TOPIC, failover.spread_ids("failover")) as clients:
            time.sleep(5)
            for node, how in failover.BOUNCES:
                failover.bounce(by_node[node], how)
                failover.moved_away(bootstrap, node)
                time.sleep(3)  # transactions on the survivors
                by_node[node].start()
                _following(exporters, failover.settle(bootstrap))
                time.sleep(3)
        assert clients.commits > 0 and clients.aborts > 0, clients
        for process in exporters.values():
            process.wait_for(
                lambda p=process: p.value("kafka_transactions_with_pending_markers") == 0, 60, "no pending markers"
            )

        # Truth: DumpLogSegments of node 1's copy (every replica in sync: the leaders' records).
        records = {key: r for key, r in _kafkas(by_node[1]).items() if key[1] >= start[key[0]] and r["value"]}
        truth = Counter(_key(r)[1] for r in records.values())
        wanted = {s: truth[s] for s in STATES}
        exporters[1].wait_for(
            lambda: _sum(exporters, "kafka_transaction_state_log_records_total") == wanted,
            60,
            f"records by target state {wanted}",
        )
        # Timed by the coordinator's clock exactly where the coordinator wrote a line; the others
        # untimed, each for a reason; none by the fetch.
        lines = failover.succeeded_lines(brokers)
        with_line = Counter(_key(r)[1] for r in records.values() if _key(r) in lines)
        timed, untimed = (
            _sum(exporters, TRANSITIONS, clock="coordinator"),
            _sum(exporters, TRANSITIONS, clock="untimed"),
        )
        reasons = _sum(exporters, "txn_exporter_append_clock_unmatched_total", by="reason", kind="record")
        assert timed == with_line, (timed, with_line, untimed, reasons)
        assert _sum(exporters, TRANSITIONS, clock="fetch") == dict.fromkeys(STATES, 0)
        assert sum(reasons.values()) == sum(untimed.values()) and reasons["expired"] == reasons["evicted"] == 0
        # Each move was a takeover on one side and a drain read to its end on the other.
        drains = _sum(exporters, "txn_exporter_partition_drains_total", by="outcome")
        taken_over = sum(process.value("txn_exporter_partitions_taken_over_total") for process in exporters.values())
        assert drains["cut"] == 0 and drains["read_to_end"] > 0 and taken_over > 0
        # Nothing left behind.
        for process in exporters.values():
            assert process.value("kafka_transactions_stuck_in_prepare") == 0
            assert process.value("kafka_transactions_late") == 0
    finally:
        for process in exporters.values():
            process.stop()
    print(f"\nfailover: clients {clients}; records {dict(truth)}; untimed {dict(untimed)} by reason {dict(reasons)}")

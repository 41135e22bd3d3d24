"""deploy/broker-logging/'s log4j configurations on real brokers (log4j 1 on the newest 3.x, log4j2 on
the newest 4.x): server.log stays at INFO, the coordinator's lines (TransactionStateManager at DEBUG
from the file, not at run time) go to txn-coordinator.log, and the exporter reading that file times
every transition by the coordinator's own clock, as its `succeeded` line minus the record's CreateTime
in Kafka's DumpLogSegments."""

from __future__ import annotations

from pathlib import Path

import pytest

from txn_workshop import append_latency
from txn_workshop.harness.admin import create_topic
from txn_workshop.harness.broker import KafkaBroker
from txn_workshop.harness.versions import VERSIONS, kafka_version
from txn_workshop.harness.workload import transactions_running

DEPLOY = Path(__file__).parents[2] / "deploy" / "broker-logging"
NEWEST = {log4j: next(v.version for v in VERSIONS if v.log4j == log4j) for log4j in (1, 2)}
IDS = [f"logging-{n}" for n in range(3)]


@pytest.mark.parametrize("version", [NEWEST[2], NEWEST[1]])
def test_the_coordinators_file_of_its_own_times_every_transition_and_server_log_stays_at_info(
    version, kafka_broker_factory, exporter, tmp_path
):
    config = DEPLOY / kafka_version(version).log4j_config
    broker = KafkaBroker(version, workdir=tmp_path / "broker", logging_config=config, transaction_state_partitions=4)
    kafka_broker_factory.make_room()
    kafka_broker_factory.own.append(broker)
    broker.start()
    coordinator_log = broker.logs_dir / "txn-coordinator.log"
    try:
        create_topic(broker.bootstrap_servers, "plain", partitions=2)
        process = exporter(
            broker.bootstrap_servers, "--broker-log", str(coordinator_log), *append_latency.EXPORTER_FLAGS
        )
        with transactions_running(broker.bootstrap_servers, "plain", ["logging-warm-up"], pause_s=0.2):
            process.wait_for(
                lambda: process.value("txn_exporter_append_latency_clock_info", clock="coordinator") == 1,
                60,
                "the coordinator's clock",
            )
        with transactions_running(broker.bootstrap_servers, "plain", IDS, pause_s=0.1) as counts:
            process.wait_for(lambda: counts.commits + counts.aborts >= 30, 60, "30 transactions")
        tids = set(IDS)
        succeeded, _ = append_latency.coordinator_lines(sorted(broker.logs_dir.glob("txn-coordinator.log*")), tids)
        created = append_latency.dumped_create_times(broker.dump_transaction_log(), tids)
        truth = {t: max(0, succeeded[t] - created[t]) for t in succeeded}
        assert len(truth) >= 3 * 30
        process.wait_for(
            lambda: set(append_latency.exporter_timed(process.log, tids)) >= set(truth), 60, "every transition timed"
        )
        ours = append_latency.exporter_timed(process.log, tids)
        assert {t: ours[t] for t in truth} == {t: (ms, "coordinator") for t, ms in truth.items()}
    finally:
        broker.stop()
        kafka_broker_factory.own.remove(broker)
    server_log = (broker.logs_dir / "server.log").read_text()
    assert " INFO " in server_log and " DEBUG " not in server_log
    assert "Elected as the txn coordinator for partition" in server_log  # the coordinator's INFO lines too
    assert " succeeded (kafka.coordinator.transaction.TransactionStateManager)" in coordinator_log.read_text()

"""The coordinator's own clock on every pinned version, in both metadata modes (the Tested-on table's
"coordinator clock"), at idle and under load, on a stock server.log and on the coordinator's file of
its own: `txn-exporter run --broker-log` beside a broker whose JVM writes its log in Asia/Kolkata
(UTC+05:30), while the exporter and the tests run in UTC and tell it nothing.

The broker logs as deploy/broker-logging/ sets it up (TransactionStateManager at DEBUG in the
configuration file, the coordinator's loggers to txn-coordinator.log) with one change: server.log's
INFO threshold is taken out, so server.log also holds the `succeeded` lines among every other
logger's, as Kafka's own configuration writes it with that logger at DEBUG. Two exporters, one on
each file, are held to the same truth.

Truth: the coordinator's `succeeded` line of each transition (its time in that zone) minus the record's
CreateTime as Kafka's DumpLogSegments prints it (txn_workshop/append_latency.py). Each exporter's
DEBUG `timed` line of each transition must carry exactly that latency, by the coordinator's clock; so
its p50 and p99 per target state are the coordinator's own. Phases: a transaction every 2 s, then
Java and librdkafka producers back to back for LOAD_SECONDS, as fast as the machine carries them
(the rate is printed and kept in the pytest cache: the coordinator's PREPARE records per whole
second, by their CreateTimes; 58-68 a second on the 2-core machine, far short of the 300 the
coordinator-clock issue asks for).
One broker: `__transaction_state` with one replica, so the appends are the coordinator's alone.
"""

from __future__ import annotations

import statistics
from collections import Counter
from pathlib import Path

import pytest

from exporter.codec.states import TransactionState
from tests import tested_on
from txn_workshop import append_latency
from txn_workshop.harness.admin import create_topic
from txn_workshop.harness.broker import KafkaBroker
from txn_workshop.harness.java_workload import java_transactions
from txn_workshop.harness.versions import kafka_version
from txn_workshop.harness.workload import transactions_running

ZONE = "Asia/Kolkata"
CLOCK = "txn_exporter_append_latency_clock_info"
DEPLOY = Path(__file__).parents[2] / "deploy" / "broker-logging"
# server.log's INFO threshold in deploy's configurations (log4j 1 and log4j2): the lines taken out.
THRESHOLDS = ("log4j.appender.kafkaAppender.Threshold=", "appender.kafka.filter.threshold.")
IDLE_ID = "clock-idle"
# The load: Java producers (kafka-clients of the broker's version: transaction version 2 on 4.x, an
# epoch bumped per transaction) and librdkafka ones (threads of this process) at once, back to back.
JAVA_IDS = tuple(f"clock-java-{n}" for n in range(32))
LIBRDKAFKA_IDS = tuple(f"clock-rdkafka-{n}" for n in range(16))
LOAD_IDS = JAVA_IDS + LIBRDKAFKA_IDS
LOAD_SECONDS = 8
PREPARE = (TransactionState.PREPARE_COMMIT, TransactionState.PREPARE_ABORT)
CHECK = "coordinator clock"


def _server_log_at_debug(version: str, directory: Path) -> Path:
    """deploy's logging configuration for ``version`` without server.log's INFO threshold, written
    into ``directory``."""
    name = kafka_version(version).log4j_config
    lines = (DEPLOY / name).read_text().splitlines()
    kept = [line for line in lines if not line.startswith(THRESHOLDS)]
    assert len(lines) - len(kept) in (1, 2), "deploy's server.log threshold is no longer where this test takes it out"
    config = directory / name
    config.write_text("\n".join(kept) + "\n")
    return config


@pytest.fixture(scope="module")
def broker(version, mode, kafka_broker_factory, tmp_path_factory):
    """One broker of the row (a module's: its tests share it)."""
    workdir = tmp_path_factory.mktemp(f"clock-{version}-{mode}")
    kafka = KafkaBroker(
        version,
        workdir=workdir,
        logging_config=_server_log_at_debug(version, workdir),
        transaction_state_partitions=4,
        timezone=ZONE,
        mode=mode,
    )
    kafka_broker_factory.make_room()
    kafka_broker_factory.own.append(kafka)
    kafka.start()
    try:
        create_topic(kafka.bootstrap_servers, "plain", partitions=2)
        yield kafka
    finally:
        kafka.stop()
        kafka_broker_factory.own.remove(kafka)


def _per_second(created_ms: list[int]) -> list[int]:
    """Transactions in each whole second of the load, its first and last (partial) seconds left out."""
    first = min(created_ms)
    counts = Counter((ms - first) // 1000 for ms in created_ms)
    return [counts[second] for second in range(1, max(counts))]


@pytest.mark.parametrize(("version", "mode"), tested_on.runs(CHECK), scope="module")
@pytest.mark.tested_on(CHECK)
def test_the_coordinators_clock_times_every_append_as_the_coordinator_did(broker, exporter, request, version, mode):
    """Every transition of a transaction every 2 s, then of the load's producers for LOAD_SECONDS, is
    timed by the coordinator's own clock, to the ms, from either file; the log's zone
    learned from its lines."""
    files = {"server.log": broker.server_log, "txn-coordinator.log": broker.logs_dir / "txn-coordinator.log"}
    processes = {
        name: exporter(broker.bootstrap_servers, "--broker-log", str(path), *append_latency.EXPORTER_FLAGS)
        for name, path in files.items()
    }
    # A first transaction brings the coordinator's clock in: its records may come before an exporter
    # has read a line, and are timed by the fetch then.
    with transactions_running(broker.bootstrap_servers, "plain", ["clock-warm-up"], pause_s=0.2):
        for process in processes.values():
            process.wait_for(lambda p=process: p.value(CLOCK, clock="coordinator") == 1, 60, "the coordinator's clock")
    with transactions_running(broker.bootstrap_servers, "plain", [IDLE_ID], pause_s=2.0) as idle:
        processes["server.log"].wait_for(lambda: idle.commits + idle.aborts >= 3, 60, "three transactions, 2 s apart")
    with transactions_running(broker.bootstrap_servers, "plain", LIBRDKAFKA_IDS, pause_s=0):
        java_transactions(broker, "plain", JAVA_IDS, duration_s=LOAD_SECONDS, abort_every=3)
    tids = {IDLE_ID, *LOAD_IDS}
    created = append_latency.dumped_create_times(broker.dump_transaction_log(), tids)
    prepared = [created[t] for t in created if t[0] in LOAD_IDS and t[1] in PREPARE]
    per_second = _per_second(prepared)
    figures: dict[str, object] = {"load transactions/s, median of whole seconds": statistics.median(per_second)}
    for name, path in files.items():
        process = processes[name]
        succeeded, _ = append_latency.coordinator_lines(append_latency.rolled_logs(path), tids, ZONE)
        assert set(succeeded) <= set(created), f"{name}: a transition the coordinator logged that Kafka's dump lacks"
        truth = {t: max(0, succeeded[t] - created[t]) for t in succeeded}
        process.wait_for(
            lambda p=process, t=truth: set(append_latency.exporter_timed(p.log, tids)) >= set(t),
            60,
            f"the timing of every transition the coordinator logged in {name}",
        )
        ours = append_latency.exporter_timed(process.log, tids)
        assert {t: ours[t] for t in truth} == {t: (ms, "coordinator") for t, ms in truth.items()}, name
        assert process.value("txn_exporter_broker_log_utc_offset_seconds") == 19_800  # UTC+05:30
        assert len([t for t in truth if t[0] == IDLE_ID]) >= 3 * 3 and len(truth) >= 3 * len(prepared), name
        for phase, ids in (("idle", {IDLE_ID}), ("load", set(LOAD_IDS))):
            for state in sorted({t[1] for t in truth if t[0] in ids}):
                values = [ms for t, ms in truth.items() if t[0] in ids and t[1] == state]
                mine = [ours[t][0] for t in truth if t[0] in ids and t[1] == state]
                quantiles = [append_latency.percentile(v, q) for v in (mine, values) for q in (0.5, 0.99)]
                figures[f"{name} {phase} {TransactionState(state).name} p50/p99 ours, coordinator's"] = quantiles
                assert quantiles[0] <= quantiles[2] + 1 and quantiles[1] <= quantiles[3] + 1, figures
    request.config.cache.set(f"coordinator-clock/{version}-{mode}", figures)
    print(f"coordinator clock on {version} ({mode}): {figures}; load per second {per_second}")

"""The coordinator's own clock on every pinned version, in both metadata modes (the Tested-on table's
"coordinator clock"): `txn-exporter run --broker-log server.log` beside a broker whose
TransactionStateManager is at DEBUG in its logging configuration and whose JVM writes its log in
Asia/Kolkata (UTC+05:30), while the exporter and the tests run in UTC and tell it nothing.

Truth: the coordinator's `succeeded` line of each transition (its time in that zone) minus the record's
CreateTime as Kafka's DumpLogSegments prints it (txn_workshop/append_latency.py). The exporter's DEBUG
`timed` line of each transition must carry exactly that latency, by the coordinator's clock; so its
p50 and p99 per target state are the coordinator's own. One broker: `__transaction_state` with one
replica, so the appends are the coordinator's alone.
"""

from __future__ import annotations

import pytest

from exporter.codec.states import TransactionState
from tests import tested_on
from txn_workshop import append_latency
from txn_workshop.harness.admin import create_topic
from txn_workshop.harness.broker import KafkaBroker
from txn_workshop.harness.java_workload import java_transactions
from txn_workshop.harness.workload import transactions_running

ZONE = "Asia/Kolkata"
CLOCK = "txn_exporter_append_latency_clock_info"
IDLE_ID = "clock-idle"
LOAD_IDS = tuple(f"clock-load-{n}" for n in range(16))
LOAD_TRANSACTIONS = 10  # per producer
CHECK = "coordinator clock"


@pytest.fixture(scope="module")
def broker(version, mode, kafka_broker_factory, tmp_path_factory):
    """One broker of the row (a module's: its tests share it), the coordinator at DEBUG from its config."""
    kafka = KafkaBroker(
        version,
        workdir=tmp_path_factory.mktemp(f"clock-{version}-{mode}"),
        coordinator_log_level="DEBUG",
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


@pytest.mark.parametrize(("version", "mode"), tested_on.runs(CHECK), scope="module")
@pytest.mark.tested_on(CHECK)
def test_the_coordinators_clock_times_every_append_as_the_coordinator_did(broker, exporter, request, version, mode):
    """Every transition of a transaction every 2 s, then of 16 Java producers back to back, is timed by
    the coordinator's own clock, to the ms; the log's zone learned from its lines."""
    process = exporter(broker.bootstrap_servers, "--broker-log", str(broker.server_log), *append_latency.EXPORTER_FLAGS)
    # A first transaction brings the coordinator's clock in: its records may come before the exporter
    # has read a line, and are timed by the fetch then.
    with transactions_running(broker.bootstrap_servers, "plain", ["clock-warm-up"], pause_s=0.2):
        process.wait_for(lambda: process.value(CLOCK, clock="coordinator") == 1, 60, "the coordinator's clock")
    with transactions_running(broker.bootstrap_servers, "plain", [IDLE_ID], pause_s=2.0) as idle:
        process.wait_for(lambda: idle.commits + idle.aborts >= 3, 60, "three transactions, one every 2 s")
    java_transactions(broker, "plain", LOAD_IDS, transactions=LOAD_TRANSACTIONS, abort_every=3)
    tids = {IDLE_ID, *LOAD_IDS}
    logs = sorted(broker.logs_dir.glob("server.log*"), key=lambda log: log.stat().st_mtime)
    succeeded, _ = append_latency.coordinator_lines(logs, tids, ZONE)
    created = append_latency.dumped_create_times(broker.dump_transaction_log(), tids)
    assert set(succeeded) <= set(created), "a transition the coordinator logged that Kafka's dump lacks"
    truth = {t: max(0, succeeded[t] - created[t]) for t in succeeded}
    process.wait_for(
        lambda: set(append_latency.exporter_timed(process.log, tids)) >= set(truth),
        60,
        "the exporter's timing of every transition the coordinator logged",
    )
    ours = append_latency.exporter_timed(process.log, tids)
    assert {t: ours[t] for t in truth} == {t: (ms, "coordinator") for t, ms in truth.items()}
    assert process.value("txn_exporter_broker_log_utc_offset_seconds") == 19_800  # UTC+05:30
    # The load's rate on the coordinator's clock: its PREPARE_* records' CreateTimes, first to last.
    prepared = sorted(created[t] for t in truth if t[0] in LOAD_IDS and t[1] in (2, 3))
    figures: dict[str, object] = {
        "transactions/s": round((len(prepared) - 1) * 1000 / max(1, prepared[-1] - prepared[0])),
        "transitions": len(truth),
    }
    for phase, ids in (("idle", {IDLE_ID}), ("load", set(LOAD_IDS))):
        for state in sorted({t[1] for t in truth if t[0] in ids}):
            values = [ms for t, ms in truth.items() if t[0] in ids and t[1] == state]
            mine = [ours[t][0] for t in truth if t[0] in ids and t[1] == state]
            quantiles = [append_latency.percentile(v, q) for v in (mine, values) for q in (0.5, 0.99)]
            figures[f"{phase} {TransactionState(state).name} p50/p99 ours, coordinator's"] = quantiles
            assert quantiles[0] <= quantiles[2] + 1 and quantiles[1] <= quantiles[3] + 1, figures
    request.config.cache.set(f"coordinator-clock/{version}-{mode}", figures)
    print(f"coordinator clock on {version} ({mode}): {figures}")
    assert len([t for t in truth if t[0] == IDLE_ID]) >= 3 * 3 and len(truth) > 3 * len(LOAD_IDS) * LOAD_TRANSACTIONS

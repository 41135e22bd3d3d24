"""The harness's Java transactional workload (txn_workshop.harness.java_workload) writes what we take it
for, by Kafka's own DumpLogSegments: against a broker with `transaction.version` 2, the Java client
runs KIP-890 part 2 (ClientTransactionVersion 2 in its records, the epoch bumped at every
transaction's end), where librdkafka beside it does not; and the exporter's counts of those records,
and `txn-exporter decode`'s reading of them, equal Kafka's.

One broker of the newest version, a few seconds of workload, the exporter following every
`__transaction_state` partition before the workload's first record (so each of them is counted live).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter, defaultdict
from pathlib import Path

import pytest

from tests.integration.exporter_process import ExporterProcess
from tests.integration.test_decode_matches_kafka import _kafkas
from txn_workshop.harness.admin import create_internal_topics, create_topic
from txn_workshop.harness.broker import KafkaBroker
from txn_workshop.harness.java_workload import java_transactions
from txn_workshop.harness.versions import DEFAULT_KAFKA_VERSION
from txn_workshop.harness.workload import run_mix

JAVA_IDS = [f"java-tv2-{n}" for n in range(6)]
TRANSACTIONS = 8
ABORT_EVERY = 4  # 6 commits and 2 aborts per id
LIBRDKAFKA_ID = "librdkafka-0"
PARTITIONS = 4
RECORDS = "kafka_transaction_state_log_records_total"
STATES = ("EMPTY", "ONGOING", "PREPARE_COMMIT", "PREPARE_ABORT", "COMPLETE_COMMIT", "COMPLETE_ABORT")


@pytest.fixture(scope="module")
def workload(kafka_broker_factory, tmp_path_factory):
    """A TV2 broker, an exporter of all its partitions, then the Java producers and one librdkafka
    id, each finished and every record counted by the exporter; DumpLogSegments' records of it all."""
    root = tmp_path_factory.mktemp("java-tv2")
    broker = KafkaBroker(DEFAULT_KAFKA_VERSION, 2, transaction_state_partitions=PARTITIONS, workdir=root / "broker")
    kafka_broker_factory.make_room()
    kafka_broker_factory.own.append(broker)
    broker.start()
    exporter = None
    try:
        create_topic(broker.bootstrap_servers, "orders", partitions=3)
        # __transaction_state exists only once a producer asks for a coordinator: records written before
        # the exporter follows a partition are history to it, not counted. Create it first (its one
        # EMPTY record is such history) and wait until every partition is followed live.
        create_internal_topics(broker.bootstrap_servers)
        exporter = ExporterProcess(broker.bootstrap_servers, "--all-partitions", log=root / "exporter.log")
        exporter.wait_ready(120)
        exporter.wait_for(
            lambda: exporter.value("txn_exporter_partitions_followed", phase="live") == PARTITIONS,
            120,
            "every partition live",
        )
        java = java_transactions(
            broker, "orders", JAVA_IDS, transactions=TRANSACTIONS, abort_every=ABORT_EVERY, messages_per_txn=2
        )
        librdkafka = run_mix(broker.bootstrap_servers, "orders", [LIBRDKAFKA_ID], commits=2, aborts=1)
        # Every id's last record is a COMPLETE_*: once all are counted, so is everything before them.
        ends = {"COMPLETE_COMMIT": java.commits + librdkafka.commits, "COMPLETE_ABORT": java.aborts + librdkafka.aborts}
        exporter.wait_for(
            lambda: {s: exporter.value(RECORDS, target_state=s) for s in ends} == ends, 120, f"complete records {ends}"
        )
        yield broker, exporter, java, _kafkas(broker)
    finally:
        if exporter is not None:
            exporter.stop()
        broker.stop()
        kafka_broker_factory.own.remove(broker)


def _of(dumped: dict, tids) -> list[dict]:
    """Dumped records of ``tids`` (none is a tombstone here), in log order."""
    return [r for _, r in sorted(dumped.items()) if r["transactional_id"] in tids]


def test_the_java_client_writes_client_transaction_version_2_and_librdkafka_does_not(workload):
    _, _, java, dumped = workload
    by_version = Counter((r["value"]["state"], r["value"]["client_transaction_version"]) for r in _of(dumped, JAVA_IDS))
    # InitProducerId carries no client version: EMPTY keeps the default 0. Every transaction's records
    # carry 2. ONGOING: one per produce request that adds partitions (TV2 adds them implicitly), so
    # one or two per transaction of two messages on two partitions.
    ongoing = by_version.pop(("ONGOING", 2))
    assert java.commits + java.aborts <= ongoing <= 2 * (java.commits + java.aborts)
    assert by_version == {
        ("EMPTY", 0): len(JAVA_IDS),
        ("PREPARE_COMMIT", 2): java.commits,
        ("COMPLETE_COMMIT", 2): java.commits,
        ("PREPARE_ABORT", 2): java.aborts,
        ("COMPLETE_ABORT", 2): java.aborts,
    }
    assert java.commits == len(JAVA_IDS) * 6 and java.aborts == len(JAVA_IDS) * 2
    assert {r["value"]["client_transaction_version"] for r in _of(dumped, {LIBRDKAFKA_ID})} == {0}


def test_the_java_client_bumps_the_epoch_at_every_transactions_end(workload):
    _, _, _, dumped = workload
    for tid in JAVA_IDS:
        records = _of(dumped, {tid})
        first = records[0]["value"]["producer_epoch"]
        prepares = [r["value"]["producer_epoch"] for r in records if r["value"]["state"].startswith("PREPARE_")]
        assert prepares == [first + n for n in range(1, TRANSACTIONS + 1)], tid
    assert len({r["value"]["producer_epoch"] for r in _of(dumped, {LIBRDKAFKA_ID})}) == 1


def test_the_exporters_counts_equal_the_records_kafka_dumps(workload):
    _, exporter, _, dumped = workload
    # Records by target state: the workload's, all written while the exporter followed live.
    records = Counter(r["value"]["state"] for r in _of(dumped, {*JAVA_IDS, LIBRDKAFKA_ID}))
    assert {s: exporter.value(RECORDS, target_state=s) or 0 for s in STATES} == {s: records[s] for s in STATES}
    # Transactions by current state: every id's, history included, as its last record says.
    last: dict[str, str] = {}
    for _, r in sorted(dumped.items()):
        last[r["transactional_id"]] = r["value"]["state"]
    current = Counter(last.values())
    assert {s: exporter.value("kafka_transactions", state=s) or 0 for s in STATES} == {s: current[s] for s in STATES}
    # TV2 bumps the epoch on every PREPARE_ABORT, as a coordinator's timeout abort does: none is one.
    assert exporter.value("kafka_transaction_timeouts_total") == 0
    assert {r: exporter.value("kafka_transaction_duration_seconds_count", result=r) for r in ("commit", "abort")} == {
        "commit": records["PREPARE_COMMIT"],
        "abort": records["PREPARE_ABORT"],
    }
    assert exporter.value("kafka_transaction_producer_id_rotations_total") == 0


def test_txn_exporter_decode_reads_the_client_transaction_version_kafka_dumps(workload):
    broker, _, _, dumped = workload
    decode = subprocess.run(
        [str(Path(sys.executable).with_name("txn-exporter")), "decode", str(broker.log_dirs)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    decoded = {}
    for line in decode.stdout.splitlines():
        record = json.loads(line)
        decoded[(record["partition"], record["offset"])] = record["value"]["client_transaction_version"]
    assert decoded == {position: r["value"]["client_transaction_version"] for position, r in dumped.items()}
    versions = defaultdict(set)
    for (partition, offset), r in dumped.items():
        versions[r["transactional_id"].startswith("java-")].add(decoded[(partition, offset)])
    assert versions == {True: {0, 2}, False: {0}}

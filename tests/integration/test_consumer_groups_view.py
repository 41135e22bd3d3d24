"""The consumer group named (issue 31, item 2), on a real broker of 4.4.0 (the new group coordinator)
and 3.9.2 (the old one): two groups stored on ONE `__consumer_offsets` partition (the harness's
offsets.topic.num.partitions=1 puts every group on partition 0), one consuming-transforming-producing
with its offsets sent to a transaction held open (librdkafka), the other committing its offsets
plainly. A real `txn-exporter run`'s `/transactions` names exactly the transactional group for that
row's `__consumer_offsets-0`, with its coordinator, and so do the terminal table and the page; once
the transaction is aborted the row is gone. On 4.4.0 the held transaction is the group's first (no
offset committed before: found through its members' assignment), on 3.9.2 after two commits."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from exporter.contracts.groups import offsets_partition
from txn_workshop.harness.admin import create_internal_topics, create_topic, partition_count
from txn_workshop.harness.app_workloads import librdkafka_ctp_held
from txn_workshop.harness.workload import CLIENT_LOG

INPUT, OUTPUT = "cg-in", "cg-out"
TXN_GROUP, PLAIN_GROUP = "cg-transactional-group", "cg-plain-group"


def _row(process, tid: str) -> dict | None:
    status, body = process.get("/transactions")
    assert status == 200, body
    return next((r for r in json.loads(body)["transactions"] if r["transactional_id"] == tid), None)


def _named(process, tid: str) -> bool:
    row = _row(process, tid)
    return bool(row and any(e.get("pending_groups") for e in row.get("consumer_groups") or ()))


@pytest.mark.parametrize(("version", "commits"), [("4.4.0", 0), ("3.9.2", 2)])
def test_the_row_names_the_transactional_group_alone(own_broker, exporter, version, commits):
    broker = own_broker(version=version, transaction_state_partitions=4)
    bootstrap = broker.bootstrap_servers
    create_topic(bootstrap, INPUT, partitions=2)
    create_topic(bootstrap, OUTPUT, partitions=2)
    create_internal_topics(bootstrap)
    offsets = partition_count(bootstrap, "__consumer_offsets")
    n = offsets_partition(TXN_GROUP, offsets)
    assert offsets_partition(PLAIN_GROUP, offsets) == n  # one partition for both
    feeder = Producer({"bootstrap.servers": bootstrap, **CLIENT_LOG})
    for i in range(100):
        feeder.produce(INPUT, key=str(i).encode(), value=f"in-{i}".encode())
    assert feeder.flush(30) == 0
    # The plain group: offsets committed outside any transaction.
    plain = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": PLAIN_GROUP, "enable.auto.commit": False, **CLIENT_LOG}
    )
    plain.commit(offsets=[TopicPartition(INPUT, 0, 7), TopicPartition(INPUT, 1, 3)], asynchronous=False)
    plain.close()

    process = exporter(bootstrap, "--all-partitions", "--hanging-scan-interval-seconds", "0")
    tid = f"cg-txn-{version}"
    with librdkafka_ctp_held(bootstrap, TXN_GROUP, tid, INPUT, OUTPUT, commits) as run:
        assert run.open and run.commits == commits
        process.wait_for(lambda: _named(process, tid), 60, f"{tid}'s row naming its group")
        row = _row(process, tid)
        assert row is not None and row["state"] == "ONGOING"
        assert f"__consumer_offsets-{n}" in row["partitions"]
        (entry,) = row["consumer_groups"]
        assert entry["partition"] == f"__consumer_offsets-{n}"
        assert entry["pending_groups"] == [{"group_id": TXN_GROUP, "coordinator": broker.node_id}], entry
        # Asked: the transactional group, the plain one and the harness's own (all on partition n).
        assert entry["groups_checked"] >= 2 and entry["groups_not_checked"] == 0
        assert entry["unknown_groups"] == {} and entry["unknown"] is None

        table = subprocess.run(
            [sys.executable, "-m", "exporter", "transactions", "--url", process.url],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert table.returncode == 0, table.stderr
        (line,) = [line for line in table.stdout.splitlines() if "offsets pending" in line]
        assert line.strip().startswith(f"{tid}: __consumer_offsets-{n}:")
        assert f"consumer group {TXN_GROUP} (coordinator: broker {broker.node_id})" in line
        assert PLAIN_GROUP not in table.stdout
        status, page = process.get("/transactions?format=html")
        assert status == 200 and f"consumer group {TXN_GROUP} (coordinator: broker {broker.node_id})" in page
        assert PLAIN_GROUP not in page
    process.wait_for(lambda: _row(process, tid) is None, 60, f"{tid} aborted")

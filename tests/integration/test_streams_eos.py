"""A real Kafka Streams exactly_once_v2 application (kafka-streams of the broker's version: 4.4.0 on
4.4.0 with transaction.version 2, 3.9.2 on 3.9.2), two instances of two stream threads each, its
producers not lingering, commit.interval.ms 100, transaction.timeout.ms 10 s; a feeder writes input
continuously. Instance A starts, B joins (a rebalance), then B is killed (SIGKILL) right after a
read_uncommitted consumer sees one of its output records: its transactions are open at the
coordinator (under TV2 a transaction begins there only once a record reached a partition leader).
When the kill lands after B's commit, with none open, a new B joins and is killed in turn.

Asserted: the exporter (padding 0) shows B's open transaction in /transactions, then flags it late,
then counts its timeout abort; its record counts by target state equal DumpLogSegments'; and the
lifecycles the pipeline's functions compute from the segments agree with the exporter's counts of
commits, aborts and timeouts, B's last transactions timed out.

The coordinator sweeps timed-out transactions every 5 s, from its start at a fixed rate: B is
killed at a phase of that sweep that leaves its transactions late for 3.5 s or more before the abort.
"""

from __future__ import annotations

import json
import re
import time
from collections import Counter
from datetime import datetime

import pytest

from tests.integration.app_checks import segment_lifecycles, settled_records
from txn_workshop.harness.admin import create_internal_topics, create_topic
from txn_workshop.harness.app_workloads import StreamsInstance, feeding, read_uncommitted_consumer
from txn_workshop.harness.versions import FULL_SUITE_VERSIONS, kafka_version

APP = "eos-map"
INPUT, OUTPUT = "streams-in", "streams-out"
PARTITIONS = 4
TIMEOUT_MS = 10_000
SWEEP_MS = 5_000
RECORDS = "kafka_transaction_state_log_records_total"
DURATION = "kafka_transaction_duration_seconds_count"
TIMEOUTS = "kafka_transaction_timeouts_total"
STATES = ("EMPTY", "ONGOING", "PREPARE_COMMIT", "PREPARE_ABORT", "COMPLETE_COMMIT", "COMPLETE_ABORT")
_STARTING = re.compile(
    r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\] INFO \[TransactionCoordinator id=\d+\] Starting up"
)


def _sweep_origin_ms(server_log: str) -> float:
    """When the coordinator scheduled its timeout sweep (TransactionCoordinator.startup logs
    `Starting up.` just before it schedules it at a fixed rate): the broker log's local time."""
    for line in server_log.splitlines():
        match = _STARTING.match(line)
        if match:
            return datetime.strptime(match.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp() * 1000
    raise AssertionError("no `[TransactionCoordinator id=N] Starting up.` line in the broker log")


def _rows(process, tids: set[str]) -> dict[str, dict]:
    status, body = process.get("/transactions")
    assert status == 200, body
    return {r["transactional_id"]: r for r in json.loads(body)["transactions"] if r["transactional_id"] in tids}


@pytest.mark.parametrize("version", FULL_SUITE_VERSIONS)
def test_a_killed_streams_instance_times_out_late_then_aborted(own_broker, exporter, version, tmp_path):
    broker = own_broker(
        version=version,
        transaction_version=kafka_version(version).newest_transaction_version,
        transaction_state_partitions=PARTITIONS,
        broker_properties={"transaction.abort.timed.out.transaction.cleanup.interval.ms": str(SWEEP_MS)},
    )
    bootstrap = broker.bootstrap_servers
    for topic in (INPUT, OUTPUT):
        create_topic(bootstrap, topic, partitions=PARTITIONS)
    create_internal_topics(bootstrap)
    process = exporter(bootstrap, "--all-partitions", "--late-transaction-padding-seconds", "0")
    process.wait_for(
        lambda: process.value("txn_exporter_partitions_followed", phase="live") == PARTITIONS, 120, "all live"
    )
    sweep_origin = _sweep_origin_ms(broker.server_log.read_text(errors="replace"))

    def instance(name: str) -> StreamsInstance:
        return StreamsInstance(
            version, bootstrap, APP, INPUT, OUTPUT, name, tmp_path, transaction_timeout_ms=TIMEOUT_MS
        )

    def kill_with_open_transactions(b: StreamsInstance) -> tuple[set[str], float]:
        """Kill B right after one of its records is seen uncommitted, at a sweep phase that leaves its
        transactions (begun at most a commit interval before) late for 3.5 s or more. Returns those
        the coordinator then holds open, once the exporter shows them (none when the kill fell
        between two of B's transactions), and the kill's time."""
        watch = read_uncommitted_consumer(bootstrap, OUTPUT)
        try:
            caught_up = time.monotonic() + 2
            deadline = time.monotonic() + 60
            while True:
                assert time.monotonic() < deadline, "no output record of B seen"
                messages = watch.consume(50, 0.02)
                now_ms = time.time() * 1000
                phase = (now_ms + TIMEOUT_MS - sweep_origin) % SWEEP_MS
                if (
                    time.monotonic() > caught_up
                    and 500 <= phase <= 1500
                    and any(m.error() is None and (m.value() or b"").endswith(f"@{b.name}".encode()) for m in messages)
                ):
                    b.kill()
                    killed_ms = time.time() * 1000
                    break
        finally:
            watch.close()
        # Kafka's own answer, not the exporter's: which of B's transactions the coordinator holds open.
        time.sleep(1)  # a produce request in flight at the kill may still open one
        header, rows = broker.transactions_table("list")
        tid, state = header.index("TransactionalId"), header.index("TransactionState")
        killed = {row[tid] for row in rows if row[tid] in b.transactional_ids and row[state] == "Ongoing"}
        if killed:
            shown: dict[str, dict] = {}
            process.wait_for(
                lambda: shown.update(_rows(process, killed)) or set(shown) == killed, 20, "B's open transactions shown"
            )
            # Not late yet, unless already open past its timeout when read: on a loaded 2-core machine
            # (a full clean-clone run) the kill, Kafka's own listing and the read took that long.
            assert all(
                r["state"] == "ONGOING" and r["late"] == (r["duration_seconds"] * 1000 > TIMEOUT_MS)
                for r in shown.values()
            ), shown
            assert all(r["transaction_timeout_ms"] == TIMEOUT_MS for r in shown.values())
        return killed, killed_ms

    with feeding(bootstrap, INPUT, per_second=100):
        a = instance("a")
        b = None
        try:
            a.wait_running()
            # A record seen uncommitted can belong to a transaction B commits before the kill lands,
            # leaving B with none open at the coordinator: then another B joins and is killed in turn.
            killed: set[str] = set()
            for attempt in range(3):
                seen_a = len(a.states)
                b = instance(f"b{attempt}")
                b.wait_running()
                a.wait_rebalanced(seen_a)
                assert "REBALANCING" in a.states[seen_a:], a.states  # B's join rebalanced A
                tids_b = set(b.transactional_ids)
                assert len(tids_b) == 2 and not tids_b & set(a.transactional_ids)
                killed, killed_ms = kill_with_open_transactions(b)
                if killed:
                    break
            assert killed, "three kills of B all fell between its transactions"

            # B's open transactions: shown, then late (past 10 s, padding 0), then timed out.
            late_seen: set[str] = set()

            def late() -> bool:
                rows = _rows(process, killed)
                late_seen.update(t for t, r in rows.items() if r["late"])
                return late_seen == killed

            process.wait_for(late, 20, "B's transactions late")
            late_at = time.time() * 1000
            assert late_at - killed_ms < TIMEOUT_MS + SWEEP_MS
            process.wait_for(lambda: not _rows(process, killed), 20, "B's transactions gone from the view")
            # At least B's; an earlier B's request still in flight at its kill may have opened one after
            # the coordinator was asked. Every timeout is checked against the segments below.
            process.wait_for(lambda: process.value(TIMEOUTS) >= len(killed), 20, "the timeout aborts counted")
            assert process.value(DURATION, result="timeout") == process.value(TIMEOUTS)
        finally:
            if b is not None:
                b.kill()
            a.stop()

    # Every record the exporter counted live is in the log as DumpLogSegments decodes it.
    ours = settled_records(broker, lambda tid: tid.startswith(f"{APP}-"))
    assert all(r.state is not None for r in ours)
    expected = {s: Counter(r.state for r in ours)[s] for s in STATES}
    process.wait_for(
        lambda: {s: process.value(RECORDS, target_state=s) or 0 for s in STATES} == expected, 30, f"counts {expected}"
    )
    assert {r.transactional_id for r in ours} >= killed

    # The pipeline's lifecycles of the same segments.
    lifecycles = [
        lc
        for lc in segment_lifecycles(broker.transaction_state_segments())
        if lc["transactional_id"].startswith(f"{APP}-")
    ]
    assert not [lc for lc in lifecycles if lc["result"] is None]  # A closed, B's were aborted
    results = Counter("timeout" if lc["timed_out"] else lc["result"] for lc in lifecycles)
    assert {r: process.value(DURATION, result=r) or 0 for r in ("commit", "abort", "timeout")} == {
        r: results[r] for r in ("commit", "abort", "timeout")
    }
    for tid in killed:
        last = [lc for lc in lifecycles if lc["transactional_id"] == tid][-1]
        assert (last["result"], last["abort_cause"], last["timed_out"]) == ("abort", "timeout", True), last
        assert last["transaction_timeout_ms"] == TIMEOUT_MS
        assert last["partitions"] and all(
            p.startswith((f"{OUTPUT}-", "__consumer_offsets-")) for p in last["partitions"]
        )

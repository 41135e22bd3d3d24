"""A dead broker costs next to nothing (issue 31, item 5), with a real `txn-exporter run` process and a
real 4.4.0 broker that is stopped: every client of the exporter (its two librdkafka consumers, the
kafka-python clients of the cluster state and the hanging scan) together make at most about one
connection attempt a second to it from ten seconds after it went away; /metrics says the source is down;
the broker restarted (same port), the exporter is ready and counts records again within 5 s.

Counted at the socket: `strace -f -e trace=connect` attached to the exporter process, every connect()
to the broker's port (before the fix: 39 a second, 37 of them librdkafka's re-bootstrap loop).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from confluent_kafka import Producer

from tests.integration.exporter_process import ExporterProcess
from tests.integration.test_diagnosis import CLIENT

WINDOW = (10.0, 20.0)  # seconds after the stop
MAX_PER_SECOND = 1.5


def commit(bootstrap: str, tid: str) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid, **CLIENT})
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce("dead-broker", b"x")
    producer.commit_transaction(30)


def connects(trace: Path, port: int, since: float) -> list[float]:
    """Seconds after `since` (epoch) of each connect() to `port` in an `strace -ttt` output."""
    found = []
    for line in trace.read_text().splitlines():
        fields = line.split(None, 2)
        if len(fields) == 3 and fields[2].startswith("connect(") and f"htons({port})" in fields[2]:
            found.append(float(fields[1]) - since)
    return found


@pytest.mark.skipif(shutil.which("strace") is None, reason="counts connect() calls with strace")
def test_a_dead_broker_is_asked_about_once_a_second_and_followed_within_5_s(own_broker, tmp_path):
    broker = own_broker(version="4.4.0", transaction_state_partitions=4)
    commit(broker.bootstrap_servers, "dead-broker-before")
    process = ExporterProcess(
        broker.bootstrap_servers, "--hanging-scan-interval-seconds", "5", log=tmp_path / "exporter.log"
    )
    trace = tmp_path / "strace.txt"
    try:
        process.wait_ready(120)
        assert process.get("/transactions")[0] == 200  # the cluster state's client made too
        process.wait_for(lambda: json.loads(process.get("/transactions")[1]).get("hanging_scan_ms"), 30, "a scan")
        strace = subprocess.Popen(
            ["strace", "-f", "-ttt", "-e", "trace=connect", "-o", str(trace), "-p", str(process._process.pid)],
            stderr=subprocess.DEVNULL,
        )
        time.sleep(1)
        if strace.poll() is not None:
            pytest.skip("strace cannot attach here (ptrace not permitted)")
        broker.stop()
        stopped = time.time()
        time.sleep(WINDOW[1] + 0.5)
        strace.terminate()
        strace.wait(10)
        port = int(broker.bootstrap_servers.rsplit(":", 1)[1])
        seen = connects(trace, port, stopped)
        in_window = [t for t in seen if WINDOW[0] <= t < WINDOW[1]]
        rate = len(in_window) / (WINDOW[1] - WINDOW[0])
        print(f"{len(seen)} connects in {WINDOW[1]:.0f} s after the stop, {rate:.2f}/s from {WINDOW[0]:.0f} s")
        assert rate <= MAX_PER_SECOND, f"{len(in_window)} connects in {WINDOW}: {in_window}"
        assert process.value("txn_exporter_source_up") == 0
        assert process.get("/readyz")[0] == 503

        broker.start()  # the same port (restart's)
        back = time.monotonic()
        process.wait_ready(5)
        records = process.value("kafka_transaction_state_log_records_total", target_state="COMPLETE_COMMIT")
        commit(broker.bootstrap_servers, "dead-broker-after")
        committed = time.monotonic()
        process.wait_for(
            lambda: (
                process.value("kafka_transaction_state_log_records_total", target_state="COMPLETE_COMMIT") > records
            ),
            5,
            "the commit after the restart counted",
        )
        print(f"ready {committed - back:.1f} s after the broker is back, its commit counted")
    finally:
        process.stop()

"""The real-Kafka harness itself: brokers start, log what the exporter parses, and workloads
produce exactly the transactions they report."""

from __future__ import annotations

import re
import subprocess
import time
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import Producer

from txn_workshop.harness.admin import create_topic
from txn_workshop.harness.broker import KafkaBroker
from txn_workshop.harness.versions import FULL_SUITE_VERSIONS, ZOOKEEPER_CHECK_VERSIONS
from txn_workshop.harness.workload import commit_transactions, count_messages, hold_markers, run_mix

pytestmark = pytest.mark.kafka

# Kafka's default layout `[%d] %p %m (%c)%n`.
LOG_LINE = re.compile(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}\] (TRACE|DEBUG|INFO|WARN|ERROR) .* \(([\w.$]+)\)$")


def _names() -> tuple[str, str]:
    suffix = uuid.uuid4().hex[:8]
    return f"topic-{suffix}", f"tid-{suffix}"


def _coordinator_lines(broker: KafkaBroker) -> list[re.Match[str]]:
    matches = (LOG_LINE.match(line) for line in broker.server_log.read_text().splitlines())
    return [m for m in matches if m and "coordinator.transaction" in m.group(2)]


def _states(broker: KafkaBroker, tid: str) -> Counter[str]:
    """Records of ``tid`` per state, from DumpLogSegments' decoded output."""
    return Counter(r.state for r in broker.transaction_log_records() if r.transactional_id == tid)


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except FileNotFoundError:  # between a rollover's renames and the new file
        return ""


def _wait_for_line(path: Path, pattern: str, timeout: float = 30) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        m = re.search(pattern, _read(path), re.MULTILINE)
        if m:
            return m.group(0)
        time.sleep(0.2)
    raise AssertionError(f"no line matching {pattern!r} in {path} after {timeout} s")


def test_broker_logs_coordinator_lines(broker: KafkaBroker) -> None:
    topic, tid = _names()
    create_topic(broker.bootstrap_servers, topic, partitions=3)
    commit_transactions(broker.bootstrap_servers, tid, topic, count=1)

    assert broker.server_log.exists()
    lines = _coordinator_lines(broker)
    text = "\n".join(m.group(0) for m in lines)
    assert "Elected as the txn coordinator for partition" in text
    assert f"Initialized transactionalId {tid} with producerId" in text
    assert {m.group(1) for m in lines} <= {"INFO", "WARN", "ERROR"}  # INFO level: no DEBUG lines
    assert len(broker.transaction_state_segments()) == broker.transaction_state_partitions


def test_workload_counts(broker: KafkaBroker) -> None:
    topic, tid = _names()
    tids = [f"{tid}-a", f"{tid}-b"]
    create_topic(broker.bootstrap_servers, topic, partitions=3)

    result = run_mix(broker.bootstrap_servers, topic, tids, commits=3, aborts=2, timeouts=1)

    assert (result.commits, result.aborts, result.timeouts) == (6, 4, 2)
    mpt = result.messages_per_txn
    assert count_messages(broker.bootstrap_servers, topic, read_committed=True) == result.commits * mpt
    written = (result.commits + result.aborts + result.timeouts) * mpt
    assert count_messages(broker.bootstrap_servers, topic, read_committed=False) == written
    for t in tids:
        counts = result.per_id[t]
        states = _states(broker, t)
        assert (states["COMPLETE_COMMIT"], states["COMPLETE_ABORT"]) == (
            counts.commits,
            counts.aborts + counts.timeouts,
        )
    assert f"Completed rollback of ongoing transaction for transactionalId {tids[0]} due to timeout" in (
        broker.server_log.read_text()
    )


def _rolled_logs(broker: KafkaBroker) -> list[Path]:
    """server.log and the files it rolled over to, oldest first (server.log.2, server.log.1, server.log)."""
    rolled = sorted(broker.logs_dir.glob("server.log.*"), key=lambda p: int(p.suffix[1:]), reverse=True)
    return [*rolled, broker.server_log]


@pytest.mark.parametrize("version", FULL_SUITE_VERSIONS)
def test_debug_coordinator_logging_rolls_over_by_size(own_broker: Callable[..., KafkaBroker], version: str) -> None:
    """The DEBUG lines are there, and server.log rolls over at its size cap under log4j's names
    (server.log.1, server.log.2: what the exporter's broker-log follower reads), keeping two: a
    broker's start and one transaction at DEBUG write more than three times 64 KiB."""
    cap = 64 * 1024
    broker = own_broker(version=version, coordinator_log_level="DEBUG", server_log_max_bytes=cap, server_log_backups=2)
    topic, tid = _names()
    create_topic(broker.bootstrap_servers, topic, partitions=2)
    commit_transactions(broker.bootstrap_servers, tid, topic, count=1)

    state = "COMPLETE_COMMIT" if broker.kafka.log_state_names == "enum" else "CompleteCommit"
    pattern = (
        rf"^\[[^\]]+\] DEBUG \[Transaction State Manager 1\]: Updating {tid}'s transaction state to "
        rf"TxnTransitMetadata.*txnState={state}.* succeeded \(kafka\.coordinator\.transaction\.TransactionStateManager\)$"
    )
    deadline = time.monotonic() + 30
    while not re.search(pattern, "".join(_read(p) for p in _rolled_logs(broker)), re.MULTILINE):
        assert time.monotonic() < deadline, f"no line matching {pattern!r} in {broker.logs_dir}"
        time.sleep(0.2)

    files = _rolled_logs(broker)
    assert [p.name for p in files] == ["server.log.2", "server.log.1", "server.log"]
    for path in files:
        # Rolled between log events: a file may pass the cap by one event (the config dump is ~15 KiB).
        assert path.stat().st_size <= 2 * cap, path
        assert LOG_LINE.match(path.read_text().splitlines()[0]), path


def test_stop_and_restart_leave_no_jvm(own_broker: Callable[..., KafkaBroker]) -> None:
    broker = own_broker()

    def jvms() -> str:
        return subprocess.run(["pgrep", "-f", str(broker.workdir)], capture_output=True, text=True).stdout

    topic, tid = _names()
    create_topic(broker.bootstrap_servers, topic, partitions=2)
    assert jvms()
    bootstrap = broker.bootstrap_servers
    broker.restart()
    assert broker.bootstrap_servers == bootstrap
    commit_transactions(bootstrap, tid, topic, count=1)  # data and ports survived the restart
    assert count_messages(bootstrap, topic, read_committed=True) == 3
    broker.stop()
    broker.stop()
    assert not broker.running
    assert jvms() == ""


def test_hold_markers_makes_the_coordinator_retry(own_broker: Callable[..., KafkaBroker]) -> None:
    """Markers held back are retried (a line each, thousands a second): server.log stays capped."""
    cap = 1024 * 1024
    first = own_broker(server_log_max_bytes=cap, server_log_backups=2)
    follower = own_broker(join=first, node_id=2)
    bootstrap = first.bootstrap_servers
    topic, tid = _names()
    create_topic(bootstrap, topic, partitions=2, replication_factor=2)
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid})
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(topic, b"held", partition=0)
    producer.flush(30)  # before the hold: acks=all produce fails too

    with hold_markers(follower, topic):
        producer.commit_transaction(30)  # returns once PrepareCommit is written
        _wait_for_line(
            first.server_log,
            rf"^.* INFO .*Sending {tid}'s transaction marker for partition {topic}-0 has failed with error "
            r"\S*NotEnoughReplicasException, retrying with current coordinator epoch \d+.*$",
        )
        assert count_messages(bootstrap, topic, read_committed=True, timeout=5) == 0
        deadline = time.monotonic() + 60
        while not (first.logs_dir / "server.log.2").exists():  # rolled over twice, 1 MiB each
            assert time.monotonic() < deadline, "server.log did not roll over during the hold"
            time.sleep(0.2)

    # Released: the retried markers land and the transaction completes.
    deadline = time.monotonic() + 30
    while count_messages(bootstrap, topic, read_committed=True) != 1:
        assert time.monotonic() < deadline, "transaction did not complete after the hold"
        time.sleep(0.5)
    # Looked at once the retries stopped, so not in the middle of a rollover's renames.
    files = _rolled_logs(first)
    assert [p.name for p in files] == ["server.log.2", "server.log.1", "server.log"]
    assert all(p.stat().st_size <= cap + 64 * 1024 for p in files)


def test_cluster_ids_never_start_with_a_dash():
    """StorageTool would read such an id as an option and fail ('expected one argument')."""
    from txn_workshop.harness.broker import _random_cluster_id

    ids = [_random_cluster_id() for _ in range(5000)]
    assert not [i for i in ids if i.startswith("-")]
    assert all(len(i) == 22 for i in ids)


def test_zookeeper_mode_only_where_kafka_has_it() -> None:
    with pytest.raises(ValueError, match="no ZooKeeper mode"):
        KafkaBroker("4.0.2", mode="zookeeper")
    first = KafkaBroker(ZOOKEEPER_CHECK_VERSIONS[0], mode="zookeeper")
    with pytest.raises(ValueError, match="cannot join"):
        KafkaBroker(ZOOKEEPER_CHECK_VERSIONS[0], join=first, node_id=2)
    with pytest.raises(ValueError, match="KRaft"):
        KafkaBroker(ZOOKEEPER_CHECK_VERSIONS[0], mode="zookeeper", sasl_users={"u": "p"})


@pytest.mark.parametrize("version", ZOOKEEPER_CHECK_VERSIONS[:1])
def test_a_zookeeper_mode_pair_pauses_restarts_and_stops_with_its_zookeeper(
    own_broker: Callable[..., KafkaBroker], version: str
) -> None:
    """Two ZooKeeper-mode brokers (broker.id, zookeeper.connect, no format) beside the first one's
    ZooKeeper, which outlives it while the second runs and stops with the last of them."""
    first = own_broker(version=version, mode="zookeeper")
    second = own_broker(version=version, mode="zookeeper", join=first, node_id=2)
    assert first.zookeeper is second.zookeeper and first.zookeeper is not None
    zookeeper = first.zookeeper
    props = (first.workdir / "server.properties").read_text()
    assert "broker.id=1\n" in props and f"zookeeper.connect={zookeeper.connect}/kafka\n" in props
    assert "process.roles" not in props and "controller." not in props
    assert "broker.id=1" in (first.log_dirs / "meta.properties").read_text()  # the broker's own, no format
    assert "Connecting to zookeeper" in first.server_log.read_text()

    def jvms() -> str:
        return subprocess.run(["pgrep", "-f", str(first.workdir)], capture_output=True, text=True).stdout

    topic, tid = _names()
    create_topic(first.bootstrap_servers, topic, partitions=2, replication_factor=2)
    second.pause()
    second.resume()
    second.restart()
    commit_transactions(first.bootstrap_servers, tid, topic, count=1)
    assert count_messages(first.bootstrap_servers, topic, read_committed=True) == 3
    assert _states(first, tid)["COMPLETE_COMMIT"] == 1
    first.stop()
    assert zookeeper.running  # the second broker still needs it
    assert len(jvms().split()) == 1  # the ZooKeeper alone, in the first broker's workdir
    second.stop()
    assert not zookeeper.running and jvms() == ""

"""The Java transactional workload rides out what a rolling upgrade does to its producers, as the
librdkafka one does (txn_workshop.harness.workload.transactions_running): a producer fenced by another
of its id is dropped and a new one inits the id; a broker restart (timeouts, the coordinator away) is
waited out; no producer stops at its first error, and every id is settled at the end.

One broker of the newest version (TV2: kafka-clients 4.x runs KIP-890 part 2 against it)."""

from __future__ import annotations

import time
from collections.abc import Callable

from txn_workshop.harness.admin import create_topic
from txn_workshop.harness.java_workload import java_transactions_running
from txn_workshop.harness.versions import DEFAULT_KAFKA_VERSION
from txn_workshop.harness.workload import RunningCounts, _producer

IDS = ["java-ride-0", "java-ride-1"]


def _wait(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"not within {timeout} s: {what}"
        time.sleep(0.2)


def _more_commits(clients: RunningCounts, than: int, timeout: float, what: str) -> None:
    _wait(lambda: clients.commits >= than + 2 * len(IDS), timeout, f"commits after {what} ({clients})")


def test_the_java_workload_rides_out_a_fence_and_a_broker_restart(own_broker, tmp_path):
    broker = own_broker(version=DEFAULT_KAFKA_VERSION, transaction_state_partitions=4)
    create_topic(broker.bootstrap_servers, "orders", partitions=2)
    log = tmp_path / "java-workload.log"
    with java_transactions_running(DEFAULT_KAFKA_VERSION, broker.bootstrap_servers, "orders", IDS, log) as clients:
        _more_commits(clients, 0, 120, "the start")
        assert clients.producers == len(IDS)

        # Another producer of the id: the Java one's next call is fenced (fatal), so it is dropped and
        # a new one inits the id, which fences the intruder in turn (closed here, never used again).
        _producer(broker.bootstrap_servers, IDS[0]).init_transactions(60)
        _wait(lambda: clients.producers > len(IDS), 120, f"a new producer after the fence ({clients})")
        # Which error tells the old producer depends on where its transaction was when the fence
        # aborted it: its epoch is refused, or its transaction is no longer the one it began.
        fences = {"ProducerFencedException", "InvalidProducerEpochException", "InvalidTxnStateException"}
        assert fences & set(clients.errors), dict(clients.errors)
        _more_commits(clients, clients.commits, 120, "the fence")

        broker.restart()
        _more_commits(clients, clients.commits, 180, "the restart")
        before_exit = clients.commits
    assert clients.commits >= before_exit and clients.aborts > 0, clients

    # Settled: every id's last record is a completed transaction or an idle id, none in flight.
    records = sorted(broker.transaction_log_records(), key=lambda r: (r.partition, r.offset))
    last = {r.transactional_id: r.state for r in records if r.transactional_id in IDS}
    assert set(last) == set(IDS)
    assert set(last.values()) <= {"EMPTY", "COMPLETE_COMMIT", "COMPLETE_ABORT"}, last

"""Transactional workloads with exactly known outcomes, for tests, the demo and benchmarks.

Child-process entry point (used by :func:`timed_out_producer`)::

    python -m txn_workshop.harness.workload hang --bootstrap H:P --transactional-id T --topic X \
        --transaction-timeout-ms N
"""

from __future__ import annotations

import argparse
import itertools
import json
import logging
import random
import select
import signal
import struct
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
)

from exporter import logs
from exporter.codec import TransactionState, decode_value
from txn_workshop.harness.admin import (
    CLIENT_LOG,
    CLIENT_LOGGER,
    TRANSACTION_STATE_TOPIC,
    alter_topic_config,
    partition_count,
    topic_config_override,
)
from txn_workshop.harness.processes import die_with_parent

if TYPE_CHECKING:
    from txn_workshop.harness.broker import KafkaBroker

_READY = "READY"


@dataclass
class TxnCounts:
    commits: int = 0
    aborts: int = 0  # aborted by the producer
    timeouts: int = 0  # aborted by the coordinator after the transaction timeout (KIP-588)


@dataclass
class RunningCounts:
    """What the clients of :func:`transactions_running` saw: transactions committed and aborted
    (``aborts`` includes those aborted after an abortable error), producers created (one per id,
    plus one each time an error made the client drop its producer), and their errors by Kafka name."""

    commits: int = 0
    aborts: int = 0
    producers: int = 0
    errors: Counter[str] = field(default_factory=Counter)


@dataclass
class WorkloadResult:
    topic: str
    messages_per_txn: int
    per_id: dict[str, TxnCounts] = field(default_factory=dict)

    @property
    def commits(self) -> int:
        return sum(c.commits for c in self.per_id.values())

    @property
    def aborts(self) -> int:
        return sum(c.aborts for c in self.per_id.values())

    @property
    def timeouts(self) -> int:
        return sum(c.timeouts for c in self.per_id.values())


# -- marker holds ---------------------------------------------------------------------------------


@contextmanager
def hold_markers(follower: KafkaBroker, topic: str) -> Iterator[None]:
    """Make acks=-1 appends to ``topic`` fail with NOT_ENOUGH_REPLICAS until exit.

    That includes the WriteTxnMarkers the coordinator sends, so it keeps retrying them. ``topic``
    must have replication factor 2 on a cluster of two: ``follower`` joined the first broker
    (``KafkaBroker(join=first, node_id=2)``). Raising min.insync.replicas above the replication
    factor alone does nothing: brokers cap it at the replication factor (Partition.effectiveMinIsr,
    seen on 3.9.2 and 4.4.0). So: min.insync.replicas=2 and the follower stopped (a controlled
    shutdown drops it from the ISR at once). Produce before entering: acks=all produce fails too.
    """
    assert follower.join is not None, "hold_markers needs the follower of a two-broker cluster"
    bootstrap, key = follower.join.bootstrap_servers, "min.insync.replicas"
    previous = topic_config_override(bootstrap, topic, key)
    alter_topic_config(bootstrap, topic, {key: "2"})
    follower.stop()
    try:
        yield
    finally:
        alter_topic_config(bootstrap, topic, {key: previous})  # releases the markers at once
        follower.start()


# -- transactions --------------------------------------------------------------------------------


def _producer(bootstrap: str, transactional_id: str, transaction_timeout_ms: int = 60000) -> Producer:
    return Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": transactional_id,
            "transaction.timeout.ms": transaction_timeout_ms,
            **CLIENT_LOG,
        }
    )


def _produce(producer: Producer, topic: str, partitions: int, count: int, label: str) -> None:
    """``count`` messages spread round-robin over the partitions, so markers go to several."""
    for i in range(count):
        producer.produce(topic, value=f"{label}-{i}".encode(), partition=i % partitions)


def _run_transactions(
    bootstrap: str, transactional_id: str, topic: str, outcomes: Sequence[bool], messages_per_txn: int
) -> None:
    """One producer, one transaction per outcome: True commits, False aborts."""
    partitions = partition_count(bootstrap, topic)
    producer = _producer(bootstrap, transactional_id)
    producer.init_transactions(30)
    for n, commit in enumerate(outcomes):
        producer.begin_transaction()
        _produce(producer, topic, partitions, messages_per_txn, f"{transactional_id}-{n}")
        if commit:
            producer.commit_transaction(30)
        else:
            producer.flush(30)  # so the aborted data really reaches the partitions
            producer.abort_transaction(30)


def commit_transactions(
    bootstrap: str, transactional_id: str, topic: str, count: int, messages_per_txn: int = 3
) -> None:
    _run_transactions(bootstrap, transactional_id, topic, [True] * count, messages_per_txn)


def run_mix(
    bootstrap: str,
    topic: str,
    transactional_ids: Sequence[str],
    commits: int,
    aborts: int,
    timeouts: int = 0,
    messages_per_txn: int = 3,
    transaction_timeout_ms: int = 2000,
    seed: int = 0,
) -> WorkloadResult:
    """Per transactional id: ``commits`` and ``aborts`` in a seeded random order, then ``timeouts``
    timed-out transactions (each waited for until the coordinator completed its abort)."""
    rng = random.Random(seed)
    result = WorkloadResult(topic, messages_per_txn)
    for tid in transactional_ids:
        outcomes = [True] * commits + [False] * aborts
        rng.shuffle(outcomes)
        _run_transactions(bootstrap, tid, topic, outcomes, messages_per_txn)
        for _ in range(timeouts):
            timed_out_producer(bootstrap, tid, topic, transaction_timeout_ms, messages_per_txn)
        result.per_id[tid] = TxnCounts(commits, aborts, timeouts)
    return result


def count_messages(bootstrap: str, topic: str, read_committed: bool, timeout: float = 60) -> int:
    """Messages in ``topic`` as a consumer sees them: committed only, or everything written."""
    partitions = partition_count(bootstrap, topic)
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "txn-harness",
            "enable.auto.commit": False,
            "enable.partition.eof": True,  # EOF is at the last stable offset under read_committed
            "isolation.level": "read_committed" if read_committed else "read_uncommitted",
            **CLIENT_LOG,
        }
    )
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    count = 0
    at_eof: set[int | None] = set()  # (partition() is typed optional, for messages without one)
    deadline = time.monotonic() + timeout
    try:
        while len(at_eof) < partitions:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{topic}: no end of partition after {timeout} s")
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            error = msg.error()
            if error:
                if error.code() != KafkaError._PARTITION_EOF:
                    raise KafkaException(error)
                at_eof.add(msg.partition())
            else:
                count += 1
    finally:
        consumer.close()
    return count


@contextmanager
def transactions_running(
    bootstrap: str, topic: str, transactional_ids: Sequence[str], pause_s: float = 0.05
) -> Iterator[RunningCounts]:
    """Transactions back to back (two in three committed, one aborted) on one thread per id until
    exit, riding out broker restarts and coordinator moves as an application would: an abortable
    error aborts the transaction, any other error drops the producer and inits a new one (which
    fences and aborts what the old one left open). On exit every id is settled: a last
    init_transactions returns only once no transaction of it is open or has markers pending."""
    counts = RunningCounts()
    lock = threading.Lock()
    stop = threading.Event()

    def error(exc: KafkaException) -> KafkaError:
        with lock:
            counts.errors[exc.args[0].name()] += 1
        return exc.args[0]

    def run(transactional_id: str) -> None:
        partitions = partition_count(bootstrap, topic)
        producer: Producer | None = None
        for n in itertools.count():
            if stop.is_set():
                return
            try:
                if producer is None:
                    producer = _producer(bootstrap, transactional_id)
                    with lock:
                        counts.producers += 1
                    producer.init_transactions(60)
                producer.begin_transaction()
                _produce(producer, topic, partitions, 2, f"{transactional_id}-{n}")
                commit = n % 3 != 2
                if commit:
                    producer.commit_transaction(60)
                else:
                    producer.flush(60)  # else the abort stays in the client: nothing was sent
                    producer.abort_transaction(60)
                with lock:
                    counts.commits += commit
                    counts.aborts += not commit
            except KafkaException as exc:
                abortable = error(exc).txn_requires_abort()
                if producer is None or not abortable:  # (None: making it failed)
                    producer = None
                    continue
                try:
                    producer.abort_transaction(60)
                    with lock:
                        counts.aborts += 1
                except KafkaException as abort_exc:
                    error(abort_exc)
                    producer = None
            stop.wait(pause_s)

    threads = [threading.Thread(target=run, args=(tid,), daemon=True) for tid in transactional_ids]
    for thread in threads:
        thread.start()
    try:
        yield counts
    finally:
        stop.set()
        for thread in threads:
            thread.join(300)
        for tid in transactional_ids:
            _producer(bootstrap, tid).init_transactions(120)


# -- timed-out transactions ----------------------------------------------------------------------


def transaction_state_partition(transactional_id: str, partitions: int) -> int:
    """The __transaction_state partition of an id: abs(Java String.hashCode) % partitions."""
    utf16 = transactional_id.encode("utf-16-be")
    h = 0
    for (unit,) in struct.iter_unpack(">H", utf16):
        h = (31 * h + unit) & 0xFFFFFFFF
    h = h - (1 << 32) if h >= 1 << 31 else h
    return 0 if h == -(1 << 31) else abs(h) % partitions  # Kafka's Utils.abs maps MIN_VALUE to 0


def _state_partition(bootstrap: str, transactional_id: str) -> TopicPartition | None:
    topics = AdminClient({"bootstrap.servers": bootstrap}, **CLIENT_LOG).list_topics(timeout=30).topics
    if TRANSACTION_STATE_TOPIC not in topics:
        return None
    n = len(topics[TRANSACTION_STATE_TOPIC].partitions)
    return TopicPartition(TRANSACTION_STATE_TOPIC, transaction_state_partition(transactional_id, n))


def _consumer(bootstrap: str) -> Consumer:
    return Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "txn-harness", "enable.auto.commit": False, **CLIENT_LOG}
    )


def _wait_complete_abort(bootstrap: str, transactional_id: str, start_offset: int, timeout: float) -> None:
    """Read the id's __transaction_state partition from ``start_offset`` until a CompleteAbort of it.

    Only the fixed value prefix is decoded (identical in value v0 and v1): version int16,
    ProducerId int64, ProducerEpoch int16, TransactionTimeoutMs int32, TransactionStatus int8.
    The harness must not depend on the codec it helps to test.
    """
    tp = _state_partition(bootstrap, transactional_id)
    assert tp is not None, "the timed-out producer created no transaction state"
    tp.offset = start_offset
    wanted_key = struct.pack(">hh", 0, len(transactional_id.encode())) + transactional_id.encode()
    consumer = _consumer(bootstrap)
    consumer.assign([tp])
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None or msg.error() or msg.key() != wanted_key:
                continue
            value = msg.value()
            if value is not None and decode_value(value).state == TransactionState.COMPLETE_ABORT:
                return
    finally:
        consumer.close()
    raise TimeoutError(f"coordinator did not abort {transactional_id}'s transaction within {timeout} s")


def timed_out_producer(
    bootstrap: str,
    transactional_id: str,
    topic: str,
    transaction_timeout_ms: int = 2000,
    messages: int = 3,
    wait: bool = True,
    timeout: float = 60,
) -> None:
    """Leave a transaction open in a child process, SIGKILL it, and (``wait``) return once the
    coordinator has aborted it on timeout (PrepareAbort with a bumped epoch, then CompleteAbort)."""
    tp = _state_partition(bootstrap, transactional_id)
    start = 0
    if tp is not None:
        consumer = _consumer(bootstrap)
        try:
            start = consumer.get_watermark_offsets(tp, timeout=30)[1]
        finally:
            consumer.close()
    _run_child_until_ready(
        [
            "hang",
            "--bootstrap",
            bootstrap,
            "--transactional-id",
            transactional_id,
            "--topic",
            topic,
            "--transaction-timeout-ms",
            str(transaction_timeout_ms),
            "--messages",
            str(messages),
        ],
        f"hanging producer for {transactional_id}",
        timeout,
    )
    if wait:
        _wait_complete_abort(bootstrap, transactional_id, start, timeout)


def _hang(args: argparse.Namespace) -> None:
    producer = _producer(args.bootstrap, args.transactional_id, args.transaction_timeout_ms)
    producer.init_transactions(30)
    producer.begin_transaction()
    _produce(producer, args.topic, partition_count(args.bootstrap, args.topic), args.messages, "hang")
    if producer.flush(30):
        raise KafkaException("hanging producer could not deliver its messages")
    _ready_until_killed()


def unregistered_transaction(bootstrap: str, transactional_id: str, topic: str, timeout: float = 60) -> None:
    """Leave a transaction open on `topic`'s partition 0 that its coordinator never heard of: a
    hanging transaction (KIP-664), as a client bug or a delayed produce request makes one.

    A child process (kafka-python) inits the transactional id, then writes transactional records
    without AddPartitionsToTxn, and is SIGKILLed. Brokers accept the write only without KIP-890's
    check: the broker needs `transaction.partition.verification.enable=false`."""
    _run_child_until_ready(
        ["unregistered", "--bootstrap", bootstrap, "--transactional-id", transactional_id, "--topic", topic],
        f"unregistered transaction of {transactional_id}",
        timeout,
    )


def _run_child_until_ready(arguments: list[str], what: str, timeout: float) -> None:
    """Runs this module's CLI in a child until it prints READY (its transaction is left open), then
    SIGKILLs it, mid-transaction. The child's client lines go through `logging` at the level the
    harness's client logger has here (the demo's ERROR hides a producer's retries), never raw."""
    level = logging.getLevelName(logging.getLogger(CLIENT_LOGGER).getEffectiveLevel())
    child = subprocess.Popen(
        [sys.executable, "-m", "txn_workshop.harness.workload", "--client-log-level", level, *arguments],
        stdout=subprocess.PIPE,
        text=True,
        preexec_fn=_child_of_this_process,
    )
    try:
        assert child.stdout is not None
        ready, _, _ = select.select([child.stdout], [], [], timeout)
        line = child.stdout.readline().strip() if ready else ""
        if line != _READY:
            raise RuntimeError(f"{what} not ready (got {line!r})")
    finally:
        child.kill()
        child.wait()


def _child_of_this_process() -> None:
    """A `preexec_fn`: the child is this process's to stop. It dies with it, even if it leaves
    without the `finally` above (the demo's Ctrl-C leaves its workload's thread where it is), since
    the child waits to be killed, forever; and a terminal's Ctrl-C, which reaches the whole process
    group, leaves it alone (Python keeps SIGINT ignored when it starts so) instead of printing a
    KeyboardInterrupt's traceback on the demo's terminal."""
    die_with_parent()
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _ready_until_killed() -> None:
    print(_READY, flush=True)
    while True:  # until the parent kills us, mid-transaction
        time.sleep(3600)


def _unregistered(args: argparse.Namespace) -> None:
    from kafka import KafkaProducer
    from kafka.structs import TopicPartition as KafkaPythonPartition

    producer = KafkaProducer(bootstrap_servers=args.bootstrap, transactional_id=args.transactional_id)
    producer.init_transactions()
    producer.begin_transaction()
    manager = producer._transaction_manager  # type: ignore[attr-defined]  # because the bug is reproduced inside kafka-python's private transaction manager
    # The bug being reproduced: the partition counts as added, but AddPartitionsToTxn is never sent.
    manager.maybe_add_partition_to_transaction = manager._partitions_in_transaction.add
    producer.send(args.topic, b"never committed", partition=0).get(30)
    assert KafkaPythonPartition(args.topic, 0) in manager._partitions_in_transaction
    _ready_until_killed()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m txn_workshop.harness.workload")
    parser.add_argument(
        "--client-log-level",
        default="WARNING",
        choices=("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"),
        help="the level of the librdkafka client's lines (on stderr, through logging)",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    unregistered = sub.add_parser("unregistered", help="write transactional records without AddPartitionsToTxn")
    unregistered.add_argument("--bootstrap", required=True)
    unregistered.add_argument("--transactional-id", required=True)
    unregistered.add_argument("--topic", required=True)
    hang = sub.add_parser("hang", help="begin a transaction, produce, print READY, never finish")
    hang.add_argument("--bootstrap", required=True)
    hang.add_argument("--transactional-id", required=True)
    hang.add_argument("--topic", required=True)
    hang.add_argument("--transaction-timeout-ms", type=int, default=2000)
    hang.add_argument("--messages", type=int, default=3)
    args = parser.parse_args(argv)
    # Without a handler, `logging` would print the client's warnings bare (its last resort), e.g. a
    # producer retrying InitProducerId ("Failed to acquire transactional PID ... retrying").
    logs.configure("WARNING")
    logging.getLogger(CLIENT_LOGGER).setLevel(args.client_log_level)
    (_hang if args.command == "hang" else _unregistered)(args)


@contextmanager
def held_commit(bootstrap: str, follower: KafkaBroker, topic: str, transactional_id: str) -> Iterator[None]:
    """A transaction committed while its markers are held back (see hold_markers): PREPARE_COMMIT is
    written before the body runs; COMPLETE_COMMIT follows within seconds after it exits."""
    producer = _producer(bootstrap, transactional_id)
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(topic, value=b"held", partition=0)
    producer.flush(30)  # before the hold: acks=all produce fails while it lasts
    with hold_markers(follower, topic):
        producer.commit_transaction(30)  # returns once PREPARE_COMMIT is written; markers are retried
        yield


# -- cluster changes through Kafka's own tools (their class names differ between versions) -------


def reassign_partitions(broker: KafkaBroker, replicas: Mapping[tuple[str, int], Sequence[int]], plan: Path) -> None:
    """Starts moving each (topic, partition) onto ``replicas`` (the first is the preferred leader)
    with Kafka's ReassignPartitionsCommand; ``plan`` is where its JSON plan is written."""
    plan.write_text(
        json.dumps(
            {
                "version": 1,
                "partitions": [
                    {"topic": topic, "partition": partition, "replicas": list(ids)}
                    for (topic, partition), ids in replicas.items()
                ],
            }
        )
    )
    result = broker.run_tool(
        broker.kafka.reassign_partitions_class,
        "--bootstrap-server",
        broker.bootstrap_servers,
        "--reassignment-json-file",
        str(plan),
        "--execute",
    )
    if result.returncode != 0:
        raise RuntimeError(f"ReassignPartitionsCommand failed: {result.stdout}{result.stderr}")


def set_logger_level(broker: KafkaBroker, logger: str, level: str | None) -> None:
    """Sets a log4j logger's level on the running ``broker`` (ConfigCommand, broker-loggers);
    None restores the configured level."""
    change = ["--add-config", f"{logger}={level}"] if level else ["--delete-config", logger]
    result = broker.run_tool(
        broker.kafka.config_command_class,
        "--bootstrap-server",
        broker.bootstrap_servers,
        "--entity-type",
        "broker-loggers",
        "--entity-name",
        str(broker.node_id),
        "--alter",
        *change,
    )
    if result.returncode != 0:
        raise RuntimeError(f"ConfigCommand failed: {result.stdout}{result.stderr}")


if __name__ == "__main__":
    main()

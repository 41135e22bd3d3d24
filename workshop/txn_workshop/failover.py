"""Brokers bounced as Kafka's own transactions system test bounces them: a three-node cluster in the
deployment shape (`__transaction_state` 50 partitions, replication factor 3, min.insync.replicas 2,
Kafka's default broker.session.timeout.ms), the coordinators' lines in the file deploy/'s logging gives
them (TransactionStateManager at DEBUG), then node 2 killed (SIGKILL) and restarted, node 3 the same,
node 2 stopped cleanly (SIGTERM) and restarted, each followed by a preferred leader election. What
tests/integration/test_failover_counting.py and bench/failover_counting.py share: the cluster, the
bounces, and Kafka's own word on what was appended (the high watermarks, the coordinators' lines).
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Literal

from confluent_kafka import Consumer, ElectionType, TopicPartition
from confluent_kafka.admin import AdminClient

from txn_workshop.harness import deployment_shape
from txn_workshop.harness.admin import CLIENT_LOG, TRANSACTION_STATE_TOPIC, create_topic
from txn_workshop.harness.broker import KafkaBroker
from txn_workshop.harness.workload import transaction_state_partition

NODES = deployment_shape.NODES
PARTITIONS = 50
DATA_TOPIC = "orders"
COORDINATOR_LOG = deployment_shape.COORDINATOR_LOG
bootstrap_of = deployment_shape.bootstrap_of
CLUSTER = {
    **deployment_shape.PROPERTIES,
    # Leaders move only when the bounces move them (a kill, a stop, an election).
    "auto.leader.rebalance.enable": "false",
}
# Each bounce: the node, and how it goes down (then it is started again and leaders elected back).
BOUNCES: tuple[tuple[int, Literal["kill", "stop"]], ...] = ((2, "kill"), (3, "kill"), (2, "stop"))
# A `succeeded` line's transactional id and its record's fields (3.x's format and 4.1+'s).
_SUCCEEDED = re.compile(r"Updating (.*)'s transaction state to (.*) succeeded")
_FIELDS = tuple(
    re.compile(rf"[(\[ ]{name}=(\w+)") for name in ("txnState", "producerId", "producerEpoch", "txnLastUpdateTimestamp")
)
# 3.x's state names, as 4.x and the exporter's target_state label have them.
STATE_NAMES = {
    "Empty": "EMPTY",
    "Ongoing": "ONGOING",
    "PrepareCommit": "PREPARE_COMMIT",
    "PrepareAbort": "PREPARE_ABORT",
    "CompleteCommit": "COMPLETE_COMMIT",
    "CompleteAbort": "COMPLETE_ABORT",
}
# (transactional id, target state, producer id, producer epoch, last update ms): what a record and
# its `succeeded` line both carry.
Key = tuple[str, str, int, int, int]


@contextmanager
def cluster(version: str, root: Path, mode: Literal["kraft", "zookeeper"] = "kraft") -> Iterator[list[KafkaBroker]]:
    """The three nodes (txn_workshop.harness.deployment_shape), leaders moving only when the bounces move
    them, and the data topic; stopped on exit."""
    brokers = deployment_shape.start(version, root, mode=mode, properties=CLUSTER)
    try:
        create_topic(bootstrap_of(brokers), DATA_TOPIC, partitions=3, replication_factor=3)
        yield brokers
    finally:
        deployment_shape.stop(brokers)


def leadership(bootstrap: str) -> dict[int, tuple[int, list[int], list[int]]]:
    """Each `__transaction_state` partition's leader, replicas and in-sync replicas."""
    partitions = (
        (AdminClient({"bootstrap.servers": bootstrap}, **CLIENT_LOG).list_topics(TRANSACTION_STATE_TOPIC, timeout=30))
        .topics[TRANSACTION_STATE_TOPIC]
        .partitions
    )
    return {p: (m.leader, list(m.replicas), sorted(m.isrs)) for p, m in partitions.items()}


def settle(bootstrap: str, timeout: float = 180) -> dict[int, set[int]]:
    """Every replica in sync and every partition led by its preferred replica (a preferred election
    where needed); the partitions each node leads then."""
    admin = AdminClient({"bootstrap.servers": bootstrap}, **CLIENT_LOG)
    deadline = time.monotonic() + timeout
    while True:
        led = leadership(bootstrap)
        if all(isr == sorted(NODES) for _, _, isr in led.values()):
            if all(leader == replicas[0] for leader, replicas, _ in led.values()):
                return {node: {p for p, (leader, _, _) in led.items() if leader == node} for node in NODES}
            try:
                admin.elect_leaders(
                    ElectionType.PREFERRED, [TopicPartition(TRANSACTION_STATE_TOPIC, p) for p in led]
                ).result(30)
            except Exception:  # some led by their preferred replica already: the rest moved anyway
                pass
        if time.monotonic() > deadline:
            raise TimeoutError(f"not settled: {led}")
        time.sleep(1)


def moved_away(bootstrap: str, node: int, timeout: float = 120) -> float:
    """Waits until `node` leads no partition (the controller fenced it, or its shutdown moved them);
    returns when (monotonic)."""
    deadline = time.monotonic() + timeout
    while any(leader == node for leader, _, _ in leadership(bootstrap).values()):
        if time.monotonic() > deadline:
            raise TimeoutError(f"node {node} still leads partitions")
        time.sleep(0.2)
    return time.monotonic()


def bounce(broker: KafkaBroker, how: Literal["kill", "stop"]) -> None:
    if how == "kill":
        broker.kill()
    else:
        broker.stop()


def high_watermarks(bootstrap: str, partitions: int = PARTITIONS) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "failover-truth"}, **CLIENT_LOG)
    try:
        return {
            p: consumer.get_watermark_offsets(TopicPartition(TRANSACTION_STATE_TOPIC, p), timeout=30)[1]
            for p in range(partitions)
        }
    finally:
        consumer.close()


def spread_ids(prefix: str, every: int = 4) -> list[str]:
    """A transactional id on every `every`th `__transaction_state` partition: some on each coordinator."""
    return [
        next(
            f"{prefix}-{p}-{i}"
            for i in range(10_000)
            if transaction_state_partition(f"{prefix}-{p}-{i}", PARTITIONS) == p
        )
        for p in range(0, PARTITIONS, every)
    ]


def succeeded_lines(brokers: list[KafkaBroker]) -> set[Key]:
    """The key of every `succeeded` line the coordinators wrote (their own word that an append was
    acknowledged), from their log files."""
    lines: set[Key] = set()
    for broker in brokers:
        for path in broker.logs_dir.glob(COORDINATOR_LOG + "*"):
            for match in _SUCCEEDED.finditer(path.read_text(errors="replace")):
                found = [field.search(match[2]) for field in _FIELDS]
                if all(found):
                    state, pid, epoch, update = (f[1] for f in found)  # type: ignore[index]
                    lines.add((match[1], STATE_NAMES.get(state, state), int(pid), int(epoch), int(update)))
    return lines

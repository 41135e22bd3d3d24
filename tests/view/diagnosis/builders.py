"""Hand-built cluster snapshots and view rows for the diagnosis tests (and the consumer groups')."""

from __future__ import annotations

from exporter.contracts.cluster import (
    TOPIC,
    Brokers,
    ClusterSnapshot,
    Fact,
    MinInsyncReplicas,
    PartitionMetadata,
    ProducerState,
    TopicMetadata,
)

NOW = 1_800_000_000_000
AS_OF = NOW - 1_000
BOOTSTRAP = "kafka-1:9092"


def snapshot(
    partitions: dict[tuple[str, int], PartitionMetadata] | None = None,
    min_isr: dict[str, MinInsyncReplicas] | None = None,
    live: set[int] = frozenset({1, 2, 3}),
    fenced: set[int] = frozenset(),
    producers: dict[tuple[str, int], tuple[ProducerState, ...]] | None = None,
    unknown: str | None = None,
) -> ClusterSnapshot:
    """A snapshot of the given partitions (plus __transaction_state-0 led by 1, ISR [1], min ISR 1);
    with `unknown`, every metadata and config lookup failed with that problem."""
    found = {("__transaction_state", 0): PartitionMetadata(1, (1,), (1,)), **(partitions or {})}
    topics: dict[str, dict[int, PartitionMetadata]] = {}
    for (topic, index), metadata in found.items():
        topics.setdefault(topic, {})[index] = metadata
    configs = {"__transaction_state": MinInsyncReplicas(1, TOPIC), **(min_isr or {})}
    if unknown:
        return ClusterSnapshot(
            Fact(None, problem=unknown),
            {t: Fact(None, problem=unknown) for t in topics},
            {t: Fact(None, problem=unknown) for t in topics},
            {},
        )
    return ClusterSnapshot(
        Fact(Brokers(frozenset(live), frozenset(fenced)), AS_OF),
        {t: Fact(TopicMetadata(ps), AS_OF) for t, ps in topics.items()},
        {t: Fact(v, AS_OF) for t, v in configs.items()},
        {tp: Fact(v, AS_OF) for tp, v in (producers or {}).items()},
    )


def row(state: str = "PREPARE_COMMIT", **changes: object) -> dict:
    base = {
        "transactional_id": "orders-tx-1",
        "state": state,
        "producer_id": 4001,
        "producer_epoch": 7,
        "state_entered_ms": NOW - 60_000,
        "transaction_start_ms": NOW - 61_000,
        "transaction_timeout_ms": 5_000,
        "late": False if state == "ONGOING" else None,
        "stuck": state != "ONGOING",
        "coordinator_partition": 0,
        "coordinator_broker": 1,
        "partitions": ["orders-0", "orders-1"],
        "marker_errors": [],
    }
    base.update(changes)
    return base


def error(partition: str, name: str, count: int = 100, ago_ms: int = 100) -> dict:
    return {"partition": partition, "error": name, "count": count, "last_seen_ms": NOW - ago_ms}


HELD = {("orders", 0): PartitionMetadata(2, (2, 3), (2,)), ("orders", 1): PartitionMetadata(1, (1, 2), (1, 2))}
ORDERS_MIN_ISR_2 = {"orders": MinInsyncReplicas(2, TOPIC)}


def producer(pid: int = 4001, last_ago_ms: int = 30_000, start: int = 17) -> ProducerState:
    return ProducerState(pid, 7, NOW - last_ago_ms, 3, start)

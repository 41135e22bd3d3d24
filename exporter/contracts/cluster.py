"""What the cluster looks like around a transaction, as the transactions view's diagnosis reads it:
a partition's leader, replicas and ISR, a topic's min.insync.replicas and where it is set, the live
and fenced brokers, the active producers of a partition (DescribeProducers). Plain values: the
cluster-state source (exporter.sources.cluster_state) looks them up, the diagnosis rules
(exporter.view.diagnosis) read them; neither knows the other.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Generic, TypeVar

TRANSACTION_STATE_TOPIC = "__transaction_state"
# Where a min.insync.replicas value is set.
TOPIC, BROKER, DEFAULT = "topic", "broker", "default"

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Fact(Generic[T]):
    """One looked-up value: `value` as of `as_of_ms` (wall clock), or None with `problem` saying why
    it is unknown (no answer in time, an error)."""

    value: T | None
    as_of_ms: int | None = None
    problem: str | None = None


@dataclass(frozen=True, slots=True)
class PartitionMetadata:
    leader: int | None  # None: no leader (-1)
    replicas: tuple[int, ...]
    isr: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Brokers:
    """The brokers DescribeCluster lists: registered and unfenced (`live`), and fenced (the controller
    lost their heartbeats; 4.0+ say so, older brokers leave fenced ones out)."""

    live: frozenset[int]
    fenced: frozenset[int] = frozenset()


@dataclass(frozen=True, slots=True)
class TopicMetadata:
    """A topic's partitions, or none and `error` (UNKNOWN_TOPIC_OR_PARTITION: it does not exist)."""

    partitions: Mapping[int, PartitionMetadata]
    error: str | None = None


@dataclass(frozen=True, slots=True)
class MinInsyncReplicas:
    value: int
    source: str  # TOPIC, BROKER or DEFAULT


@dataclass(frozen=True, slots=True)
class ProducerState:
    """One active producer of a partition, as DescribeProducers returns it from the leader."""

    producer_id: int
    producer_epoch: int
    last_timestamp_ms: int
    coordinator_epoch: int
    transaction_start_offset: int  # -1: no open transaction


@dataclass(frozen=True, slots=True)
class ClusterSnapshot:
    """What one lookup found; every key asked for is present (its Fact may be unknown)."""

    brokers: Fact[Brokers]
    topics: Mapping[str, Fact[TopicMetadata]]
    min_insync_replicas: Mapping[str, Fact[MinInsyncReplicas]]
    producers: Mapping[tuple[str, int], Fact[tuple[ProducerState, ...]]]

    def partition(self, topic: str, partition: int) -> Fact[PartitionMetadata]:
        """One partition's metadata; UNKNOWN_TOPIC_OR_PARTITION as the problem when the topic or
        the partition does not exist."""
        fact = self.topics.get(topic)
        if fact is None:
            return Fact(None, problem="not looked up")
        if fact.value is None:
            return Fact(None, fact.as_of_ms, fact.problem)
        found = fact.value.partitions.get(partition)
        if found is None:
            return Fact(None, fact.as_of_ms, fact.value.error or "UNKNOWN_TOPIC_OR_PARTITION")
        return Fact(found, fact.as_of_ms)


EMPTY_SNAPSHOT = ClusterSnapshot(Fact(None, problem="not looked up"), {}, {}, {})

"""What the cluster snapshot says of one partition (leader, replicas, ISR, min.insync.replicas, the
brokers down), with None for what is unknown, and the words the causes build from those facts."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from exporter.contracts.cluster import (
    BROKER,
    DEFAULT,
    TOPIC,
    Brokers,
    ClusterSnapshot,
    Fact,
    MinInsyncReplicas,
    PartitionMetadata,
)
from exporter.view.document import PartitionFacts


class SnapshotFacts:
    """What the snapshot says of one partition, with None for what is unknown."""

    __slots__ = ("as_of_ms", "brokers", "exists", "metadata", "min_isr", "unknown")

    def __init__(
        self,
        metadata: PartitionMetadata | None,
        min_isr: MinInsyncReplicas | None,
        brokers: Brokers | None,
        as_of_ms: int | None,
        unknown: str | None,
        exists: bool = True,
    ) -> None:
        self.metadata = metadata
        self.min_isr = min_isr
        self.brokers = brokers
        self.as_of_ms = as_of_ms
        self.unknown = unknown
        self.exists = exists

    @classmethod
    def of(cls, snapshot: ClusterSnapshot, tp: tuple[str, int], brokers: Fact[Brokers]) -> SnapshotFacts:
        fact = snapshot.partition(*tp)
        min_isr = snapshot.min_insync_replicas.get(tp[0], Fact(None, problem="not looked up"))
        exists = fact.problem != "UNKNOWN_TOPIC_OR_PARTITION"
        unknown = []
        if exists:
            unknown += [f"metadata: {f.problem}" for f in (fact,) if f.value is None]
            unknown += [f"min.insync.replicas: {f.problem}" for f in (min_isr,) if f.value is None]
            unknown += [f"brokers: {f.problem}" for f in (brokers,) if f.value is None]
        return cls(fact.value, min_isr.value, brokers.value, fact.as_of_ms, "; ".join(unknown) or None, exists)

    @classmethod
    def missing(cls, why: str) -> SnapshotFacts:
        return cls(None, None, None, None, why)

    def json(self) -> PartitionFacts:
        m = self.metadata
        return {
            "leader": None if m is None else m.leader,
            "replicas": None if m is None else list(m.replicas),
            "isr": None if m is None else list(m.isr),
            "out_of_isr": None if m is None else self.out_of_isr(),
            "brokers_down": None if m is None or self.brokers is None else self.down(m.replicas),
            "min_insync_replicas": None if self.min_isr is None else self.min_isr.value,
            "min_insync_replicas_source": None if self.min_isr is None else self.min_isr.source,
            "exists": self.exists,
            "as_of_ms": self.as_of_ms,
            "unknown": self.unknown,  # what could not be learned, and why (the row shows regardless)
        }

    def out_of_isr(self) -> list[int]:
        m = self.metadata
        return [] if m is None else [r for r in m.replicas if r not in m.isr]

    def down(self, ids: Iterable[int]) -> list[int]:
        """Of `ids`, the brokers not registered and unfenced (DescribeCluster)."""
        return [] if self.brokers is None else [i for i in ids if i not in self.brokers.live]

    def broker_state(self, broker: int) -> str:
        if self.brokers is None:
            return f"broker {broker}"
        if broker in self.brokers.fenced:
            return f"broker {broker} (fenced: the controller lost its heartbeats; down, hung or cut off)"
        if broker not in self.brokers.live:
            return f"broker {broker} (not in the cluster: down)"
        return f"broker {broker} (in the cluster: slow, stalled, or stopped less than broker.session.timeout.ms ago)"

    def min_isr_text(self) -> str:
        if self.min_isr is None:
            return "min.insync.replicas (unknown)"
        where = {TOPIC: "the topic's own setting", BROKER: "the brokers' setting", DEFAULT: "Kafka's default"}
        return f"min.insync.replicas={self.min_isr.value} ({where.get(self.min_isr.source, self.min_isr.source)})"

    def under_min_isr(self) -> bool | None:
        if self.metadata is None or self.min_isr is None:
            return None
        return len(self.metadata.isr) < self.min_isr.value

    def isr_text(self) -> str:
        m = self.metadata
        assert m is not None
        # Sorted: membership is what counts here (the facts keep Kafka's order, the preferred leader first).
        return f"ISR {_ids(sorted(m.isr))} of replicas {_ids(sorted(m.replicas))}"

    def trouble(self) -> str | None:
        """What is wrong with the partition itself, whatever error was seen: None when nothing."""
        if not self.exists:
            return "the topic or partition does not exist (deleted?): the coordinator skips markers for a deleted partition"
        m = self.metadata
        if m is None:
            return None
        if m.leader is None:
            isr_down = self.down(m.isr)
            return (
                f"no leader: {self.isr_text()}"
                + (f", {', '.join(self.broker_state(b) for b in isr_down)}" if isr_down else "")
                + "; the coordinator keeps the markers queued for a leader (UnknownDestinationQueueSize), "
                "nothing is logged per retry"
            )
        if self.brokers is not None and m.leader not in self.brokers.live:
            return (
                f"its leader, {self.broker_state(m.leader)}, cannot be reached: the coordinator's requests "
                f"to it fail or time out (no partition error is logged)"
            )
        if self.under_min_isr():
            return (
                f"{self.isr_text()} is below {self.min_isr_text()}; out of the ISR: "
                f"{', '.join(self.broker_state(b) for b in self.out_of_isr())}"
            )
        return None


def _ids(ids: Sequence[int]) -> str:
    return "[" + ", ".join(map(str, ids)) + "]"

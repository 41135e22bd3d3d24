"""Whose offsets ride in a transaction: the consumer groups with pending transactional offsets on a
`__consumer_offsets` partition, as the transactions view shows them beside a row's
`__consumer_offsets-N`. Plain values and Kafka's rule for a group's partition: the consumer-groups
source (exporter.sources.consumer_groups) looks them up, the view (exporter.view.diagnosis) reads
them; neither knows the other.

A consume-transform-produce transaction (sendOffsetsToTransaction) holds `__consumer_offsets-N`,
not the group: N is the partition of every group for which `offsets_partition(group, count) == N`,
and the group coordinator (the leader of that partition) keeps the transaction's offsets pending
until its marker arrives. Kafka answers an OffsetFetch with require_stable (KIP-447) for such a
group's partition with UNSTABLE_OFFSET_COMMIT.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from exporter.contracts.cluster import Fact

CONSUMER_OFFSETS_TOPIC = "__consumer_offsets"
UNSTABLE_OFFSET_COMMIT = 88  # Errors.java: the group has pending transactional offsets there

_INT_MIN = -(1 << 31)


def java_string_hash(text: str) -> int:
    """Java's String.hashCode: s[0]*31^(n-1) + ... + s[n-1] over UTF-16 code units (a character
    outside the BMP counts as its two surrogates), in 32-bit two's complement."""
    h = 0
    data = text.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] << 8 | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def kafka_abs(n: int) -> int:
    """org.apache.kafka.common.utils.Utils.abs: Math.abs, except Integer.MIN_VALUE gives 0 (not itself)."""
    return 0 if n == _INT_MIN else abs(n)


def offsets_partition(group_id: str, partitions: int) -> int:
    """The `__consumer_offsets` partition of a group: Utils.abs(groupId.hashCode()) % partitions
    (GroupMetadataManager.partitionFor in 3.x, GroupCoordinatorService.partitionFor in 4.x), where
    `partitions` is the topic's partition count (offsets.topic.num.partitions when it was created)."""
    if partitions <= 0:
        raise ValueError(f"a topic has at least one partition, not {partitions}")
    return kafka_abs(java_string_hash(group_id)) % partitions


@dataclass(frozen=True, slots=True)
class PendingGroup:
    """A group whose transactional offsets are pending, and its coordinator (FindCoordinator; None:
    it did not say)."""

    group_id: str
    coordinator: int | None


@dataclass(frozen=True, slots=True)
class OffsetsPartitionGroups:
    """What the coordinator of one `__consumer_offsets` partition says of the groups stored there:
    those with pending transactional offsets (of any open transaction holding the partition: Kafka
    does not say which producer's), how many groups of the partition were asked, how many more there
    were beyond the bound, and the groups whose answer was an error (group, error name)."""

    pending: tuple[PendingGroup, ...]
    checked: int
    not_checked: int = 0
    unknown: tuple[tuple[str, str], ...] = ()


# Looks up the groups of some `__consumer_offsets` partitions (by number); bounded in time, never
# raising (exporter.sources.consumer_groups.ConsumerGroupsSource.lookup).
GroupsLookup = Callable[[Iterable[int]], Mapping[int, Fact[OffsetsPartitionGroups]]]

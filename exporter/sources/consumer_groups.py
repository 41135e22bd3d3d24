"""The consumer groups whose transactional offsets are pending on a `__consumer_offsets` partition,
for the transactions view: a consume-transform-produce transaction lists `__consumer_offsets-N`,
and on-call wants the group (its committed offsets wait behind the transaction's markers).

For one partition N, on kafka-python's admin (as exporter.sources.cluster_state; its requests routed
by exporter.sources.kafka_admin), each request bounded by the request timeout:
1. Metadata of `__consumer_offsets`: its partition count and N's leader, the coordinator of every
   group stored on N.
2. ListGroups to that leader (a broker lists the groups it coordinates); the groups whose
   partition is N are kept (exporter.contracts.groups.offsets_partition), at most `max_groups`
   (sorted by id; the rest counted).
3. One OffsetFetch (v8-9: several groups at once) to the leader, require_stable, all partitions of
   each group: the coordinator answers UNSTABLE_OFFSET_COMMIT for a partition with pending
   transactional offsets (3.x GroupMetadataManager.getOffsets, 4.x OffsetMetadataManager
   .fetchAllOffsets). "All partitions" means those with a committed offset, though: a group's first
   transactional offsets of a partition are not seen there. So, for the groups not found pending,
4. DescribeGroups to the leader: their members' assigned partitions (classic consumer protocol), and
   one more OffsetFetch, require_stable, of the assigned partitions that had no committed offset.
5. FindCoordinator (v4, batched) for the pending groups: the broker that coordinates them now.
An error or no answer in time: the partition's groups are unknown (`Fact.problem`); a group whose
own answer is an error is listed as unknown with it.

Bounded like the cluster state: only the partitions of the rows shown (the caller caps them),
cached `cache_seconds` (a stale answer shown with its time while it refreshes), one refresh per
partition at a time, on this source's own daemon threads (never under the model's lock), a view
waiting `wait_seconds` at most for a first look. What Kafka cannot say: which open transaction's
offsets they are, when two transactions hold the same partition (OffsetFetch names no producer).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import wait as wait_futures
from typing import Any, Unpack

from exporter.contracts.cluster import Fact
from exporter.contracts.groups import (
    CONSUMER_OFFSETS_TOPIC,
    UNSTABLE_OFFSET_COMMIT,
    OffsetsPartitionGroups,
    PendingGroup,
    offsets_partition,
)
from exporter.sources.kafka_admin import admin_client
from exporter.sources.kafka_python_adapter import cluster_metadata, describe_groups, error_name, run, send
from exporter.sources.lookups import CachedEntry, CachedLookups, LookupOptions

log = logging.getLogger("txn_exporter.consumer_groups")

MAX_GROUPS = 200  # groups of one partition asked (one OffsetFetch, one DescribeGroups)
MAX_PARTITIONS = 50  # offsets partitions looked up per view
WORKER_THREADS = 2
# OffsetFetch v8 and v9 name topics (v10 gives topic ids); v8 is Kafka 3.0+.
OFFSET_FETCH_VERSIONS = (8, 9)


# --- reading the answers (pure: the tests feed them plain objects) --------------------------------


def groups_of_partition(listed: Iterable[str], partition: int, partitions: int) -> list[str]:
    """The listed groups stored on `__consumer_offsets` `partition` (of `partitions`), sorted."""
    return sorted({g for g in listed if offsets_partition(g, partitions) == partition})


def read_offset_fetch(
    groups: Iterable[Any],
) -> tuple[set[str], dict[str, str], dict[str, set[tuple[str, int]]]]:
    """From an OffsetFetch v8+ response's groups: (the groups with pending transactional offsets:
    UNSTABLE_OFFSET_COMMIT for the group or a partition; the groups answered with another error,
    by name; each other group's partitions answered without error and with an offset)."""
    pending: set[str] = set()
    failed: dict[str, str] = {}
    committed: dict[str, set[tuple[str, int]]] = {}
    for group in groups:
        gid = group.group_id
        if group.error_code == UNSTABLE_OFFSET_COMMIT:
            pending.add(gid)
            continue
        if group.error_code:
            failed[gid] = error_name(group.error_code)
            continue
        seen: set[tuple[str, int]] = set()
        errors = []
        for topic in group.topics:
            for p in topic.partitions:
                if p.error_code == UNSTABLE_OFFSET_COMMIT:
                    pending.add(gid)
                elif p.error_code:
                    errors.append(error_name(p.error_code))
                elif p.committed_offset >= 0:
                    seen.add((topic.name, p.partition_index))
        if gid not in pending:
            if errors:
                failed[gid] = errors[0]
            else:
                committed[gid] = seen
    return pending, failed, committed


def assigned_partitions(description: Mapping[str, Any]) -> set[tuple[str, int]]:
    """The partitions assigned to a described group's members (kafka-python's describe_groups
    answer, assignments decoded when they are the consumer protocol's)."""
    found: set[tuple[str, int]] = set()
    for member in description.get("members") or ():
        assignment = member.get("member_assignment") if isinstance(member, Mapping) else None
        # kafka-python 3.0 hands it as a dict ({"assigned_partitions": [{"topic", "partitions"}]});
        # not decoded (another protocol's bytes): no partitions.
        if not isinstance(assignment, Mapping):
            continue
        for entry in assignment.get("assigned_partitions") or ():
            if isinstance(entry, Mapping):
                found.update((entry["topic"], p) for p in entry.get("partitions") or ())
    return found


# --- the source -----------------------------------------------------------------------------------


class ConsumerGroupsSource(CachedLookups):
    """Looks up the groups pending on `__consumer_offsets` partitions (see the module docstring);
    thread-safe."""

    what = "consumer groups"
    worker_threads = WORKER_THREADS

    def __init__(
        self,
        bootstrap_servers: str,
        kafka_settings: Mapping[str, str] | None = None,
        *,
        max_groups: int = MAX_GROUPS,
        max_partitions: int = MAX_PARTITIONS,
        ask: Callable[[int], OffsetsPartitionGroups] | None = None,
        **options: Unpack[LookupOptions],
    ) -> None:
        """`ask`: looks one partition up, blocking (default: the requests above; tests give their own)."""
        super().__init__(bootstrap_servers, kafka_settings, **options)
        self.max_groups = max_groups
        self.max_partitions = max_partitions
        self._ask = ask or self._pending_groups
        self._entries: dict[int, CachedEntry] = {}

    def _caches(self) -> tuple[dict[int, CachedEntry]]:
        return (self._entries,)

    def _kafka_python_admin(self) -> Any:
        return admin_client(
            self._bootstrap_servers,
            self._kafka_settings,
            client_id="txn-exporter-consumer-groups",
            request_timeout_ms=int(self.request_timeout_seconds * 1000),
            own_broker=self._own_broker,
        )

    # --- the lookup ---

    def lookup(self, partitions: Iterable[int]) -> dict[int, Fact[OffsetsPartitionGroups]]:
        """The groups pending on each of `partitions` (the first max_partitions), as cached or as
        answered within wait_seconds; never raises for Kafka's sake."""
        wanted = list(dict.fromkeys(partitions))[: self.max_partitions]
        now = self._monotonic()
        with self._lock:
            self._forget(now)
            for n in wanted:
                entry = self._entries.setdefault(n, CachedEntry())
                entry.asked = now
                if self._due(entry, now):
                    self._watch(entry, self._submit(functools.partial(self._ask, n)))
            waiting = self._first_looks(self._entries[n] for n in wanted)
        if waiting:
            wait_futures(waiting, timeout=self.wait_seconds)
        with self._lock:
            return {n: self._fact(self._entries[n]) for n in wanted}

    def _pending_groups(self, partition: int) -> OffsetsPartitionGroups:
        admin = self._client()
        result: OffsetsPartitionGroups = run(admin, self._requests, admin, partition)
        return result

    async def _requests(self, admin: Any, partition: int) -> OffsetsPartitionGroups:
        import kafka.errors as errors
        from kafka.protocol.admin import ListGroupsRequest
        from kafka.protocol.consumer import OffsetFetchRequest
        from kafka.protocol.metadata import FindCoordinatorRequest

        # 1. The topic's partition count and the partition's leader (its groups' coordinator).
        metadata = await cluster_metadata(admin, [CONSUMER_OFFSETS_TOPIC])
        topic = next((t for t in metadata["topics"] if t["name"] == CONSUMER_OFFSETS_TOPIC), None)
        if topic is None or topic["error_code"]:
            raise errors.for_code(topic["error_code"] if topic else 3)()
        leaders = {p["partition_index"]: p["leader_id"] for p in topic["partitions"]}
        leader = leaders.get(partition, -1)
        if leader < 0:
            raise errors.LeaderNotAvailableError(f"{CONSUMER_OFFSETS_TOPIC}-{partition} has no leader")
        # 2. The groups the leader coordinates, those stored on this partition.
        listed = await send(admin, ListGroupsRequest(min_version=0), leader)
        if listed.error_code:
            raise errors.for_code(listed.error_code)()
        groups = groups_of_partition((g.group_id for g in listed.groups), partition, len(leaders))
        asked, beyond = groups[: self.max_groups], len(groups) - min(len(groups), self.max_groups)
        if not asked:
            return OffsetsPartitionGroups((), 0, beyond)
        # 3. Their committed partitions, require_stable: UNSTABLE_OFFSET_COMMIT where offsets are pending.
        group_type = OffsetFetchRequest.OffsetFetchRequestGroup
        low, high = OFFSET_FETCH_VERSIONS
        fetched = await send(
            admin,
            OffsetFetchRequest(
                groups=[group_type(group_id=g, topics=None) for g in asked],
                require_stable=True,
                min_version=low,
                max_version=high,
            ),
            leader,
        )
        pending, failed, committed = read_offset_fetch(fetched.groups)
        # 4. The others' assigned partitions without a committed offset (a first transactional commit).
        rest = [g for g in asked if g in committed]
        if rest:
            described = await describe_groups(admin, rest, leader)
            uncommitted = {
                g: assigned_partitions(described.get(g) or {}) - committed[g]
                for g in rest
                if not (described.get(g) or {}).get("error")
            }
            uncommitted = {g: tps for g, tps in uncommitted.items() if tps}
            if uncommitted:
                topics_type = group_type.OffsetFetchRequestTopics
                request = OffsetFetchRequest(
                    groups=[
                        group_type(
                            group_id=g,
                            topics=[
                                topics_type(name=t, partition_indexes=sorted(p for tt, p in tps if tt == t))
                                for t in sorted({t for t, _ in tps})
                            ],
                        )
                        for g, tps in sorted(uncommitted.items())
                    ],
                    require_stable=True,
                    min_version=low,
                    max_version=high,
                )
                more_pending, more_failed, _ = read_offset_fetch((await send(admin, request, leader)).groups)
                pending |= more_pending
                failed.update(more_failed)
        # 5. Who coordinates the pending groups now.
        coordinators: dict[str, int | None] = {}
        if pending:
            try:
                found = await send(
                    admin, FindCoordinatorRequest(key_type=0, coordinator_keys=sorted(pending), min_version=4)
                )
                coordinators = {
                    c.key: (c.node_id if not c.error_code and c.node_id >= 0 else None) for c in found.coordinators
                }
            except errors.KafkaError as e:  # the groups are still named; their coordinator is not
                log.debug("consumer groups: FindCoordinator failed: %s", e)
        return OffsetsPartitionGroups(
            tuple(PendingGroup(g, coordinators.get(g)) for g in sorted(pending)),
            len(asked),
            beyond,
            tuple(sorted(failed.items())),
        )

"""The consumer-groups source (exporter.sources.consumer_groups): how it reads Kafka's answers
(OffsetFetch with require_stable, DescribeGroups' assignments, which listed groups are stored on a
partition) and its cache and time bounds, with a stand-in for the requests whose answers can be
held back. Against a real broker: tests/integration/test_consumer_groups_view.py."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace

from kafka.errors import NotCoordinatorError

from exporter.contracts.groups import OffsetsPartitionGroups, PendingGroup, offsets_partition
from exporter.sources.consumer_groups import (
    ConsumerGroupsSource,
    assigned_partitions,
    groups_of_partition,
    read_offset_fetch,
)


def partition(index: int, offset: int = 5, error: int = 0) -> SimpleNamespace:
    return SimpleNamespace(partition_index=index, committed_offset=offset, error_code=error)


def group(gid: str, error: int = 0, **topics: list[SimpleNamespace]) -> SimpleNamespace:
    return SimpleNamespace(
        group_id=gid, error_code=error, topics=[SimpleNamespace(name=t, partitions=ps) for t, ps in topics.items()]
    )


def test_unstable_offset_commit_marks_a_group_pending():
    pending, failed, committed = read_offset_fetch(
        [
            group("txn", orders=[partition(0), partition(1, -1, 88)]),  # a partition's pending offsets
            group("plain", orders=[partition(0), partition(1, -1)]),  # -1: no offset committed there
            group("whole", error=88),  # a group-level answer
            group("moved", error=16),
            group("odd", orders=[partition(0, -1, 14)]),
            group("empty"),
        ]
    )
    assert pending == {"txn", "whole"}
    assert failed == {"moved": "NOT_COORDINATOR", "odd": "COORDINATOR_LOAD_IN_PROGRESS"}
    assert committed == {"plain": {("orders", 0)}, "empty": set()}


def test_the_groups_of_a_partition_are_those_that_hash_to_it():
    names = [f"group-{n}" for n in range(200)]
    kept = groups_of_partition([*names, "group-1"], 7, 50)
    assert kept == sorted(g for g in set(names) if offsets_partition(g, 50) == 7) and kept
    assert groups_of_partition(names, 0, 1) == sorted(names)


def test_assigned_partitions_of_a_described_group():
    # As kafka-python 3.0's describe_groups hands it (seen from a librdkafka member on 4.4.0).
    assignment = {
        "assigned_partitions": [{"topic": "in", "partitions": [0, 2]}, {"topic": "other", "partitions": [1]}],
        "user_data": "",
    }
    described = {"members": [{"member_assignment": assignment}, {"member_assignment": b"not decoded"}]}
    assert assigned_partitions(described) == {("in", 0), ("in", 2), ("other", 1)}
    assert assigned_partitions({"members": []}) == set() and assigned_partitions({}) == set()


class Asker:
    """Stands for the requests: answers per partition; `gate` cleared holds every answer back."""

    def __init__(self) -> None:
        self.gate = threading.Event()
        self.gate.set()
        self.asked: list[int] = []
        self.answer: object = OffsetsPartitionGroups((PendingGroup("txn", 1),), 2)

    def __call__(self, n: int) -> OffsetsPartitionGroups:
        self.asked.append(n)
        assert self.gate.wait(10)
        if isinstance(self.answer, Exception):
            raise self.answer
        assert isinstance(self.answer, OffsetsPartitionGroups)
        return self.answer


def test_answers_are_cached_and_refreshed_in_the_background():
    asker, now = Asker(), [100.0]
    source = ConsumerGroupsSource("unused:9092", ask=asker, monotonic=lambda: now[0], wait_seconds=2)
    first = source.lookup([3, 3, 4])
    assert set(first) == {3, 4} and first[3].value == asker.answer and first[3].problem is None
    assert sorted(asker.asked) == [3, 4]
    source.lookup([3])
    assert len(asker.asked) == 2  # cached
    now[0] += 5.0
    asker.gate.clear()
    stale = source.lookup([3])  # due: refreshed in the background, the last answer shown meanwhile
    assert stale[3].value == asker.answer
    asker.gate.set()
    deadline = time.monotonic() + 5
    while len(asker.asked) < 3:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    source.close()


def test_a_first_look_waits_a_bounded_time_and_errors_are_unknown():
    asker = Asker()
    asker.gate.clear()
    source = ConsumerGroupsSource("unused:9092", ask=asker, wait_seconds=0.2)
    started = time.monotonic()
    fact = source.lookup([0])[0]
    assert time.monotonic() - started < 2
    assert fact.value is None and fact.problem == "no answer within 0.2 s"
    assert source.lookup([0])[0].problem == "no answer within 0.2 s"  # one request at a time
    assert asker.asked == [0]
    asker.answer = NotCoordinatorError()
    asker.gate.set()
    deadline = time.monotonic() + 5
    while (fact := source.lookup([0])[0]).problem == "no answer within 0.2 s":
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert fact.value is None and fact.problem == "NOT_COORDINATOR"
    source.close()


def test_an_answer_settles_as_it_comes_so_one_no_view_reads_again_is_forgotten():
    """Partition 3's first look got no answer in time and no view reads it again: its answer settles
    all the same (CachedLookups._watch), so once unasked for ten minutes it is dropped and the next
    view asks afresh (an entry settled only when read again was never dropped)."""
    asker, now = Asker(), [100.0]
    asker.gate.clear()
    source = ConsumerGroupsSource("unused:9092", ask=asker, monotonic=lambda: now[0], wait_seconds=0)
    assert source.lookup([3])[3].problem == "no answer within 0 s"
    asker.gate.set()
    deadline = time.monotonic() + 5
    while source._entries[3].pending is not None:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert source._entries[3].value == asker.answer
    now[0] += 601
    source.lookup([4])
    source.lookup([3])
    deadline = time.monotonic() + 5
    while sorted(asker.asked) != [3, 3, 4]:  # the workers ask in the background
        assert time.monotonic() < deadline, asker.asked
        time.sleep(0.01)
    source.close()


def test_only_so_many_partitions_a_view():
    asker = Asker()
    source = ConsumerGroupsSource("unused:9092", ask=asker, max_partitions=2, wait_seconds=2)
    assert set(source.lookup([5, 6, 7])) == {5, 6}
    source.close()

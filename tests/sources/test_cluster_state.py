"""The cluster-state source's cache and time bounds (exporter.sources.cluster_state), with a stand-in
for kafka-python's admin client whose answers can be held back. Against real brokers, the source is
exercised by tests/integration/test_diagnosis.py (a stopped broker, a hold, a moved leader)."""

from __future__ import annotations

import asyncio
import threading
import time
from types import SimpleNamespace

import pytest
from kafka import TopicPartition
from kafka.errors import NotLeaderForPartitionError

from exporter.contracts.cluster import BROKER, TOPIC, MinInsyncReplicas, PartitionMetadata
from exporter.sources.cluster_state import ClusterStateSource


class FakeAdmin:
    """Answers like KafkaAdminClient; `gate` cleared: every call waits until it is set again."""

    def __init__(self) -> None:
        self.gate = threading.Event()
        self.gate.set()
        self.calls: list[tuple[str, object]] = []
        self.isr = (2, 3)
        self.failing_partitions: set[tuple[str, int]] = set()
        self.lock = threading.Lock()

    def _call(self, name: str, arg: object) -> None:
        with self.lock:
            self.calls.append((name, arg))
        assert self.gate.wait(10)

    def count(self, name: str) -> int:
        with self.lock:
            return sum(1 for n, _ in self.calls if n == name)

    async def _get_cluster_metadata(self, topics):  # what describe_topics sends; the brokers come with it
        return {"brokers": [{"node_id": n} for n in (1, 2)], "topics": self.describe_topics(topics)}

    @property
    def _manager(self):  # runs the adapter's coroutines (kafka_python_adapter.run), each on a loop of its own
        return SimpleNamespace(run=lambda call, *args: asyncio.run(call(*args)))

    def describe_topics(self, topics):
        self._call("describe_topics", tuple(topics))
        return [
            {"name": t, "error_code": 3, "partitions": []}
            if t == "missing"
            else {
                "name": t,
                "error_code": 0,
                "partitions": [
                    {"partition_index": 0, "leader_id": 2, "replica_nodes": [2, 3], "isr_nodes": list(self.isr)},
                    {"partition_index": 1, "leader_id": -1, "replica_nodes": [3], "isr_nodes": [3]},
                ],
            }
            for t in topics
        ]

    def describe_cluster(self):
        self._call("describe_cluster", None)
        return {"brokers": [{"broker_id": 1}, {"broker_id": 2}, {"broker_id": 3, "is_fenced": True}]}

    def describe_configs(self, resources, config_filter):
        self._call("describe_configs", tuple(r.name for r in resources))
        assert config_filter == "all" and all(list(r.configs) == ["min.insync.replicas"] for r in resources)
        source = {"orders": "DYNAMIC_TOPIC_CONFIG"}
        return {
            "topic": {
                r.name: {
                    "min.insync.replicas": {"value": "2", "config_source": source.get(r.name, "STATIC_BROKER_CONFIG")}
                }
                for r in resources
                if r.name != "missing"
            }
        }

    def describe_producers(self, partitions, broker_id=None):
        self._call("describe_producers", (tuple(partitions), broker_id))
        if set(map(tuple, partitions)) & self.failing_partitions:
            raise NotLeaderForPartitionError("not the leader")
        producer = SimpleNamespace(
            producer_id=7,
            producer_epoch=1,
            last_sequence=3,
            last_timestamp=1000,
            coordinator_epoch=0,
            current_transaction_start_offset=42,
        )
        return {TopicPartition(t, p): SimpleNamespace(active_producers=[producer]) for t, p in partitions}

    def close(self) -> None:
        pass


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def admin():
    admin = FakeAdmin()
    yield admin
    admin.gate.set()


def eventually(condition, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.005)


def source(admin: FakeAdmin, **kwargs) -> ClusterStateSource:
    kwargs.setdefault("wait_seconds", 2.0)
    return ClusterStateSource("kafka:9092", admin=lambda: admin, clock=lambda: 1_800_000_000.0, **kwargs)


def test_a_first_look_answers_everything_asked(admin):
    src = source(admin)
    snap = src.lookup(["orders", "missing", "other"], [("orders", 0)])
    assert snap.brokers.value.live == {1, 2} and snap.brokers.value.fenced == {3}
    assert snap.partition("orders", 0).value == PartitionMetadata(2, (2, 3), (2, 3))
    assert snap.partition("orders", 1).value == PartitionMetadata(None, (3,), (3,))
    assert snap.partition("orders", 9).problem == "UNKNOWN_TOPIC_OR_PARTITION"
    assert snap.partition("missing", 0).problem == "UNKNOWN_TOPIC_OR_PARTITION"
    assert snap.min_insync_replicas["orders"].value == MinInsyncReplicas(2, TOPIC)
    assert snap.min_insync_replicas["other"].value == MinInsyncReplicas(2, BROKER)
    assert snap.min_insync_replicas["missing"].value is None
    (producer,) = snap.producers[("orders", 0)].value
    assert (producer.producer_id, producer.last_timestamp_ms, producer.transaction_start_offset) == (7, 1000, 42)
    # One request of each kind for all the topics, DescribeProducers to the leader the metadata names.
    assert admin.count("describe_topics") == admin.count("describe_configs") == admin.count("describe_cluster") == 1
    assert ("describe_producers", ((TopicPartition("orders", 0),), 2)) in admin.calls
    assert snap.partition("orders", 0).as_of_ms == 1_800_000_000_000
    src.close()


def test_cached_for_cache_seconds_then_refreshed_while_the_old_value_shows(admin):
    clock = Clock()
    src = source(admin, monotonic=clock, cache_seconds=5.0)
    src.lookup(["orders"])
    clock.now += 4.9
    src.lookup(["orders"])
    assert admin.count("describe_topics") == 1  # cached
    clock.now += 0.2
    admin.isr = (2,)
    admin.gate.clear()  # the refresh hangs: the lookup answers at once with the cached value
    started = time.monotonic()
    snap = src.lookup(["orders"])
    assert time.monotonic() - started < 0.5
    assert snap.partition("orders", 0).value.isr == (2, 3)
    eventually(lambda: admin.count("describe_topics") == 2)
    clock.now += 10
    src.lookup(["orders"])
    time.sleep(0.1)
    assert admin.count("describe_topics") == 2  # one refresh at a time per key: none queued behind it
    admin.gate.set()
    eventually(lambda: src.lookup(["orders"]).partition("orders", 0).value.isr == (2,))
    src.close()


def test_a_first_look_that_gets_no_answer_is_unknown_after_the_wait(admin):
    admin.gate.clear()
    src = source(admin, wait_seconds=0.2)
    started = time.monotonic()
    snap = src.lookup(["orders"], [("orders", 0)])
    took = time.monotonic() - started
    assert 0.15 < took < 0.6, took
    assert snap.partition("orders", 0).value is None
    assert snap.partition("orders", 0).problem == "no answer within 0.2 s"
    assert snap.min_insync_replicas["orders"].problem == "no answer within 0.2 s"
    assert snap.brokers.problem == "no answer within 0.2 s"
    assert snap.producers[("orders", 0)].problem == "no answer within 0.2 s"
    admin.gate.set()
    eventually(lambda: src.lookup(["orders"]).partition("orders", 0).value is not None)  # the request filled it
    src.close()


def test_errors_are_facts_with_their_name_and_retried_soon(admin):
    clock = Clock()
    src = source(admin, monotonic=clock)
    admin.failing_partitions = {("orders", 1)}
    snap = src.lookup(["orders"], [("orders", 0), ("orders", 1)])
    # One request per leader; kafka-python fails the whole request for one partition, so one each then.
    assert snap.producers[("orders", 0)].value is not None
    assert snap.producers[("orders", 1)].problem == "NOT_LEADER_OR_FOLLOWER"
    asked = admin.count("describe_producers")
    clock.now += 0.5
    src.lookup(["orders"], [("orders", 1)])
    time.sleep(0.1)
    assert admin.count("describe_producers") == asked
    clock.now += 0.6  # a failed lookup is retried after a second, not after cache_seconds
    src.lookup(["orders"], [("orders", 1)])
    eventually(lambda: admin.count("describe_producers") == asked + 1)
    src.close()


def test_a_client_that_cannot_be_created_degrades_to_unknown():
    def broken():
        raise OSError("no route to host")

    src = ClusterStateSource("kafka:9092", admin=broken, wait_seconds=1.0)
    snap = src.lookup(["orders"], [("orders", 0)])
    assert snap.partition("orders", 0).problem == "OSError: no route to host"
    assert snap.producers[("orders", 0)].problem == "OSError: no route to host"
    src.close()


def test_at_most_max_producer_partitions_per_lookup(admin):
    src = source(admin, max_producer_partitions=3)
    snap = src.lookup(["orders"], [("orders", n) for n in range(10)])
    assert sorted(snap.producers) == [("orders", 0), ("orders", 1), ("orders", 2)]
    src.close()


def test_start_connects_in_the_background_once(admin):
    made = []

    def factory():
        made.append(1)
        return admin

    src = ClusterStateSource("kafka:9092", admin=factory, wait_seconds=2.0)
    src.start()
    eventually(lambda: made == [1])
    src.lookup(["orders"])
    assert made == [1]
    src.close()


def test_brokers_come_with_the_metadata_when_describe_cluster_fails(admin):
    """kafka-python 3.0's describe_cluster raises KeyError('endpoint_type') on a 3.6 broker's
    DescribeCluster v0: the live brokers are the metadata's, none told fenced."""

    def broken():
        raise KeyError("endpoint_type")

    admin.describe_cluster = broken
    src = source(admin)
    snap = src.lookup(["orders"])
    assert snap.brokers.value.live == {1, 2} and snap.brokers.value.fenced == frozenset()
    assert snap.partition("orders", 0).value is not None
    src.close()


def test_close_does_not_wait_for_a_client_still_connecting():
    connecting = threading.Event()
    release = threading.Event()

    def slow():
        connecting.set()
        assert release.wait(10)
        return FakeAdmin()

    src = ClusterStateSource("kafka:9092", admin=slow)
    src.start()
    assert connecting.wait(5)
    started = time.monotonic()
    src.close()
    assert time.monotonic() - started < 0.5
    release.set()


def test_answers_no_view_asked_for_in_ten_minutes_are_dropped(admin):
    """Seen from the view: a dropped answer is looked up afresh, a first look that waits (and, the
    requests held, is unknown after the wait), where one still cached shows at once."""
    clock = Clock()
    src = source(admin, monotonic=clock, wait_seconds=0.2)
    src.lookup(["old"], [("old", 0)])
    clock.now += 300
    src.lookup(["kept"])
    clock.now += 301  # "old" unasked for 601 s, "kept" for 301 s
    src.lookup(["other"])
    admin.gate.clear()  # no request answers from here: what shows is what the cache holds
    snap = src.lookup(["old", "kept", "other"], [("old", 0)])
    for topic in ("kept", "other"):
        assert snap.partition(topic, 0).value is not None and snap.min_insync_replicas[topic].value is not None
    assert snap.partition("old", 0).value is None and snap.partition("old", 0).problem == "no answer within 0.2 s"
    assert snap.min_insync_replicas["old"].problem == "no answer within 0.2 s"
    assert snap.producers[("old", 0)].problem == "no answer within 0.2 s"
    src.close()

"""kafka-python's private parts that the exporter's lookups reach into, and the routing of its admin's
requests (exporter.sources.kafka_admin), without brokers.

kafka-python keeps no promise about its underscored names, nor about the layout of its protocol
modules: a release that renames one would fail at the first lookup against a real cluster. Each
name is checked on its own here, so a failure names what moved."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any
from unittest import mock

import kafka.errors as errors
import pytest
from kafka import KafkaAdminClient
from kafka.net.manager import KafkaConnectionManager

from exporter.sources.kafka_admin import STALLED_SECONDS, _RoutedManager, route


@pytest.fixture(scope="module")
def admin() -> Iterator[Any]:
    """A real KafkaAdminClient whose bootstrap is skipped: no broker is needed to see its attributes."""
    with mock.patch.object(KafkaConnectionManager, "bootstrap", lambda self, *args, **kwargs: None):
        client = KafkaAdminClient(bootstrap_servers=["127.0.0.1:9"])
    yield client
    client.close()


# (attribute, where the exporter uses it, the parameters the exporter passes, a coroutine function?)
ADMIN_METHODS = [
    ("_get_cluster_metadata", "cluster_state._metadata, consumer_groups._requests", ("topics",), True),
    ("_async_describe_groups", "consumer_groups._requests", ("group_ids", "group_coordinator_id"), True),
]
MANAGER_METHODS = [
    ("run", "cluster_state._metadata, consumer_groups._pending_groups", ("coro",)),
    (
        "send",
        "kafka_admin._RoutedManager.send, consumer_groups._requests",
        ("request", "node_id", "request_timeout_ms"),
    ),
    ("wait_for", "kafka_admin._RoutedManager.send", ("future", "timeout_ms")),
]


def test_the_admin_keeps_its_connection_manager_as_manager(admin) -> None:
    # kafka_admin.route replaces it; cluster_state and consumer_groups run their requests on it.
    assert isinstance(getattr(admin, "_manager", None), KafkaConnectionManager), (
        "KafkaAdminClient has no `_manager` (a KafkaConnectionManager): used by kafka_admin.route, "
        "cluster_state and consumer_groups"
    )


@pytest.mark.parametrize(
    ("name", "used_by", "parameters", "coroutine"), ADMIN_METHODS, ids=[m[0] for m in ADMIN_METHODS]
)
def test_the_admins_private_methods_are_there(admin, name, used_by, parameters, coroutine) -> None:
    method = getattr(admin, name, None)
    assert method is not None, f"KafkaAdminClient has no `{name}` (used by exporter.sources.{used_by})"
    assert inspect.iscoroutinefunction(method) == coroutine, f"KafkaAdminClient.{name} is no longer a coroutine"
    missing = [p for p in parameters if p not in inspect.signature(method).parameters]
    assert not missing, f"KafkaAdminClient.{name} has no parameter(s) {missing} (used by exporter.sources.{used_by})"


@pytest.mark.parametrize(("name", "used_by", "parameters"), MANAGER_METHODS, ids=[m[0] for m in MANAGER_METHODS])
def test_the_connection_managers_methods_are_there(admin, name, used_by, parameters) -> None:
    method = getattr(admin._manager, name, None)
    assert method is not None, f"KafkaConnectionManager has no `{name}` (used by exporter.sources.{used_by})"
    missing = [p for p in parameters if p not in inspect.signature(method).parameters]
    assert not missing, f"KafkaConnectionManager.{name} has no parameter(s) {missing} (used by {used_by})"


def test_the_cluster_metadata_lists_brokers_and_caches_coordinators_by_type_and_key(admin) -> None:
    cluster = getattr(admin._manager, "cluster", None)
    assert cluster is not None, "KafkaConnectionManager has no `cluster` (used by kafka_admin._RoutedManager)"
    assert callable(getattr(cluster, "brokers", None)), "ClusterMetadata has no `brokers()` (kafka_admin)"
    # hanging_scan._forget_coordinators drops an id's entry, keyed (CoordinatorType, key), each round.
    assert isinstance(getattr(cluster, "_coordinators", None), dict), (
        "ClusterMetadata has no `_coordinators` dict (used by hanging_scan._forget_coordinators)"
    )
    from kafka.protocol.metadata import CoordinatorType

    assert hasattr(CoordinatorType, "TRANSACTION"), "kafka.protocol.metadata.CoordinatorType has no TRANSACTION"


@pytest.mark.parametrize(
    ("module", "name", "nested"),
    [
        ("kafka.protocol.admin", "ListGroupsRequest", ()),
        ("kafka.protocol.consumer", "OffsetFetchRequest", ("OffsetFetchRequestGroup", "OffsetFetchRequestTopics")),
        ("kafka.protocol.metadata", "FindCoordinatorRequest", ()),
    ],
)
def test_the_protocol_requests_consumer_groups_sends_are_where_it_imports_them(module, name, nested) -> None:
    import importlib

    request = getattr(importlib.import_module(module), name, None)
    assert request is not None, f"{module} has no `{name}` (used by exporter.sources.consumer_groups)"
    inner = request
    for part in nested:
        inner = getattr(inner, part, None)
        assert inner is not None, f"{module}.{name} has no `{part}` (used by exporter.sources.consumer_groups)"


def test_route_puts_the_routing_manager_in_the_admins_place(admin) -> None:
    manager = admin._manager
    try:
        assert route(admin, lambda: 1, 500) is admin
        assert isinstance(admin._manager, _RoutedManager)
        assert admin._manager.cluster is manager.cluster  # everything else is the manager's
    finally:
        admin._manager = manager


# --- the routing, with a stand-in for the connection manager ---


class FakeManager:
    """Answers as KafkaConnectionManager: `failures` by node id raise instead of answering."""

    def __init__(self, nodes: list[int], failures: dict[int, Exception] | None = None) -> None:
        self.cluster = SimpleNamespace(brokers=lambda: [SimpleNamespace(node_id=n) for n in nodes])
        self.failures = failures or {}
        self.sent: list[int | None] = []

    def send(self, request: Any, node_id: int | None = None, request_timeout_ms: int | None = None) -> Any:
        self.sent.append(node_id)
        return self.failures.get(node_id) if node_id in self.failures else f"{request} from {node_id}"

    async def wait_for(self, future: Any, timeout_ms: int) -> Any:
        if isinstance(future, Exception):
            raise future
        return future


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def routed(manager: FakeManager, own: int | None = None, clock: Clock | None = None) -> _RoutedManager:
    return _RoutedManager(manager, lambda: own, 1000, clock or Clock())


def test_the_own_broker_is_asked_first_then_the_others() -> None:
    for _ in range(20):  # the others are shuffled
        candidates = routed(FakeManager([1, 2, 3, 4]), own=3).candidates()
        assert candidates[0] == 3 and sorted(candidates) == [1, 2, 3, 4]


def test_an_own_broker_unknown_or_not_in_the_metadata_changes_nothing() -> None:
    assert sorted(routed(FakeManager([1, 2]), own=None).candidates()) == [1, 2]
    assert sorted(routed(FakeManager([1, 2]), own=7).candidates()) == [1, 2]
    assert routed(FakeManager([])).candidates() == []


def test_a_stalled_broker_is_asked_last_until_its_time_is_up() -> None:
    clock = Clock()
    manager = routed(FakeManager([1, 2, 3]), own=1, clock=clock)
    manager._stalled = {1: clock.now + 10, 2: clock.now + 5}
    assert manager.candidates() == [3, 2, 1]  # the stalled last, the one stalled longest very last
    clock.now += 5
    assert manager.candidates()[:2] in ([2, 3], [3, 2]) and manager.candidates()[2] == 1
    clock.now += 5
    assert manager.candidates()[0] == 1 and not manager._stalled


def test_a_timeout_stalls_the_broker_and_the_next_one_answers() -> None:
    clock = Clock()
    fake = FakeManager([1, 2], {1: errors.KafkaTimeoutError("late")})
    manager = routed(fake, own=1, clock=clock)
    assert asyncio.run(manager.send("metadata")) == "metadata from 2"
    assert fake.sent == [1, 2]
    assert manager._stalled == {1: clock.now + STALLED_SECONDS}
    assert manager.candidates() == [2, 1]


def test_a_broker_down_is_passed_over_without_being_stalled() -> None:
    fake = FakeManager([1, 2], {1: errors.NodeNotReadyError(1)})
    manager = routed(fake, own=1)
    assert asyncio.run(manager.send("metadata")) == "metadata from 2"
    assert not manager._stalled


def test_when_none_answers_the_last_failure_is_raised() -> None:
    fake = FakeManager([1, 2], {1: errors.RequestTimedOutError(), 2: errors.KafkaConnectionError("gone")})
    with pytest.raises(errors.KafkaConnectionError):
        asyncio.run(routed(fake, own=1).send("metadata"))
    assert fake.sent == [1, 2]


def test_a_request_that_names_its_broker_goes_there_alone() -> None:
    fake = FakeManager([1, 2, 3], {2: errors.KafkaTimeoutError("late")})
    manager = routed(fake, own=1)
    with pytest.raises(errors.KafkaTimeoutError):
        asyncio.run(manager.send("producers", node_id=2))
    assert fake.sent == [2]


def test_without_metadata_kafka_python_chooses() -> None:
    fake = FakeManager([])
    assert asyncio.run(routed(fake).send("metadata")) == "metadata from None"
    assert fake.sent == [None]

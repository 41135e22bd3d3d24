"""The kafka-python adapter (exporter.sources.kafka_python_adapter): each private part of kafka-python it
uses is there at the pinned version, checked name by name so a failure names what moved (without a
broker); its requests against real brokers, answered as Kafka's own tool and records say.

kafka-python keeps no promise about its underscored names, nor about the layout of its protocol
modules: a release that renames one would fail at the first lookup against a real cluster."""

from __future__ import annotations

import inspect
import re
from collections.abc import Iterator
from typing import Any
from unittest import mock

import pytest
from kafka import KafkaAdminClient
from kafka.net.manager import KafkaConnectionManager

from exporter.sources.kafka_admin import admin_client
from exporter.sources.kafka_python_adapter import (
    api_versions,
    send_through,
)
from tests.test_lock import ADAPTER, reached_private_names

TIMEOUT_MS = 10_000


@pytest.fixture(scope="module")
def admin() -> Iterator[Any]:
    """A real KafkaAdminClient whose bootstrap is skipped: no broker is needed to see its attributes."""
    with mock.patch.object(KafkaConnectionManager, "bootstrap", lambda self, *args, **kwargs: None):
        client = KafkaAdminClient(bootstrap_servers=["127.0.0.1:9"])
    yield client
    client.close()


# --- kafka-python's private parts, at the pinned version ---

# (attribute, the parameters the adapter passes)
ADMIN_COROUTINES = [
    ("_get_cluster_metadata", ("topics",)),
    ("_async_describe_groups", ("group_ids", "group_coordinator_id")),
]
MANAGER_METHODS = [
    ("run", ("coro",)),
    ("send", ("request", "node_id", "request_timeout_ms")),
    ("wait_for", ("future", "timeout_ms")),
]
CHECKED = {"_manager", "_coordinators", *(name for name, _ in ADMIN_COROUTINES)}


def test_every_private_name_the_adapter_reads_is_checked_here() -> None:
    assert reached_private_names(ADAPTER)[0] == CHECKED


def test_the_admin_keeps_its_connection_manager_as_manager(admin) -> None:
    assert isinstance(getattr(admin, "_manager", None), KafkaConnectionManager), (
        "KafkaAdminClient has no `_manager` (a KafkaConnectionManager)"
    )


@pytest.mark.parametrize(("name", "parameters"), ADMIN_COROUTINES, ids=[m[0] for m in ADMIN_COROUTINES])
def test_the_admins_private_coroutines_are_there(admin, name, parameters) -> None:
    method = getattr(admin, name, None)
    assert method is not None, f"KafkaAdminClient has no `{name}`"
    assert inspect.iscoroutinefunction(method), f"KafkaAdminClient.{name} is no longer a coroutine"
    missing = [p for p in parameters if p not in inspect.signature(method).parameters]
    assert not missing, f"KafkaAdminClient.{name} has no parameter(s) {missing}"


@pytest.mark.parametrize(("name", "parameters"), MANAGER_METHODS, ids=[m[0] for m in MANAGER_METHODS])
def test_the_connection_managers_methods_are_there(admin, name, parameters) -> None:
    method = getattr(admin._manager, name, None)
    assert method is not None, f"KafkaConnectionManager has no `{name}`"
    missing = [p for p in parameters if p not in inspect.signature(method).parameters]
    assert not missing, f"KafkaConnectionManager.{name} has no parameter(s) {missing}"


def test_the_connection_managers_settings_name_the_client_and_its_timeout(admin) -> None:
    config = getattr(admin._manager, "config", None)
    assert isinstance(config, dict), "KafkaConnectionManager has no `config` dict"
    assert {"client_software_name", "client_software_version", "request_timeout_ms"} <= set(config)


def test_the_cluster_metadata_lists_brokers_and_caches_coordinators_by_type_and_key(admin) -> None:
    cluster = getattr(admin._manager, "cluster", None)
    assert cluster is not None, "KafkaConnectionManager has no `cluster`"
    assert callable(getattr(cluster, "brokers", None)), "ClusterMetadata has no `brokers()`"
    assert isinstance(getattr(cluster, "_coordinators", None), dict), "ClusterMetadata has no `_coordinators` dict"
    from kafka.protocol.metadata import CoordinatorType

    assert hasattr(CoordinatorType, "TRANSACTION"), "kafka.protocol.metadata.CoordinatorType has no TRANSACTION"


@pytest.mark.parametrize(
    ("module", "name", "nested"),
    [
        ("kafka.protocol.admin", "ListGroupsRequest", ()),
        ("kafka.protocol.consumer", "OffsetFetchRequest", ("OffsetFetchRequestGroup", "OffsetFetchRequestTopics")),
        ("kafka.protocol.metadata", "FindCoordinatorRequest", ()),
        ("kafka.protocol.metadata", "ApiVersionsRequest", ()),
    ],
)
def test_the_protocol_requests_are_where_they_are_imported_from(module, name, nested) -> None:
    import importlib

    request = getattr(importlib.import_module(module), name, None)
    assert request is not None, f"{module} has no `{name}`"
    inner = request
    for part in nested:
        inner = getattr(inner, part, None)
        assert inner is not None, f"{module}.{name} has no `{part}`"


def test_send_through_puts_a_stand_in_in_the_managers_place(admin) -> None:
    manager = admin._manager
    try:
        assert send_through(admin, lambda *args: None) is admin
        assert admin._manager is not manager and admin._manager.cluster is manager.cluster  # the rest is the manager's
    finally:
        admin._manager = manager


# --- against real brokers ---

_API_LINE = re.compile(r"\((\d+)\): (\d+)(?: to (\d+))?")


def tools_api_versions(broker) -> dict[int, tuple[int, int]]:
    """The broker's ApiVersions as kafka-broker-api-versions.sh (Kafka's own client) prints them, one
    API a line: `Produce(0): 3 to 12 [usable: 12]`, `UNKNOWN(92): 0`, `...: UNSUPPORTED` (not listed)."""
    proc = broker.run_tool(broker.kafka.broker_api_versions_class, "--bootstrap-server", broker.bootstrap_servers)
    assert proc.returncode == 0, proc.stderr[-2000:]
    found = {}
    for line in proc.stdout.splitlines():
        if match := _API_LINE.search(line):
            key, low, high = match[1], match[2], match[3] or match[2]
            found[int(key)] = (int(low), int(high))
    return found


@pytest.mark.parametrize("routed", [True, False], ids=["routed", "plain"])
def test_api_versions_are_the_brokers_answer_as_kafkas_own_tool_reads_it(broker, routed) -> None:
    if routed:  # as the exporter makes it
        admin = admin_client(broker.bootstrap_servers, {}, request_timeout_ms=TIMEOUT_MS, own_broker=lambda: None)
    else:
        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers, request_timeout_ms=TIMEOUT_MS)
    try:
        answered = api_versions(admin, broker.node_id, TIMEOUT_MS)
    finally:
        admin.close()
    assert answered == tools_api_versions(broker)
    assert 23 in answered and answered[18][0] == 0  # OffsetsForLeaderEpoch; ApiVersions from v0

"""kafka-python where the exporter goes past its public API, each use a named function here and
nowhere else: the admin client's connection manager (`admin._manager`, kafka.net.manager's, which
kafka-python documents nowhere) and its private coroutines, its coordinator cache, and the requests
its admin has no call for (OffsetsForLeaderEpoch, ApiVersions of one broker, a ListGroups or an
OffsetFetch to a given broker). kafka-python promises nothing about these, so it is pinned exactly
(pyproject.toml; tests/test_lock.py holds this module to be the only one using them) and
tests/sources/test_kafka_python_adapter.py checks each name this module uses at the pinned version.

The admin's blocking calls and `run` block their thread; the coroutines here run on the admin's
event loop (`run`). Answers are in Kafka's terms: its error names as Kafka 4.x spells them
(`error_name`), where kafka-python's errors carry some older ones (NOT_LEADER_FOR_PARTITION).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from exporter.broker_log.errors import ERRORS

# What an admin's requests are sent with, once `send_through` it: (connections, request, node id or
# None for any, timeout in ms or None for the admin's) -> the response.
Sender = Callable[[Any, Any, "int | None", "int | None"], Awaitable[Any]]

_ERROR_NAMES = {code: name for code, name, _ in ERRORS}


def known_error_name(code: int) -> str | None:
    """A Kafka error code's name as Kafka 4.x spells it, None for a code it does not name."""
    return _ERROR_NAMES.get(code)


def error_name(code: int) -> str:
    """A Kafka error code's name ("error N" for one Kafka does not name)."""
    return known_error_name(code) or f"error {code}"


# --- running and sending on the admin's connection manager ---


def run(admin: Any, coroutine_function: Callable[..., Awaitable[Any]], *args: Any) -> Any:
    """`coroutine_function(*args)` run on the admin's event loop; blocks until its result."""
    return admin._manager.run(coroutine_function, *args)


async def send(admin: Any, request: Any, node_id: int | None = None, timeout_ms: int | None = None) -> Any:
    """`request`'s response from broker `node_id` (None: the admin's choice, or its router's), bounded by
    `timeout_ms` (None: the admin's request timeout), a request still waiting for its connection too."""
    manager = admin._manager
    if isinstance(manager, _Routed):
        return await manager.send(request, node_id, timeout_ms)
    return await send_to(manager, request, node_id, timeout_ms or manager.config["request_timeout_ms"])


def send_through(admin: Any, sender: Sender) -> Any:
    """Has every request of `admin` (its own methods' and this module's) sent by `sender`; returns it."""
    admin._manager = _Routed(admin._manager, sender)
    return admin


class _Routed:
    """Stands for the admin's connection manager, whose methods the admin's own all send through
    `send`; everything else is the manager's."""

    def __init__(self, connections: Any, sender: Sender) -> None:
        self._connections = connections
        self._sender = sender

    def __getattr__(self, name: str) -> Any:
        return getattr(self._connections, name)

    async def send(self, request: Any, node_id: int | None = None, request_timeout_ms: int | None = None) -> Any:
        return await self._sender(self._connections, request, node_id, request_timeout_ms)


def broker_ids(connections: Any) -> list[int]:
    """The brokers of the connection manager's metadata (empty before its first)."""
    return [broker.node_id for broker in connections.cluster.brokers()]


async def send_to(connections: Any, request: Any, node_id: int | None, timeout_ms: int) -> Any:
    """`request` sent by the connection manager to `node_id` (None: kafka-python's "least loaded"
    broker); KafkaTimeoutError after `timeout_ms`, a request still waiting for its connection too."""
    return await connections.wait_for(
        connections.send(request, node_id=node_id, request_timeout_ms=timeout_ms), timeout_ms
    )


# --- the admin's private coroutines and caches ---


async def cluster_metadata(admin: Any, topics: Iterable[str]) -> dict[str, Any]:
    """One Metadata request for `topics`, as kafka-python's describe_topics sends it, whole:
    {"brokers": [{"node_id", ...}], "topics": [{"name", "error_code", "partitions": [...]}], ...}."""
    metadata: dict[str, Any] = await admin._get_cluster_metadata(list(topics))
    return metadata


async def describe_groups(admin: Any, group_ids: list[str], coordinator: int) -> dict[str, Any]:
    """DescribeGroups of `group_ids` sent to their `coordinator`, by group id (kafka-python's
    describe_groups answer, members' assignments decoded when they are the consumer protocol's)."""
    described: dict[str, Any] = await admin._async_describe_groups(group_ids, group_coordinator_id=coordinator)
    return described


def forget_transaction_coordinators(admin: Any, transactional_ids: Iterable[str]) -> None:
    """Drops the transactional ids' cached coordinators, so they are looked up afresh: kafka-python
    (3.0) caches each id's coordinator for good, never dropped on NOT_COORDINATOR."""
    from kafka.protocol.metadata import CoordinatorType

    cached = admin._manager.cluster._coordinators
    for transactional_id in transactional_ids:
        cached.pop((CoordinatorType.TRANSACTION, transactional_id), None)


# --- requests the admin has no call for ---


def api_versions(admin: Any, node_id: int, timeout_ms: int) -> dict[int, tuple[int, int]]:
    """Broker `node_id`'s ApiVersions answer: API key -> (min version, max version). Blocks; raises
    kafka-python's error when the request fails (KafkaTimeoutError after `timeout_ms`)."""
    import kafka.errors as errors
    from kafka.protocol.metadata import ApiVersionsRequest

    config = admin._manager.config
    request = ApiVersionsRequest(
        client_software_name=config["client_software_name"],
        client_software_version=config["client_software_version"],
    )
    response = run(admin, send, admin, request, node_id, timeout_ms)
    if response.error_code:
        raise errors.for_code(response.error_code)()
    return {key.api_key: (key.min_version, key.max_version) for key in response.api_keys}

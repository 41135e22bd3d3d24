"""The exporter's kafka-python admin clients (the cluster state's, exporter.sources.cluster_state, the
consumer groups', exporter.sources.consumer_groups, and the hanging scan's,
exporter.sources.hanging_scan), all made here (`admin_client`): their arguments from the exporter's
settings, kafka-python imported on one thread, and where their requests go: to brokers that answer.

kafka-python's admin sends a request that names no broker (Metadata, DescribeConfigs of a topic,
DescribeCluster, FindCoordinator) to its "least loaded" node, whichever that is. A broker that hangs
(SIGSTOPped: a long GC pause, a stalled disk) keeps its TCP connections open, so a request sent there
fails only when it times out, and the next one may go there again: with one of three 4.4.0 brokers
SIGSTOPped, a stuck row's coordinator and min.insync.replicas stayed unknown (docs/transactions-view.md,
tests/integration/test_stalled_broker.py).

`route(admin, own_broker, timeout_ms)` makes such a request go to the exporter's own broker first (the
one it runs beside, when known), then to the cluster's other brokers; each attempt is bounded by
`timeout_ms` (a request still waiting for its connection too), and a broker that did not answer in
time is asked last for STALLED_SECONDS. A request that names its broker (a partition's leader, a
coordinator) goes there alone, with the same bound.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Mapping
from typing import Any

from exporter.sources.kafka_python_adapter import broker_ids, send_through, send_to

# A broker that did not answer within the timeout is asked last for this long.
STALLED_SECONDS = 30.0


class _NoClientConfiguration(logging.Filter):
    """kafka-python's admin client logs its whole configuration at DEBUG, SASL password included."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("Starting KafkaAdminClient with configuration")


_NO_CLIENT_CONFIGURATION = _NoClientConfiguration()

# librdkafka setting names (Settings.kafka) -> kafka-python's KafkaAdminClient arguments.
KAFKA_PYTHON_SETTINGS = {
    "security.protocol": "security_protocol",
    "sasl.mechanism": "sasl_mechanism",
    "sasl.mechanisms": "sasl_mechanism",
    "sasl.username": "sasl_plain_username",
    "sasl.password": "sasl_plain_password",
    "ssl.ca.location": "ssl_cafile",
    "ssl.certificate.location": "ssl_certfile",
    "ssl.key.location": "ssl_keyfile",
    "ssl.key.password": "ssl_password",
    "client.id": "client_id",
}


def admin_config(bootstrap_servers: str, kafka_settings: Mapping[str, str]) -> dict[str, Any]:
    """KafkaAdminClient arguments from the exporter's librdkafka-style settings; settings with no
    kafka-python equivalent are skipped (logged once by the caller). Every kafka-python client the
    exporter makes takes its arguments from here, so this is where the client is kept from logging
    them: whichever client is made first, no password reaches a log."""
    logging.getLogger("kafka.admin.client").addFilter(_NO_CLIENT_CONFIGURATION)  # added once however often
    # (Any: the user's strings are passed on for kafka-python to check, as its keyword arguments.)
    config: dict[str, Any] = {"bootstrap_servers": bootstrap_servers.split(","), "client_id": "txn-exporter-hanging"}
    for key, value in kafka_settings.items():
        if key in KAFKA_PYTHON_SETTINGS:
            config[KAFKA_PYTHON_SETTINGS[key]] = value
    return config


def admin_client(
    bootstrap_servers: str,
    kafka_settings: Mapping[str, str],
    *,
    request_timeout_ms: int,
    own_broker: Callable[[], int | None],
    client_id: str | None = None,
    bootstrap_timeout_ms: int | None = None,
) -> Any:
    """A KafkaAdminClient (it connects: blocking) with `admin_config`'s arguments, each request bounded
    by `request_timeout_ms` and routed (`route`); `client_id`, when given, over the settings' own;
    `bootstrap_timeout_ms`, when given, bounds its bootstrap (kafka-python's default: 30 s)."""
    from kafka import KafkaAdminClient

    config = admin_config(bootstrap_servers, kafka_settings)
    if client_id is not None:
        config["client_id"] = client_id
    config["request_timeout_ms"] = request_timeout_ms
    if bootstrap_timeout_ms is not None:
        config["bootstrap_timeout_ms"] = bootstrap_timeout_ms
    return route(KafkaAdminClient(**config), own_broker, request_timeout_ms)


def import_kafka_python() -> None:
    """Imports kafka-python whole, on the calling thread: call it before starting the threads that
    use it (the hanging scan, the cluster state's workers, the consumer groups' lookups, the HTTP
    server's threads that ask them). Two threads importing its modules at once can each hold a module
    lock the other waits for, and Python then raises _DeadlockError in one: an exporter stopped so at
    its start, the cluster state's first import against the hanging scan's (once in some hundred
    starts, on a saturated machine). Its package imports the admin, the clients, the
    errors and the protocol modules the exporter reads (about 0.2 s)."""
    import kafka  # noqa: F401


class Router:
    """Where an admin's requests go (see the module docstring): the own broker first, then the
    others, those that did not answer in time last. Its `send` is what the admin sends through
    (exporter.sources.kafka_python_adapter.send_through: kafka-python's side of the swap)."""

    def __init__(
        self, own_broker: Callable[[], int | None], timeout_ms: int, monotonic: Callable[[], float] = time.monotonic
    ) -> None:
        self._own_broker = own_broker
        self._timeout_ms = timeout_ms
        self._monotonic = monotonic
        self._stalled: dict[int, float] = {}  # node id -> until when it is asked last

    def candidates(self, connections: Any) -> list[int]:
        """The nodes to ask, in order: the own broker, the others (shuffled), those stalled last."""
        nodes = broker_ids(connections)
        random.shuffle(nodes)
        own = self._own_broker()
        if own is not None and own in nodes:
            nodes.remove(own)
            nodes.insert(0, own)
        now = self._monotonic()
        for node, until in list(self._stalled.items()):
            if until <= now:
                del self._stalled[node]
        return [n for n in nodes if n not in self._stalled] + sorted(
            (n for n in nodes if n in self._stalled), key=self._stalled.__getitem__
        )

    async def send(self, connections: Any, request: Any, node_id: int | None, timeout_ms: int | None) -> Any:
        """A kafka_python_adapter.Sender: to `node_id` alone when given, else to the candidates in turn."""
        import kafka.errors as errors

        timeout_ms = timeout_ms or self._timeout_ms
        nodes = [node_id] if node_id is not None else self.candidates(connections)
        if not nodes:  # no metadata yet: kafka-python's own choice
            return await send_to(connections, request, None, timeout_ms)
        failure: Exception | None = None
        for node in nodes:
            try:
                return await send_to(connections, request, node, timeout_ms)
            except (errors.KafkaTimeoutError, errors.RequestTimedOutError) as e:
                self._stalled[node] = self._monotonic() + STALLED_SECONDS
                failure = e
            except (errors.NodeNotReadyError, errors.KafkaConnectionError, errors.UnknownBrokerIdError) as e:
                failure = e  # down or in its reconnect backoff: the next one
        assert failure is not None
        raise failure


def route(admin: Any, own_broker: Callable[[], int | None], timeout_ms: int) -> Any:
    """Has `admin` (a KafkaAdminClient) send its requests as the module docstring says; returns it."""
    return send_through(admin, Router(own_broker, timeout_ms).send)

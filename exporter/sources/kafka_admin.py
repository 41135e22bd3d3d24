"""Where the exporter's kafka-python requests go (the cluster state's, exporter.sources.cluster_state,
and the hanging scan's, exporter.sources.hanging_scan): to brokers that answer.

kafka-python's admin sends a request that names no broker (Metadata, DescribeConfigs of a topic,
DescribeCluster, FindCoordinator) to its "least loaded" node, whichever that is. A broker that hangs
(SIGSTOPped: a long GC pause, a stalled disk) keeps its TCP connections open, so a request sent there
fails only when it times out, and the next one may go there again. Measured on 4.4.0, three brokers,
one SIGSTOPped while a commit's markers were refused: the view's cluster state timed out
(REQUEST_TIMED_OUT), so the stuck row's coordinator and min.insync.replicas were unknown.

`route(admin, own_broker, timeout_ms)` makes such a request go to the exporter's own broker first (the
one it runs beside, when known), then to the cluster's other brokers; each attempt is bounded by
`timeout_ms` (a request still waiting for its connection too), and a broker that did not answer in
time is asked last for STALLED_SECONDS. A request that names its broker (a partition's leader, a
coordinator) goes there alone, with the same bound.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import Any

# A broker that did not answer within the timeout is asked last for this long.
STALLED_SECONDS = 30.0


def import_kafka_python() -> None:
    """Imports kafka-python whole, on the calling thread: call it before starting the threads that
    use it (the hanging scan, the cluster state's workers, the consumer groups' lookups, the HTTP
    server's threads that ask them). Two threads importing its modules at once can each hold a module
    lock the other waits for, and Python then raises _DeadlockError in one: an exporter stopped so at
    its start, the cluster state's first import against the hanging scan's (once in some hundred
    starts, on a saturated machine; 2026-11-27). Its package imports the admin, the clients, the
    errors and the protocol modules the exporter reads (about 0.2 s)."""
    import kafka  # noqa: F401


class _RoutedManager:
    """Stands for the admin's connection manager (kafka.net.manager.KafkaConnectionManager) in the
    admin's own methods, which all send through `send`; everything else is the manager's."""

    def __init__(
        self,
        manager: Any,
        own_broker: Callable[[], int | None],
        timeout_ms: int,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._manager = manager
        self._own_broker = own_broker
        self._timeout_ms = timeout_ms
        self._monotonic = monotonic
        self._stalled: dict[int, float] = {}  # node id -> until when it is asked last

    def __getattr__(self, name: str) -> Any:
        return getattr(self._manager, name)

    def candidates(self) -> list[int]:
        """The nodes to ask, in order: the own broker, the others (shuffled), those stalled last."""
        nodes = [b.node_id for b in self._manager.cluster.brokers()]
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

    async def send(self, request: Any, node_id: int | None = None, request_timeout_ms: int | None = None) -> Any:
        import kafka.errors as errors

        timeout_ms = request_timeout_ms or self._timeout_ms
        nodes = [node_id] if node_id is not None else self.candidates()
        if not nodes:  # no metadata yet: kafka-python's own choice
            return await self._manager.wait_for(self._manager.send(request), timeout_ms)
        failure: Exception | None = None
        for node in nodes:
            try:
                return await self._manager.wait_for(
                    self._manager.send(request, node_id=node, request_timeout_ms=timeout_ms), timeout_ms
                )
            except (errors.KafkaTimeoutError, errors.RequestTimedOutError) as e:
                self._stalled[node] = self._monotonic() + STALLED_SECONDS
                failure = e
            except (errors.NodeNotReadyError, errors.KafkaConnectionError, errors.UnknownBrokerIdError) as e:
                failure = e  # down or in its reconnect backoff: the next one
        assert failure is not None
        raise failure


def route(admin: Any, own_broker: Callable[[], int | None], timeout_ms: int) -> Any:
    """Has `admin` (a KafkaAdminClient) send its requests as the module docstring says; returns it."""
    admin._manager = _RoutedManager(admin._manager, own_broker, timeout_ms)
    return admin

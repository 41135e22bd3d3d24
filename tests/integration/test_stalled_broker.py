"""A stalled broker does not blind the cluster state (issue 31, item 4), on a real three-broker 4.4.0
cluster: broker 1 is the controller and the only replica of every `__transaction_state` partition (the
coordinator); `stall-held` lives on brokers 2 and 3 with min.insync.replicas=2. The cluster-state
source runs as beside broker 3 (its own broker, asked first), which is then SIGSTOPped: its TCP
connections stay open and nothing it is asked answers.

Both a source that had answers before the stop (it must get fresh ones, not show its cache) and one
made after it (no state cached, its client bootstrapping from a list that names broker 3 first) name
the coordinator (the leader of the `__transaction_state` partition) and find min.insync.replicas.

Which broker the source asks is seen on the wire: each broker advertises a TCP proxy of this test
as its address, which notes the broker every request of the source's client id goes to as it passes
(a request to the stalled broker too, which it never answers; see Proxy for its new connections).
"""

from __future__ import annotations

import socket
import struct
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from exporter.sources.cluster_state import ClusterStateSource
from tests.integration.test_diagnosis import CLIENT, PROPERTIES
from txn_workshop.harness.broker import KafkaBroker

TOPIC = "stall-held"
TRANSACTION_STATE = "__transaction_state"
# The requests the cluster state sends to a broker of its choice (Metadata, too, but kafka-python's own
# metadata refreshes, which go where kafka-python likes, look the same): DescribeConfigs, DescribeCluster.
ROUTED_API_KEYS = {32, 60}
SOURCE_CLIENT_ID = b"txn-exporter-cluster-state"
API_VERSIONS = 18
# The controller's broker.session.timeout.ms, and the test's timeout: broker 3 is never fenced while paused.
SESSION_TIMEOUT_SECONDS = 300


class Proxy:
    """A TCP proxy in front of one broker's PLAINTEXT listener, advertised as the broker's address:
    every client's and broker's connection to it passes through here. Notes in `asked` the node id
    of each request of the source's client id sent to it that ROUTED_API_KEYS names, as it is sent.

    While its broker is paused the proxy answers ApiVersions itself, with the broker's own earlier
    answer to that version: a client's new connection to the stalled broker is then ready, and what
    the client routes there is sent (and noted). Without that, a request routed to the stalled broker
    after kafka-python closed its connection there (at the request timeout) would wait in the client
    for a handshake the stopped JVM never answers, and never show on the wire: asking the stalled broker
    first would look the same as not asking it."""

    def __init__(self, node_id: int, asked: list[int], lock: threading.Lock) -> None:
        self.node_id = node_id
        self.broker: KafkaBroker | None = None
        self._asked, self._lock = asked, lock
        self._api_versions: dict[int, bytes] = {}  # request version -> the broker's answer, less its header
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def close(self) -> None:
        self._listener.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return  # closed
            assert self.broker is not None  # it advertises this address once started
            host, _, port = self.broker.bootstrap_servers.rpartition(":")
            try:
                upstream = socket.create_connection((host, int(port)))
            except OSError:
                client.close()
                continue
            versions: dict[int, int] = {}  # correlation id -> version, of the ApiVersions sent upstream
            to_client = threading.Lock()  # the broker's answers and the proxy's go to the client whole
            threading.Thread(target=self._requests, args=(client, upstream, versions, to_client), daemon=True).start()
            threading.Thread(target=self._responses, args=(upstream, client, versions, to_client), daemon=True).start()

    def _requests(
        self, client: socket.socket, upstream: socket.socket, versions: dict[int, int], to_client: threading.Lock
    ) -> None:
        """Client to broker, request by request; each request's header (api key, version, correlation id,
        client id) read on the way."""
        pending = b""
        try:
            while data := client.recv(65536):
                pending += data
                while len(pending) >= 4 and len(pending) >= 4 + (size := struct.unpack(">i", pending[:4])[0]):
                    framed, pending = pending[: 4 + size], pending[4 + size :]
                    request = framed[4:]
                    if len(request) < 10:
                        upstream.sendall(framed)
                        continue
                    api_key, version, correlation_id, length = struct.unpack(">hhih", request[:10])
                    if api_key == API_VERSIONS:
                        assert self.broker is not None
                        with self._lock:
                            answer = self._api_versions.get(version) if self.broker.paused else None
                            if answer is None:
                                versions[correlation_id] = version
                        if answer is not None:  # the stalled broker's, from before: not sent on
                            with to_client:
                                client.sendall(struct.pack(">ii", 4 + len(answer), correlation_id) + answer)
                            continue
                    upstream.sendall(framed)
                    if api_key in ROUTED_API_KEYS and request[10 : 10 + length] == SOURCE_CLIENT_ID:
                        with self._lock:
                            self._asked.append(self.node_id)
        except OSError:
            pass
        finally:
            _close(client, upstream)

    def _responses(
        self, upstream: socket.socket, client: socket.socket, versions: dict[int, int], to_client: threading.Lock
    ) -> None:
        """Broker to client, response by response; the answers to ApiVersions kept by version (its
        response header is the correlation id alone, whatever the version)."""
        pending = b""
        try:
            while data := upstream.recv(65536):
                pending += data
                while len(pending) >= 4 and len(pending) >= 4 + (size := struct.unpack(">i", pending[:4])[0]):
                    framed, pending = pending[: 4 + size], pending[4 + size :]
                    if size >= 4:
                        (correlation_id,) = struct.unpack(">i", framed[4:8])
                        with self._lock:
                            version = versions.pop(correlation_id, None)
                            if version is not None:
                                self._api_versions[version] = framed[8:]
                    with to_client:
                        client.sendall(framed)
        except OSError:
            pass
        finally:
            _close(upstream, client)


def _close(*sockets: socket.socket) -> None:
    for s in sockets:
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        s.close()


@contextmanager
def three_brokers_behind_proxies(
    pool, root: Path, version: str
) -> Iterator[tuple[tuple[KafkaBroker, KafkaBroker, KafkaBroker], list[int], threading.Lock]]:
    """tests.integration.test_diagnosis.three_brokers, each broker advertising its Proxy; with the node
    ids the source's requests went to, in order, and the lock that guards them."""
    asked: list[int] = []
    lock = threading.Lock()
    proxies = {n: Proxy(n, asked, lock) for n in (1, 2, 3)}

    def properties(n: int) -> dict[str, str]:
        props = {**PROPERTIES, "advertised.listeners": f"PLAINTEXT://127.0.0.1:{proxies[n].port}"}
        if n == 1:
            # The controller (broker 1) fences a broker whose heartbeats stop for broker.session.timeout.ms
            # (9 s by default), and a fenced broker leaves the metadata the source's client routes over:
            # the paused broker 3 would then never be asked, ordering or not, and the check that it is
            # asked last could not fail. The test's own timeout, longer than broker 3 can be paused,
            # keeps it registered (and listed) while it hangs, as a broker in a GC pause shorter than
            # the session timeout is.
            props["broker.session.timeout.ms"] = str(SESSION_TIMEOUT_SECONDS * 1000)
        return props

    first = KafkaBroker(version, workdir=root / "1", transaction_state_partitions=4, broker_properties=properties(1))
    brokers = (
        first,
        KafkaBroker(version, workdir=root / "2", join=first, node_id=2, broker_properties=properties(2)),
        KafkaBroker(version, workdir=root / "3", join=first, node_id=3, broker_properties=properties(3)),
    )
    try:
        for broker in brokers:
            proxies[broker.node_id].broker = broker
            pool.make_room()
            pool.own.append(broker)
            broker.start()
        yield brokers, asked, lock
    finally:
        for broker in reversed(brokers):  # joined brokers first: they need the controller to stop
            broker.stop()
            if broker in pool.own:
                pool.own.remove(broker)
        for proxy in proxies.values():
            proxy.close()


def known(source: ClusterStateSource, since_ms: int) -> bool:
    """The coordinator of every `__transaction_state` partition and the topic's min.insync.replicas,
    answered at or after `since_ms`."""
    snap = source.lookup([TRANSACTION_STATE, TOPIC])
    metadata = snap.topics[TRANSACTION_STATE]
    min_isr = snap.min_insync_replicas[TOPIC]
    return (
        metadata.value is not None
        and (metadata.as_of_ms or 0) >= since_ms
        and metadata.problem is None
        and all(p.leader == 1 for p in metadata.value.partitions.values())
        and min_isr.value is not None
        and min_isr.value.value == 2
        and (min_isr.as_of_ms or 0) >= since_ms
        and min_isr.problem is None
    )


def wait(condition, timeout: float, what: str) -> float:
    started = time.monotonic()
    while not condition():
        assert time.monotonic() - started < timeout, f"timed out waiting for {what}"
        time.sleep(0.25)
    return time.monotonic() - started


@pytest.mark.timeout(SESSION_TIMEOUT_SECONDS)
def test_the_own_broker_stalled_the_others_answer(kafka_broker_factory, tmp_path):
    with three_brokers_behind_proxies(kafka_broker_factory, tmp_path, "4.4.0") as ((first, second, third), asked, lock):

        def asked_since(mark: int) -> list[int]:
            with lock:
                return asked[mark:]

        admin = AdminClient({"bootstrap.servers": first.bootstrap_servers, **CLIENT})
        topic = NewTopic(TOPIC, 1, -1, replica_assignment=[[2, 3]], config={"min.insync.replicas": "2"})
        admin.create_topics([topic], operation_timeout=30)[TOPIC].result(60)
        producer = Producer({"bootstrap.servers": first.bootstrap_servers, "transactional.id": "stall", **CLIENT})
        producer.init_transactions(60)  # __transaction_state exists from here
        bootstrap = ",".join(b.bootstrap_servers for b in (third, first, second))

        def source() -> ClusterStateSource:
            # wait_seconds 0: lookups never wait, the test polls (each first look is answered in the background).
            return ClusterStateSource(bootstrap, own_broker=lambda: 3, wait_seconds=0.0, cache_seconds=1.0)

        assert asked_since(0) == []
        before = source()
        after = None
        try:
            wait(lambda: known(before, 0), 60, "the first answers")
            assert asked_since(0)[:1] == [3]  # the own broker is the one asked first
            third.pause()
            stopped_ms = int(time.time() * 1000)
            after = source()  # made after the stop: nothing cached
            took_after = wait(lambda: known(after, stopped_ms), 60, "a source made after the stop to know")
            after.close()  # from here what is asked is before's
            mark = len(asked_since(0))
            took_before = wait(lambda: known(before, stopped_ms), 60, "the source from before to answer afresh")
            stalled = asked_since(mark)
            print(f"known {took_after:.1f} s after (new source), {took_before:.1f} s more (old source)")
            print(f"the source from before asked, in order: {stalled}")
            # The stalled broker was asked and skipped: it is asked last now (still listed in the
            # metadata: the controller does not fence it, see broker.session.timeout.ms above).
            assert 3 in stalled
            mark, again_ms = len(asked_since(0)), int(time.time() * 1000)
            wait(
                lambda: known(before, again_ms) and asked_since(mark) != [],
                60,
                "the source from before to ask and answer once more",
            )
            print(f"then: {asked_since(mark)}")
            assert asked_since(mark)[0] != 3, f"the stalled broker was asked first again: {asked_since(mark)}"
        finally:
            third.resume()
            before.close()
            if after is not None:
                after.close()

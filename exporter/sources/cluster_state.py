"""The cluster around stuck transactions, for the transactions view's diagnosis: the metadata (leader,
replicas, ISR) and `min.insync.replicas` of the topics of the rows shown, the live brokers, and the
producer state (DescribeProducers) of late ONGOING transactions' partitions.

Bounded cost, whatever the cluster's size:
- Only what is asked: the topics of the rows the view shows (metadata is per topic in Kafka's
  protocol), and at most `max_producer_partitions` partitions per lookup for DescribeProducers.
- Cached `cache_seconds` (5 s): a page refreshing every few seconds costs one metadata request, one
  DescribeConfigs and one DescribeCluster per topic set and period, not per view. A stale entry is
  still shown (with its time, `as_of_ms`) while its refresh runs: only a first look waits.
- Never under the model's lock (the view calls `lookup` after copying its rows), and a first look
  waits `wait_seconds` (0.5 s) at most for everything it lacks: what did not answer by then is
  unknown (`Fact.problem`) and the row still shows; the request itself runs on up to
  `request_timeout_seconds` (5 s) in the background and fills the cache for the next view.
- One request of each kind at a time per key (topic, partition): a view never queues a second
  metadata request behind a pending one, so a broker that hangs costs one pending request, not one
  per page view.

Client: kafka-python's admin (as exporter.sources.hanging_scan; librdkafka has no DescribeProducers), its
blocking calls on this source's own daemon threads. Not confluent-kafka's AdminClient for metadata and
configs, tried first: librdkafka sends DescribeTopics and DescribeConfigs to the "controller" of the
metadata, which a KRaft cluster reports as a random broker, so with one broker hung (SIGSTOPped) they
timed out until the controller fenced it (9 s), then went on failing whenever that broker was named
(measured on 4.4.0). Here Metadata, DescribeConfigs and DescribeCluster go to the exporter's own broker
first, then to the others, each attempt bounded by the request timeout, a broker that did not answer
asked last for a while (exporter.sources.kafka_admin: kafka-python's own choice, its "least loaded"
broker, was the hung one often enough that a stuck row's coordinator and min.insync.replicas stayed
unknown); DescribeProducers goes to the partition's leader (from the cached metadata): a leader that
does not answer within the request timeout is itself a finding ("did not answer"). Each fact is its
own request: what one cannot say is unknown alone.

Kafka 3.6 to 4.4: Metadata (v12 and lower), DescribeConfigs, DescribeCluster and DescribeProducers
all exist there; `min.insync.replicas` comes from DescribeConfigs of the topic resource, whose
`source` says whether it is the topic's own override, a broker setting (dynamic, cluster default or
server.properties) or Kafka's default (1).
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future
from concurrent.futures import wait as wait_futures
from typing import Any

from exporter.contracts.cluster import (
    BROKER,
    DEFAULT,
    TOPIC,
    Brokers,
    ClusterSnapshot,
    Fact,
    MinInsyncReplicas,
    PartitionMetadata,
    ProducerState,
    TopicMetadata,
)
from exporter.sources.lookups import CachedEntry, Workers, known_error_name, whole

log = logging.getLogger("txn_exporter.cluster_state")

MIN_ISR = "min.insync.replicas"
CACHE_SECONDS = 5.0
WAIT_SECONDS = 0.5
REQUEST_TIMEOUT_SECONDS = 5.0
# A lookup that failed (an error, no answer in time) is tried again this soon, not after CACHE_SECONDS:
# a request sent to a broker that hangs fails, and the next one likely goes to another broker.
RETRY_SECONDS = 1.0
# Cached answers no view asked for in this long are dropped (checked once a minute): topics come and go.
FORGET_SECONDS = 600.0
MAX_PRODUCER_PARTITIONS = 200
# Requests at a time: one Metadata, one DescribeConfigs, DescribeProducers to a few leaders.
WORKER_THREADS = 4

# Where a min.insync.replicas value comes from (DescribeConfigs' config source, by name).
_SOURCES = {
    "DYNAMIC_TOPIC_CONFIG": TOPIC,
    "DYNAMIC_BROKER_CONFIG": BROKER,
    "DYNAMIC_DEFAULT_BROKER_CONFIG": BROKER,
    "STATIC_BROKER_CONFIG": BROKER,
    "DEFAULT_CONFIG": DEFAULT,
}


# What one answer says of one key: requests answer for several topics or partitions at once.
Answer = tuple[Any, "str | None"]


def _one_of(key: object, answers: Mapping[Any, Answer]) -> Answer:
    return answers.get(key, (None, "not answered"))


def _topic_of(topic: str, answer: tuple[Brokers, Mapping[str, Answer]]) -> Answer:
    return _one_of(topic, answer[1])


def _brokers_of(answer: tuple[Brokers, Mapping[str, Answer]]) -> Answer:
    return answer[0], None


def _error_name(exc: BaseException) -> str:
    """A Kafka error's name as Kafka 4.x spells it (kafka-python's errors carry the code, and some
    older names: NOT_LEADER_FOR_PARTITION), else the exception's class and text."""
    code = getattr(exc, "errno", None)
    if isinstance(code, int) and (name := known_error_name(code)) is not None:
        return name
    message = getattr(exc, "message", None)
    if isinstance(message, str) and message.isupper():
        return message
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


class ClusterStateSource:
    """Looks up the cluster's state for the view (see the module docstring); thread-safe."""

    def __init__(
        self,
        bootstrap_servers: str,
        kafka_settings: Mapping[str, str] | None = None,
        *,
        cache_seconds: float = CACHE_SECONDS,
        wait_seconds: float = WAIT_SECONDS,
        request_timeout_seconds: float = REQUEST_TIMEOUT_SECONDS,
        max_producer_partitions: int = MAX_PRODUCER_PARTITIONS,
        monotonic: Callable[[], float] = time.monotonic,
        clock: Callable[[], float] = time.time,
        admin: Callable[[], Any] | None = None,
        own_broker: Callable[[], int | None] = lambda: None,
    ) -> None:
        self.cache_seconds = cache_seconds
        self.wait_seconds = wait_seconds
        self.request_timeout_seconds = request_timeout_seconds
        self.max_producer_partitions = max_producer_partitions
        self._monotonic = monotonic
        self._clock = clock
        self._bootstrap_servers = bootstrap_servers
        self._kafka_settings = dict(kafka_settings or {})
        self._admin_factory = admin or self._kafka_python_admin
        self._own_broker = own_broker
        self._admin: Any = None
        self._admin_lock = threading.Lock()
        self._creating = threading.Lock()
        self._workers: Workers | None = None
        # The cache's own lock, held for dict work only; reentrant: a future that is already done runs
        # its callback at once, in the thread that adds it.
        self._lock = threading.RLock()
        self._brokers = CachedEntry()
        self._topics: dict[str, CachedEntry] = {}
        self._configs: dict[str, CachedEntry] = {}
        self._producers: dict[tuple[str, int], CachedEntry] = {}
        self._forgot = 0.0
        self._closed = False

    # --- the client ---

    def _kafka_python_admin(self) -> Any:
        from kafka import KafkaAdminClient

        from exporter.sources.hanging_scan import admin_config
        from exporter.sources.kafka_admin import route

        config = admin_config(self._bootstrap_servers, self._kafka_settings)
        config["client_id"] = "txn-exporter-cluster-state"
        config["request_timeout_ms"] = int(self.request_timeout_seconds * 1000)
        # A bootstrap server that hangs held kafka-python's whole bootstrap (30 s, one server tried):
        # bounded, the next lookup makes the client again, from another server picked at random.
        config["bootstrap_timeout_ms"] = config["request_timeout_ms"]
        return route(KafkaAdminClient(**config), self._own_broker, config["request_timeout_ms"])

    def _client(self) -> Any:
        """The client, created by the first worker that needs it (it connects, and may block for the
        client's own timeouts: under `_creating`, which close() never waits for)."""
        with self._creating:
            with self._admin_lock:
                if self._admin is not None:
                    return self._admin
                if self._closed:
                    raise RuntimeError("closed")
            admin = self._admin_factory()
            with self._admin_lock:
                if not self._closed:
                    self._admin = admin
                    return admin
            admin.close()  # closed while it connected
            raise RuntimeError("closed")

    def start(self) -> None:
        """Connects the client in the background (bootstrap, version probe: a second or more), so the
        first view that needs the cluster does not wait for that too."""
        with self._lock:
            self._submit(self._client)

    def close(self) -> None:
        """Never waits for a request or a client still connecting (the workers are daemons)."""
        with self._admin_lock:
            self._closed = True
            admin, self._admin = self._admin, None
        if self._workers is not None:
            self._workers.stop()
        if admin is not None:
            try:
                admin.close()
            except Exception:  # closing on the way out
                pass

    # --- the lookup ---

    def lookup(self, topics: Iterable[str], producer_partitions: Iterable[tuple[str, int]] = ()) -> ClusterSnapshot:
        """The state of `topics` (metadata, min.insync.replicas), the live brokers, and the producers
        of `producer_partitions` (at most max_producer_partitions of them, in the order given);
        waits at most wait_seconds for what is not cached; never raises for Kafka's sake."""
        topics = sorted(set(topics))
        wanted = list(dict.fromkeys(producer_partitions))[: self.max_producer_partitions]
        now = self._monotonic()
        deadline = now + self.wait_seconds
        with self._lock:
            self._forget(now)
            self._refresh_topics(topics)
            for entry in (*(c[t] for c in (self._topics, self._configs) for t in topics), self._brokers):
                entry.asked = now
            waiting = self._first_looks([self._brokers, *(c[t] for c in (self._topics, self._configs) for t in topics)])
        if waiting:
            wait_futures(waiting, timeout=max(0.0, deadline - self._monotonic()))
        # Producers next: each request goes to the partition's leader, from the metadata just read.
        if wanted:
            with self._lock:
                self._refresh_producers(wanted)
                for tp in wanted:
                    self._producers[tp].asked = now
                waiting = self._first_looks([self._producers[tp] for tp in wanted])
            if waiting:
                wait_futures(waiting, timeout=max(0.0, deadline - self._monotonic()))
        with self._lock:
            return ClusterSnapshot(
                self._fact(self._brokers),
                {t: self._fact(self._topics[t]) for t in topics},
                {t: self._fact(self._configs[t]) for t in topics},
                {tp: self._fact(self._producers[tp]) for tp in wanted},
            )

    def _forget(self, now: float) -> None:
        """Holding self._lock: once a minute, drops the answers no view asked for in FORGET_SECONDS."""
        if now - self._forgot < 60.0:
            return
        self._forgot = now
        caches: tuple[dict[Any, CachedEntry], ...] = (self._topics, self._configs, self._producers)
        for cache in caches:
            for key in [k for k, e in cache.items() if e.pending is None and now - e.asked > FORGET_SECONDS]:
                del cache[key]

    def _fact(self, entry: CachedEntry) -> Fact:
        # A future that completed while its callback has not run yet (waiters wake first) counts.
        if entry.pending is not None and entry.pending.done():
            self._settle(entry, entry.pending)
        return entry.fact(self.wait_seconds)

    @staticmethod
    def _first_looks(entries: Iterable[CachedEntry]) -> list[Future]:
        """The refreshes of entries that never had an answer: a view waits for those only."""
        return [e.pending for e in entries if e.fetched is None and e.pending is not None]

    def _due(self, entry: CachedEntry) -> bool:
        if self._closed or entry.pending is not None:
            return False
        if entry.fetched is None:
            return True
        period = self.cache_seconds if entry.problem is None else min(self.cache_seconds, RETRY_SECONDS)
        return self._monotonic() - entry.fetched >= period

    def _refresh_topics(self, topics: list[str]) -> None:
        """Holding self._lock: one Metadata and one DescribeConfigs request for the topics that are
        due; every Metadata answer also brings the live brokers."""
        due = [t for t in topics if self._due(self._topics.setdefault(t, CachedEntry()))]
        if due:
            future = self._submit(functools.partial(self._metadata, due))
            if self._brokers.pending is None:
                self._watch(self._brokers, future, _brokers_of)
            for topic in due:
                self._watch(self._topics[topic], future, functools.partial(_topic_of, topic))
        due = [t for t in topics if self._due(self._configs.setdefault(t, CachedEntry()))]
        if due:
            future = self._submit(functools.partial(self._min_isr, due))
            for topic in due:
                self._watch(self._configs[topic], future, functools.partial(_one_of, topic))

    def _submit(self, call: Callable[[], Any]) -> Future:
        if self._workers is None:
            # kafka-python imported here first, not by two workers at once (see import_kafka_python).
            from exporter.sources.kafka_admin import import_kafka_python

            import_kafka_python()
            self._workers = Workers(WORKER_THREADS, "cluster-state")
        return self._workers.submit(call)

    def _watch(self, entry: CachedEntry, future: Future, pick: Callable[[Any], tuple[Any, str | None]] = whole) -> None:
        """Holding self._lock."""
        entry.pending, entry.pick = future, pick

        def done(f: Future) -> None:
            with self._lock:
                self._settle(entry, f)

        future.add_done_callback(done)

    def _settle(self, entry: CachedEntry, future: Future) -> None:
        """Holding self._lock: the answer of `future`, once, if it is still the entry's refresh."""
        if entry.pending is not future:
            return
        entry.pending = None
        try:
            value, problem = entry.pick(future.result())
        except Exception as e:  # the entry says why it is unknown
            value, problem = None, _error_name(e)
        self._answered(entry, value, problem)

    def _answered(self, entry: CachedEntry, value: Any, problem: str | None) -> None:
        entry.fetched = self._monotonic()
        if problem is not None:
            log.debug("cluster state: %s", problem)
            if entry.value is not None:  # keep showing the last value, with its time; retried later
                entry.problem = problem
                return
        entry.value, entry.problem = value, problem
        entry.as_of_ms = int(self._clock() * 1000)

    # --- requests (kafka-python, blocking: on the workers) ---

    def _metadata(self, topics: list[str]) -> tuple[Brokers, dict[str, tuple[TopicMetadata | None, str | None]]]:
        """One Metadata request: `topics` (a topic Kafka does not know is a fact, TopicMetadata with the
        error, not a problem) and the live brokers; then DescribeCluster for the fenced ones, where the
        broker says (KRaft 4.0+ lists them; kafka-python 3.0's describe_cluster fails on the
        DescribeCluster v0 of 3.6 brokers: no fenced brokers told apart there)."""
        import kafka.errors as errors

        admin = self._client()
        # kafka-python's describe_topics sends this very request and keeps only its topics.
        metadata = admin._manager.run(admin._get_cluster_metadata, topics)
        live = frozenset(b["node_id"] for b in metadata["brokers"])
        try:
            fenced = frozenset(b["broker_id"] for b in admin.describe_cluster()["brokers"] if b.get("is_fenced"))
        except Exception:  # an old broker, or the request failed: fenced brokers are simply not live
            fenced = frozenset()
        brokers = Brokers(live - fenced, fenced)
        found: dict[str, tuple[TopicMetadata | None, str | None]] = {}
        for topic in metadata["topics"]:
            error = errors.for_code(topic["error_code"])
            if error is errors.UnknownTopicOrPartitionError:
                found[topic["name"]] = (TopicMetadata({}, "UNKNOWN_TOPIC_OR_PARTITION"), None)
            elif error is not errors.NoError:
                found[topic["name"]] = (None, error.message)
            else:
                found[topic["name"]] = (
                    TopicMetadata(
                        {
                            p["partition_index"]: PartitionMetadata(
                                p["leader_id"] if p["leader_id"] >= 0 else None,
                                tuple(p["replica_nodes"]),
                                tuple(p["isr_nodes"]),
                            )
                            for p in topic["partitions"]
                        }
                    ),
                    None,
                )
        return brokers, found

    def _min_isr(self, topics: list[str]) -> dict[str, tuple[MinInsyncReplicas | None, str | None]]:
        """One DescribeConfigs request for min.insync.replicas alone, of each topic."""
        from kafka.admin import ConfigResource, ConfigResourceType

        # Its keys name the configs asked for (kafka-python describes those only; the values are unused).
        resources = [ConfigResource(ConfigResourceType.TOPIC, t, {MIN_ISR: ""}) for t in topics]
        answered = self._client().describe_configs(resources, config_filter="all").get("topic", {})
        found: dict[str, tuple[MinInsyncReplicas | None, str | None]] = {}
        for topic in topics:
            entry = answered.get(topic, {}).get(MIN_ISR)
            if entry is None:
                found[topic] = (
                    None,
                    "no min.insync.replicas in the answer (unknown topic, or no DescribeConfigs right)",
                )
            else:
                found[topic] = (
                    MinInsyncReplicas(int(entry["value"]), _SOURCES.get(entry["config_source"], BROKER)),
                    None,
                )
        return found

    # --- DescribeProducers (kafka-python, blocking: on the workers) ---

    def _refresh_producers(self, partitions: list[tuple[str, int]]) -> None:
        """Holding self._lock: one request per leader for the partitions that are due."""
        by_leader: dict[int | None, list[tuple[str, int]]] = {}
        for tp in partitions:
            if self._due(self._producers.setdefault(tp, CachedEntry())):
                by_leader.setdefault(self._leader(tp), []).append(tp)
        for leader, tps in by_leader.items():
            future = self._submit(functools.partial(self._describe_producers, tps, leader))
            for tp in tps:
                self._watch(self._producers[tp], future, functools.partial(_one_of, tp))

    def _leader(self, tp: tuple[str, int]) -> int | None:
        entry = self._topics.get(tp[0])
        if entry is None or entry.value is None:
            return None
        partition = entry.value.partitions.get(tp[1])
        return None if partition is None else partition.leader

    def _describe_producers(
        self, partitions: list[tuple[str, int]], leader: int | None
    ) -> dict[tuple[str, int], tuple[tuple[ProducerState, ...] | None, str | None]]:
        """One DescribeProducers request to `leader` (kafka-python routes it when None); kafka-python
        raises for the whole request on one partition's error, so then one request per partition."""
        from kafka import TopicPartition
        from kafka.errors import BrokerResponseError

        admin = self._client()
        try:
            answered = admin.describe_producers([TopicPartition(t, p) for t, p in partitions], broker_id=leader)
        except BrokerResponseError:
            if len(partitions) == 1:
                raise
            results = {}
            for tp in partitions:
                try:
                    results.update(self._describe_producers([tp], leader))
                except Exception as e:
                    results[tp] = (None, _error_name(e))
            return results
        return {
            (tp.topic, tp.partition): (
                tuple(
                    ProducerState(
                        p.producer_id,
                        p.producer_epoch,
                        p.last_timestamp,
                        p.coordinator_epoch,
                        p.current_transaction_start_offset,
                    )
                    for p in state.active_producers
                ),
                None,
            )
            for tp, state in answered.items()
        }

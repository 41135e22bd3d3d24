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
blocking calls on this source's own daemon threads. Not confluent-kafka's AdminClient, tried first:
librdkafka sends DescribeTopics and DescribeConfigs to the metadata's "controller", a random broker in
KRaft, so with one broker hung they timed out until it was fenced (9 s on 4.4.0), then whenever it was
named (docs/transactions-view.md). Metadata, DescribeConfigs and DescribeCluster go to the exporter's own
broker first, then to the others (exporter.sources.kafka_admin); DescribeProducers goes to the
partition's leader (from the cached metadata): a leader that does not answer within the request timeout
is itself a finding ("did not answer"). Each fact is its own request: what one cannot say is unknown
alone.

Kafka 3.6 to 4.4: Metadata (v12 and lower), DescribeConfigs, DescribeCluster and DescribeProducers
all exist there; `min.insync.replicas` comes from DescribeConfigs of the topic resource, whose
`source` says whether it is the topic's own override, a broker setting (dynamic, cluster default or
server.properties) or Kafka's default (1).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import wait as wait_futures
from typing import Any, Unpack

from exporter.contracts.cluster import (
    BROKER,
    DEFAULT,
    TOPIC,
    Brokers,
    ClusterSnapshot,
    MinInsyncReplicas,
    PartitionMetadata,
    ProducerState,
    TopicMetadata,
)
from exporter.sources.kafka_admin import admin_client
from exporter.sources.kafka_python_adapter import cluster_metadata, run
from exporter.sources.lookups import CachedEntry, CachedLookups, LookupOptions, exception_name

log = logging.getLogger("txn_exporter.cluster_state")

MIN_ISR = "min.insync.replicas"
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


class ClusterStateSource(CachedLookups):
    """Looks up the cluster's state for the view (see the module docstring); thread-safe."""

    what = "cluster state"
    worker_threads = WORKER_THREADS

    def __init__(
        self,
        bootstrap_servers: str,
        kafka_settings: Mapping[str, str] | None = None,
        *,
        max_producer_partitions: int = MAX_PRODUCER_PARTITIONS,
        admin: Callable[[], Any] | None = None,
        **options: Unpack[LookupOptions],
    ) -> None:
        super().__init__(bootstrap_servers, kafka_settings, admin=admin, **options)
        self.max_producer_partitions = max_producer_partitions
        self._brokers = CachedEntry()
        self._topics: dict[str, CachedEntry] = {}
        self._configs: dict[str, CachedEntry] = {}
        self._producers: dict[tuple[str, int], CachedEntry] = {}

    def _caches(self) -> tuple[dict[Any, CachedEntry], ...]:
        return (self._topics, self._configs, self._producers)

    def _kafka_python_admin(self) -> Any:
        timeout_ms = int(self.request_timeout_seconds * 1000)
        # A bootstrap server that hangs held kafka-python's whole bootstrap (30 s, one server tried):
        # bounded, the next lookup makes the client again, from another server picked at random.
        return admin_client(
            self._bootstrap_servers,
            self._kafka_settings,
            client_id="txn-exporter-cluster-state",
            request_timeout_ms=timeout_ms,
            own_broker=self._own_broker,
            bootstrap_timeout_ms=timeout_ms,
        )

    def start(self) -> None:
        """Connects the client in the background (bootstrap, version probe: a second or more), so the
        first view that needs the cluster does not wait for that too."""
        with self._lock:
            self._submit(self._client)

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

    def _refresh_topics(self, topics: list[str]) -> None:
        """Holding self._lock: one Metadata and one DescribeConfigs request for the topics that are
        due; every Metadata answer also brings the live brokers."""
        now = self._monotonic()
        due = [t for t in topics if self._due(self._topics.setdefault(t, CachedEntry()), now)]
        if due:
            future = self._submit(functools.partial(self._metadata, due))
            if self._brokers.pending is None:
                self._watch(self._brokers, future, _brokers_of)
            for topic in due:
                self._watch(self._topics[topic], future, functools.partial(_topic_of, topic))
        due = [t for t in topics if self._due(self._configs.setdefault(t, CachedEntry()), now)]
        if due:
            future = self._submit(functools.partial(self._min_isr, due))
            for topic in due:
                self._watch(self._configs[topic], future, functools.partial(_one_of, topic))

    # --- requests (kafka-python, blocking: on the workers) ---

    def _metadata(self, topics: list[str]) -> tuple[Brokers, dict[str, tuple[TopicMetadata | None, str | None]]]:
        """One Metadata request: `topics` (a topic Kafka does not know is a fact, TopicMetadata with the
        error, not a problem) and the live brokers; then DescribeCluster for the fenced ones, where the
        broker says (KRaft 4.0+ lists them; kafka-python 3.0's describe_cluster fails on the
        DescribeCluster v0 of 3.6 brokers: no fenced brokers told apart there)."""
        import kafka.errors as errors

        admin = self._client()
        metadata = run(admin, cluster_metadata, admin, topics)
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
        now = self._monotonic()
        for tp in partitions:
            if self._due(self._producers.setdefault(tp, CachedEntry()), now):
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
                    results[tp] = (None, exception_name(e))
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

"""The live source: follows `__transaction_state` partitions with confluent-kafka and yields events.

Ownership: by default the exporter follows the partitions whose leader is the broker it runs
beside (that broker is their transaction coordinator); with `all_partitions`, every partition.
Metadata is re-read every `metadata_refresh_seconds` (or at once when `refresh_ownership_soon()` is
called, e.g. on a coordinator elected/resigned log line): partitions that move in are assigned and
replayed from the beginning; partitions that move out are unassigned and revoked, so the model drops
their state and every series they fed.

Replay: a newly assigned partition is read from its first offset up to the high watermark seen at
assignment with `replay=True`, which rebuilds state without observing latency; `PartitionReplayed`
marks the switch to live records. Only each transactional id's last record of a replay window is
decoded (see _hand_over_replayed): a replayed record matters only as the state it leaves, which a
later record of the same id overwrites, as the broker's own load of the partition keeps the last.

One exception to replay: a cluster's first records. When this exporter, before it ever saw
`__transaction_state`, found it absent, nothing in the topic can predate that moment, so the
partitions it then takes are live from their first record, if that record was appended since (by its
timestamp; the sidecar shares the broker's clock): one from before means the broker answered wrongly,
and the partition is replayed. The rule is not applied to a topic that disappears after it
was seen, nor to partitions without a leader for a while: a restarting broker answers so, while the
exporter beside another broker may still be reading those records. While the topic is absent or a
partition leaderless, ownership is read again every second.

Fencing: between a leader moving and the next ownership read, the client follows the partition to
its new leader, whose exporter counts the same records from its takeover on. So a live record whose
leader epoch (its batch's, set by the broker that appended it) is newer than the partition's last is
not taken: the partition is refetched from it once ownership has been read again, or dropped with it.

The consumer uses manual assignment and never commits or joins a group: it needs Describe and Read
on the topic only. The group id is required by the client but unused.
"""

from __future__ import annotations

import gc
import json
import logging
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from operator import attrgetter
from typing import Any, Protocol

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, TopicPartition

from exporter.codec import DecodeError, TransactionLogRecord, decode_record
from exporter.codec.states import PREPARE_STATES
from exporter.contracts.events import (
    PartitionAssigned,
    PartitionProgress,
    PartitionReplayed,
    PartitionRevoked,
    SourceStatus,
    TopicEvent,
    TransactionLogRecords,
    UndecodableRecord,
)
from exporter.logs import kafka_client_logger

TOPIC = "__transaction_state"
log = logging.getLogger(__name__)

# Settings the source owns; users' Kafka settings may not override them.
_OWNED_SETTINGS = {
    "group.id": "txn-exporter",
    "enable.auto.commit": False,
    "enable.auto.offset.store": False,
    # The topic is not transactional; read_uncommitted avoids waiting on an LSO that never lags.
    "isolation.level": "read_uncommitted",
}
# Client settings users may override. librdkafka (2.1+) stops fetching a partition whose local queue
# holds over queued.min.messages for fetch.queue.backoff.ms, 1 s by default: a replay drained that
# queue in well under a second and then sat idle, which halved its speed (1M records: 8.8 s -> 4.5 s,
# bench/live_exporter.py). The queue is bounded (librdkafka's defaults, 100k messages and 64 MiB, let
# a replay's memory grow with the backlog): its limits count the whole consumer's queue, and a fetch
# response adds at most fetch.max.bytes beyond them.
#
# A broker that is down costs next to nothing (issue 31): measured with librdkafka 2.16, an exporter
# whose broker was stopped made 39 connection attempts a second to it, 37 of them its two consumers':
# each re-bootstrapped in a loop (KIP-899's metadata.recovery.strategy, which stays on: without it a
# client told of no broker by one starting up keeps none) whose every round connects a new bootstrap
# broker at once, and a sparse client (enable.sparse.connections) connects at once for any request
# that needs "any connection" (its unused group's coordinator lookup, every 50 ms), paced by
# reconnect.backoff.ms / 2 (at most 1 s: 2.2 a second for both consumers, sparse, measured). Kept
# connected to every broker (not sparse), the clients reconnect on their backoff alone: from 10 s
# after the stop 0.8 attempts a second for all the exporter's clients together (0.4 after 20 s), and
# ready 3.3 s after the broker came back. The cost: each consumer connects to every broker, and the
# first reconnect after a dropped connection waits 1.5-3 s.
_DEFAULT_SETTINGS = {
    "fetch.queue.backoff.ms": 10,
    "queued.min.messages": 10_000,
    "queued.max.messages.kbytes": 8192,
    "fetch.max.bytes": 8 << 20,
    "enable.sparse.connections": False,
    "reconnect.backoff.ms": 2000,
    "reconnect.backoff.max.ms": 4000,
}
# The fetch pattern (docs/benchmarks.md, "What the sidecar costs"). A sidecar's cost is mostly its
# fetches, in the client and in the broker serving them: each request and response carries every
# followed partition (librdkafka sends no KIP-227 incremental fetch sessions), however few records
# it brings. The append-latency bound's resolution (latency_resolution_ms) is a stated setting: a
# record may be gathered with others for up to that long before it reaches the exporter. Two
# consumers of the same partitions, one assigned them at a time:
# - idle: one fetch held until a byte is appended (fetch.min.bytes 1) or for _IDLE_WAIT_MS: a
#   record is delivered at once, 10 fetches a second when nothing happens;
# - busy: a fetch held latency_resolution_ms (a min.bytes never reached): at most
#   1000/latency_resolution_ms fetches a second whatever the load, each bringing what was appended
#   meanwhile, so a record waits at most the resolution (docs/metrics.md, "How append latency is measured").
# Busy during a replay, and when the idle consumer's deliveries a second reach the busy one's fetches
# a second; idle again, once nothing replays, when fewer records a second arrive than _IDLE_BELOW of
# those fetches (so even one fetch per record would cost less; the band between keeps it from
# flapping).
# Why not one consumer pausing its partitions for the resolution after each delivery, or librdkafka's
# own queue backoff (queued.min.messages 1): each puts partitions back to the fetch list one by one,
# librdkafka sends its next fetch with the first ones back alone and allows one fetch in flight per
# broker, so the others waited for that fetch, held up to fetch.wait.max.ms (measured: p99 ~ that).
# The same happens whenever the queue's limits stop a replay: hence replays on the busy consumer,
# whose fetches are held briefly.
DEFAULT_LATENCY_RESOLUTION_MS = 10
_IDLE_WAIT_MS = 100
_BUSY_MIN_BYTES = 1 << 20
_IDLE_SETTINGS = {"fetch.min.bytes": 1, "fetch.wait.max.ms": _IDLE_WAIT_MS}
_IDLE_BELOW = 0.3
# How long a transaction's COMPLETE_* record is waited for with nudges after its PREPARE_* (its
# markers' round trip; a coordinator moving away takes longer, and is not waited for).
_NUDGE_FOR_MS = 200
_NUDGE_TIMEOUT_SECONDS = 1.0
# Only "all brokers down" means the source is down; a single dropped connection (an idle one the
# broker reaped, say) just asks for a metadata refresh, which tells whether the cluster answers.
_CONNECTION_ERRORS = {KafkaError._TRANSPORT, KafkaError._RESOLVE}
# Kafka refusing the exporter: a restart cannot fix it, so it is logged once, loudly, and /readyz
# names it until a record arrives. (GROUP_AUTHORIZATION_FAILED is not here: the client looks up the
# coordinator of the group id it insists on, which the exporter never uses.)
_ACCESS_ERRORS = {
    KafkaError.TOPIC_AUTHORIZATION_FAILED,
    KafkaError.CLUSTER_AUTHORIZATION_FAILED,
    KafkaError.SASL_AUTHENTICATION_FAILED,
    KafkaError._AUTHENTICATION,
}
# librdkafka's "(after 3ms in state CONNECT)" differs at each attempt: without it, the repeats of one
# connection failure are one message, which the log's repeat suppression collapses.
_CONNECT_TIME = re.compile(r" \(after \d+ms in state \w+\)")
_BY_OFFSET = attrgetter("offset")
_PROGRESS_INTERVAL_SECONDS = 1.0
# A replaying partition's window of last records is decoded and handed to the model once it holds
# this many transactional ids, so a replay of millions of ids keeps a bounded number of messages
# (about 600 bytes each with their key and value: 10 MiB a window). Ids with more records than
# that between two of theirs are decoded more than once, which costs time, never correctness.
_REPLAY_WINDOW_IDS = 16_384
_METADATA_TIMEOUT_SECONDS = 5.0
_RETRY_SECONDS = 1.0


# Every live record as received, at DEBUG: what the append-latency bound of each transition was
# measured from (tests/integration/test_broker_truth.py holds it to the coordinator's own log lines).
_records_log = logging.getLogger(__name__ + ".records")


def _log_observed(partition: int, record: TransactionLogRecord, received_ms: int) -> None:
    value = record.value
    fields = {"partition": partition, "offset": record.offset, "transactional_id": record.transactional_id}
    if value is not None:
        fields.update(
            state=value.state.name,
            producer_id=value.producer_id,
            producer_epoch=value.producer_epoch,
            last_update_ms=value.last_update_timestamp_ms,
        )
    fields.update(timestamp_ms=record.timestamp_ms, received_ms=received_ms)
    _records_log.debug("live record %s", json.dumps(fields, ensure_ascii=False))


class _Fetched(Protocol):
    """What _consume reads of a fetched confluent_kafka.Message. The client's types leave its
    partition and offset optional, for the messages that carry an error(); a message without one is
    a record, and librdkafka always sets them."""

    def error(self) -> KafkaError | None: ...
    def partition(self) -> int: ...
    def offset(self) -> int: ...
    def key(self) -> bytes | None: ...
    def value(self) -> bytes | None: ...
    def timestamp(self) -> tuple[int, int]: ...
    def leader_epoch(self) -> int | None: ...


class OwnershipError(Exception):
    """The exporter cannot tell which partitions to follow (a configuration problem)."""


class TransactionLogTail:
    def __init__(
        self,
        bootstrap_servers: str,
        *,
        broker_id: int | None = None,
        all_partitions: bool = False,
        metadata_refresh_seconds: float = 30.0,
        kafka_settings: dict[str, str] | None = None,
        clock: Callable[[], float] = time.time,
        consumer_factory: Callable[[dict[str, Any]], Consumer] = Consumer,
        latency_resolution_ms: int = DEFAULT_LATENCY_RESOLUTION_MS,
    ) -> None:
        """`consumer_factory` makes the clients from their settings (confluent-kafka's Consumer; tests
        pass one of their own). `latency_resolution_ms`: how long a record may wait before it reaches the
        exporter, which under load fetches at most this often (see the fetch pattern above)."""
        if latency_resolution_ms < 1:
            raise ValueError("latency_resolution_ms must be at least 1")
        self._bootstrap_servers = bootstrap_servers
        self._broker_id = broker_id
        self._all_partitions = all_partitions
        self._refresh_seconds = metadata_refresh_seconds
        self._clock = clock
        self._consumer_factory = consumer_factory
        self._kafka_settings = kafka_settings or {}
        self._resolution_ms = latency_resolution_ms
        self._busy_from = 1000 / latency_resolution_ms  # the busy consumer's fetches a second, at most
        self._idle_below = _IDLE_BELOW * self._busy_from
        self._idle = self._make_consumer("idle", _IDLE_SETTINGS)
        # Made now, not at the first load: a new client's first fetch waits for its connections and
        # metadata, which the records of that moment would wait for too.
        self._busy = self._make_consumer(
            "busy", {"fetch.min.bytes": _BUSY_MIN_BYTES, "fetch.wait.max.ms": latency_resolution_ms}
        )
        self._consumer = self._idle  # the one assigned the followed partitions
        # Idle: transactions whose COMPLETE_* record is due -> (partition, until when it is waited
        # for, ms); see _nudge.
        self._prepared: dict[str, tuple[int, int]] = {}
        # Partitions whose in-sync replicas were their leader alone at the last ownership read: only
        # their COMPLETE_* records need nudges (see _nudge).
        self._lone_leaders: set[int] = set()
        self._next_nudge_ms = 0
        self._nudge_partition = 0
        # The errands of the consumer not fetching, on a thread of their own (see _errand).
        self._errands: threading.Thread | None = None
        self._errand_wanted = threading.Event()
        self._errands_wanted: set[str] = set()
        self._closing = False
        self._knows_leaders: set[int] = set()  # consumers (by id) that read the topic's metadata
        # Since the last progress report: polls that brought live records, and those records.
        self._live_polls = 0
        self._live_records = 0
        self._last_progress = clock()
        # Followed partitions -> the offset replay must reach (None once live).
        self._followed: dict[int, int | None] = {}
        # Replaying partitions -> their records not yet decoded: the last message of each key.
        self._replay_windows: dict[int, dict[bytes, _Fetched]] = {}
        # When the exporter, never having seen the topic, first found it absent (ms); then, once it
        # exists, its partitions whose records from that time on are live (until their first record
        # is read, or another broker is seen leading them).
        self._topic_seen = False
        self._topic_absent_since_ms: int | None = None
        self._created_since_ms: dict[int, int] = {}
        # Readiness waits for a first complete view of ownership (a starting cluster has no leaders
        # yet, and "owns nothing" would read as ready), for owned partitions whose leader did not
        # answer yet, and for replays. Else records written meanwhile would be replayed later as
        # history instead of observed live. The HTTP thread reads `not_ready`, published whole at
        # the end of each poll, never state the poll is in the middle of changing.
        self._complete_view = False
        self._waiting: set[int] = set()
        self.not_ready: str | None = "starting"
        self._access_error: str | None = None
        self._next_offset: dict[int, int] = {}
        # Followed partitions -> the leader epoch of their last record taken; those whose live
        # record of a newer one (at their next offset) waits for ownership to be read again -> that epoch.
        self._epochs: dict[int, int] = {}
        self._fenced: dict[int, int] = {}
        self._up: bool | None = None
        self._outage_log = _OutageLog(clock)  # Kafka's connection failures, logged at a slowing rate
        self._client_down = False
        self._next_refresh = 0.0
        self._next_progress = 0.0

    @property
    def broker_id(self) -> int | None:
        return self._broker_id

    def refresh_ownership_soon(self) -> None:
        self._next_refresh = 0.0

    def poll(self, timeout: float = 0.2, max_records: int = 1000) -> list[TopicEvent]:
        """Returns the events of one poll: ownership changes, records, progress, status."""
        events: list[TopicEvent] = []
        now = self._clock()
        if now >= self._next_refresh:
            self._next_refresh = now + self._refresh_seconds
            self._refresh_ownership(events)
            if self._fenced:  # (the read failed)
                self._next_refresh = min(self._next_refresh, now + _RETRY_SECONDS)
        if self._followed:
            if self._prepared:
                timeout = min(timeout, self._resolution_ms / 1000)
            self._consume(events, timeout, max_records)
            if self._prepared:
                self._nudge()
        else:
            self._consumer.poll(timeout)  # nothing assigned: returns nothing, but serves error_cb
        if self._client_down:
            self._client_down = False
            self._set_up(False, events)
            self._next_refresh = 0.0  # find out as soon as it is back
        now = self._clock()
        if now >= self._next_progress:
            self._next_progress = now + _PROGRESS_INTERVAL_SECONDS
            self._report_progress(events)
            self._adapt_fetching(now - self._last_progress)
            self._last_progress = now
        self.not_ready = self._readiness()
        return events

    def _readiness(self) -> str | None:
        if self._access_error is not None:
            return self._access_error
        if not self._up:
            return "source down: Kafka does not answer"
        if not self._complete_view:
            return f"waiting for the leaders of {TOPIC}'s partitions"
        if self._waiting:
            return f"waiting for the leaders of {TOPIC} partitions {sorted(self._waiting)}"
        if self._replay_windows:  # (each replaying partition has one, so every poll asks in O(1))
            return f"replaying {TOPIC} partitions {sorted(self._replay_windows)}"
        return None

    def close(self) -> bool:
        """Closes both clients, once the errands' thread has left its request; returns False, leaving
        them open, if it has not within its longest request: closing a client that another thread is
        inside of crashes the process."""
        if self._errands is not None:
            self._closing = True
            self._errand_wanted.set()
            self._errands.join(_METADATA_TIMEOUT_SECONDS + 1)
            if self._errands.is_alive():
                return False
        self._idle.close()
        self._busy.close()
        return True

    @property
    def busy(self) -> bool:
        """Whether the followed partitions are fetched by the busy consumer (every latency_resolution_ms)."""
        return self._consumer is not self._idle

    def _make_consumer(self, name: str, fetching: dict[str, Any]) -> Consumer:
        return self._consumer_factory(
            {
                **_DEFAULT_SETTINGS,
                **self._kafka_settings,
                **_OWNED_SETTINGS,
                **fetching,
                "bootstrap.servers": self._bootstrap_servers,
                "error_cb": lambda error: self._on_client_error(error, name),
                # librdkafka's own log lines go through `logging`, not straight to stderr; its errors
                # are logged once, by _on_client_error.
                "logger": kafka_client_logger(errors_logged=True),
            }
        )

    def _adapt_fetching(self, seconds: float) -> None:
        """Once a second: the fetch pattern the last second's load asks for (see DEFAULT_LATENCY_RESOLUTION_MS)."""
        polls, records = (self._live_polls / seconds, self._live_records / seconds) if seconds > 0 else (0.0, 0.0)
        self._live_polls = self._live_records = 0
        # Serves the callbacks of the one holding no partition (a connection the broker closed, say).
        (self._busy if self._consumer is self._idle else self._idle).poll(0)
        if self._replay_windows:
            return  # replays on the busy consumer (see _apply_ownership)
        if self._consumer is self._idle and polls >= self._busy_from:
            self._go_busy("load", sorted(self._followed))
        elif self._consumer is not self._idle and records < self._idle_below:
            self._hand_over(self._idle, sorted(self._followed))
            log.info("idle: one fetch of %s held until a record is appended", TOPIC)

    def _note_prepared(self, events: list[TopicEvent], received_ms: int) -> None:
        """Idle: notes the transactions whose PREPARE_* record arrived on a partition without in-sync
        followers (see _nudge), forgets those whose next record arrived."""
        prepared = self._prepared
        lone_leaders = self._lone_leaders
        for event in events:
            if type(event) is TransactionLogRecords and not event.replay and event.partition in lone_leaders:
                for record in event.records:
                    value = record.value
                    if value is not None and value.state in PREPARE_STATES:
                        prepared[record.transactional_id] = (event.partition, received_ms + _NUDGE_FOR_MS)
                    elif prepared:
                        prepared.pop(record.transactional_id, None)

    def _nudge(self) -> None:
        """While a transaction's COMPLETE_* record is due, asks its partition's leader for the high
        watermark every latency_resolution_ms, with the consumer not fetching (another connection: the
        idle one's held fetch stops its own connection's requests). A broker completes the fetches
        that wait for an append made outside its request threads (the coordinator's COMPLETE_*
        appends, after the markers) only when it next finishes a request: on a quiet broker whose
        `__transaction_state` partition has one replica, the idle fetch waited for the next client's
        request (measured: 50 ms, a producer's pause), or its own 100 ms. A partition with in-sync
        followers needs none: the append completes when a follower's fetch (a request) moves the high
        watermark, which completes the waiting fetches in the same request. (A follower that leaves
        the ISR between two ownership reads costs its COMPLETE_* records up to _IDLE_WAIT_MS until
        the next read.)"""
        now_ms = self._now_ms()
        if now_ms < self._next_nudge_ms or self._consumer is not self._idle:
            if self._consumer is not self._idle:
                self._prepared.clear()
            return
        for tid, (_partition, until_ms) in list(self._prepared.items()):
            if until_ms <= now_ms:
                del self._prepared[tid]
        if self._prepared:
            self._nudge_partition = next(iter(self._prepared.values()))[0]
            self._errand("nudge")
        self._next_nudge_ms = now_ms + self._resolution_ms

    def _errand(self, what: str) -> None:
        """Has the consumer not fetching do `what` ("metadata": read the topic's leaders, "nudge": ask
        the partition's high watermark, see _nudge) from a thread of its own: a request's round trip
        on this thread delays the records of the poll (an errand still pending is not doubled)."""
        if self._errands is None:
            self._errands = threading.Thread(target=self._run_errands, name="topic-errands", daemon=True)
            self._errands.start()
        self._errands_wanted.add(what)
        self._errand_wanted.set()

    def _run_errands(self) -> None:
        while True:
            self._errand_wanted.wait()
            self._errand_wanted.clear()
            if self._closing:
                return
            other = self._busy if self._consumer is self._idle else self._idle
            for what in ("metadata", "nudge"):
                if what not in self._errands_wanted or self._closing:
                    continue
                self._errands_wanted.discard(what)
                try:
                    if what == "metadata":
                        other.list_topics(TOPIC, timeout=_METADATA_TIMEOUT_SECONDS)
                        self._knows_leaders.add(id(other))
                    else:
                        self._busy.get_watermark_offsets(
                            TopicPartition(TOPIC, self._nudge_partition), timeout=_NUDGE_TIMEOUT_SECONDS
                        )
                except KafkaException as e:
                    log.debug("%s of %s with the consumer not fetching failed: %s", what, TOPIC, e)

    def _go_busy(self, why: str, moving: list[int]) -> None:
        self._hand_over(self._busy, moving)
        log.info("busy (%s): fetching %s every %d ms", why, TOPIC, self._resolution_ms)

    def _hand_over(self, consumer: Consumer, partitions: list[int]) -> None:
        """Moves `partitions` (the assigned ones) to `consumer`, each from the next offset not yet taken:
        what the other consumer fetched but nobody took is dropped with its assignment and fetched again."""
        if id(consumer) not in self._knows_leaders:  # (the first time only: see _refresh_ownership)
            try:
                consumer.list_topics(TOPIC, timeout=_METADATA_TIMEOUT_SECONDS)
                self._knows_leaders.add(id(consumer))
            except KafkaException as e:
                log.debug("cannot read metadata of %s before fetching: %s", TOPIC, e)
        if partitions:
            self._consumer.incremental_unassign([TopicPartition(TOPIC, p) for p in partitions])
            consumer.incremental_assign(
                [TopicPartition(TOPIC, p, self._next_offset.get(p) or OFFSET_BEGINNING) for p in partitions]
            )
        self._consumer = consumer

    def _consume(self, events: list[TopicEvent], timeout: float, max_records: int) -> None:
        # Receipt time is what append latency is measured against, so never wait to fill a batch:
        # block for the first record only, then take what the client has already queued. The clock
        # is read once they are all taken, so no record is stamped before it was received.
        first = self._consumer.poll(timeout)
        if first is None:
            return
        messages: list[_Fetched] = [first, *self._consumer.consume(max_records - 1, 0)]  # type: ignore[list-item]  # because one without error() has its partition and offset (_Fetched)
        received_ms = self._now_ms()
        observed = _records_log.isEnabledFor(logging.DEBUG)
        followed = self._followed
        windows = self._replay_windows
        next_offset = self._next_offset
        epochs = self._epochs
        fenced = self._fenced
        created_since_ms = self._created_since_ms
        append = events.append
        errors = live = 0
        run: TransactionLogRecords | None = None  # the run of one partition's live records being filled
        for message in messages:
            error = message.error()
            if error is not None:
                errors += 1
                self._message_error(error)
                continue
            partition = message.partition()
            offset = message.offset()
            key = message.key()
            window = windows.get(partition)
            # A new topic's first record: live if appended after the exporter looked.
            if window is not None and created_since_ms and partition in created_since_ms:  # noqa: SIM102
                if message.timestamp()[1] >= created_since_ms.pop(partition):
                    self._end_replay(partition, events)  # appended after the exporter looked: live
                    window = None
                # else the partition holds records from before: the topic was there, whatever the
                # broker said (one starting up may say so), and this is history to replay
            if window is not None:  # replaying: a later record of the key replaces this one undecoded
                next_offset[partition] = offset + 1
                if key is None:
                    append(UndecodableRecord(partition, offset, DecodeError("bad_length", "null key")))
                else:
                    window[key] = message
                if offset + 1 >= followed[partition]:  # type: ignore[operator]  # because replaying, so its target is set
                    self._end_replay(partition, events)
                elif len(window) >= _REPLAY_WINDOW_IDS:
                    self._hand_over_replayed(partition, events)
                continue
            if partition not in followed or partition in fenced:
                continue  # fetched just before an unassign; or refetched once ownership is read
            epoch = message.leader_epoch()
            if epoch is not None and epoch > epochs.setdefault(partition, epoch):
                self._fence(partition, offset, epoch)
                run = None
                continue
            next_offset[partition] = offset + 1
            try:
                if key is None:
                    raise DecodeError("bad_length", "null key")
                # The model never reads TransactionPartitions: bounds-checked, not built.
                record = decode_record(key, message.value(), offset, message.timestamp()[1], False)
            except DecodeError as e:
                append(UndecodableRecord(partition, offset, e))
                run = None
            else:
                if run is None or run.partition != partition:
                    run = TransactionLogRecords(partition, [], received_ms, False)
                    append(run)
                run.records.append(record)
                live += 1
                if observed:
                    _log_observed(partition, record, received_ms)
        if live:
            self._live_polls += 1
            self._live_records += live
            if self._consumer is self._idle:
                self._note_prepared(events, received_ms)
        if errors < len(messages):
            self._access_error = None

    def _fence(self, partition: int, offset: int, epoch: int) -> None:
        log.info(
            "%s-%d: offset %d was appended by the leader of epoch %d (the last record's: %d); it is taken "
            "once ownership is read again, if this exporter's broker leads the partition still",
            TOPIC,
            partition,
            offset,
            epoch,
            self._epochs[partition],
        )
        self._fenced[partition] = epoch
        self._next_refresh = 0.0

    def _message_error(self, error: KafkaError) -> None:
        if error.code() in _ACCESS_ERRORS:
            self._denied(error)
        elif error.code() == KafkaError.GROUP_AUTHORIZATION_FAILED:
            log.debug("consumer error (the unused group id has no ACL, harmless): %s", error)
        elif error.code() != KafkaError._PARTITION_EOF:
            log.warning("consumer error: %s", error)

    def _hand_over_replayed(self, partition: int, events: list[TopicEvent]) -> None:
        """Decodes the replay window's last records and hands them to the model as one replay run,
        in offset order; the window starts again empty."""
        window = self._replay_windows[partition]
        if not window:
            return
        self._replay_windows[partition] = {}
        records = []
        epoch = self._epochs.get(partition, -1)
        # Every record made here outlives the loop, so the cyclic collector would run over and over
        # through the growing list (about 40% of the hand-over's time) to free nothing: none of it
        # has cycles. It is paused for the loop only.
        collecting = gc.isenabled()
        gc.disable()
        try:
            for key, message in window.items():
                offset = message.offset()
                appended_in = message.leader_epoch()
                if appended_in is not None and appended_in > epoch:
                    epoch = appended_in
                try:
                    records.append(decode_record(key, message.value(), offset, message.timestamp()[1], False))
                except DecodeError as e:
                    events.append(UndecodableRecord(partition, offset, e))
        finally:
            if collecting:
                gc.enable()
        if epoch >= 0:
            self._epochs[partition] = epoch
        if records:
            records.sort(key=_BY_OFFSET)
            events.append(TransactionLogRecords(partition, records, self._now_ms(), True))

    def _end_replay(self, partition: int, events: list[TopicEvent]) -> None:
        self._hand_over_replayed(partition, events)
        del self._replay_windows[partition]
        self._created_since_ms.pop(partition, None)
        self._followed[partition] = None
        events.append(PartitionReplayed(partition))

    def _refresh_ownership(self, events: list[TopicEvent]) -> None:
        try:
            metadata = self._consumer.list_topics(TOPIC, timeout=_METADATA_TIMEOUT_SECONDS)
        except KafkaException as e:
            if e.args[0].code() in _ACCESS_ERRORS:
                self._denied(e.args[0])
            else:
                self._outage_log.warning(
                    "metadata", f"cannot read metadata of {TOPIC} from {self._bootstrap_servers}: {e}"
                )
            self._set_up(False, events)
            return
        self._set_up(True, events)
        self._knows_leaders.add(id(self._consumer))
        # The consumer not fetching learns the topic's leaders too: one assigned partitions whose
        # leaders it does not know waits a second (librdkafka's retry) before its first fetch.
        self._errand("metadata")
        topic = metadata.topics.get(TOPIC)
        error = None if topic is None else topic.error
        if topic is None or (error is not None and error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART):
            # The topic is created on the first transaction: nothing to follow yet, not an outage.
            if not self._topic_seen and self._topic_absent_since_ms is None:
                # (Not after it was seen: a restarting broker may answer so for a while.)
                self._topic_absent_since_ms = self._now_ms()
            self._next_refresh = self._clock() + _RETRY_SECONDS
            self._complete_view = True
            self._waiting = self._apply_ownership(set(), events)
            return
        if error is not None and error.code() in _ACCESS_ERRORS:
            self._denied(error)
            return
        leaderless = {p for p, pm in topic.partitions.items() if pm.leader < 0}
        if topic.partitions:  # (a topic being created may come without them)
            self._note_created(topic.partitions)
        if leaderless:
            self._next_refresh = min(self._next_refresh, self._clock() + _RETRY_SECONDS)
        if error is not None or not metadata.brokers or (leaderless and not self._complete_view):
            # A cluster still starting (no brokers, no leaders, LEADER_NOT_AVAILABLE): ownership is
            # not known yet, so nothing changes until it is; ask again soon.
            log.info(
                "ownership of %s not known yet (%s); asking again", TOPIC, error or f"leaderless {sorted(leaderless)}"
            )
            self._next_refresh = self._clock() + _RETRY_SECONDS
            return
        self._complete_view = True
        if self._all_partitions:
            owned = set(topic.partitions) - leaderless
        else:
            if self._broker_id is None:
                self._broker_id = self._discover_broker_id(metadata)
            owned = {p for p, pm in topic.partitions.items() if pm.leader == self._broker_id}
        self._lone_leaders = {p for p, pm in topic.partitions.items() if len(pm.isrs) <= 1}
        for partition in set(self._created_since_ms) - owned - leaderless:
            # Led by another broker: its own exporter sees what its coordinator appends.
            del self._created_since_ms[partition]
        self._waiting = self._apply_ownership(owned, events)

    def _note_created(self, partitions: dict) -> None:
        """The topic exists: if this exporter saw it absent first, nothing in it predates that."""
        self._topic_seen = True
        if self._topic_absent_since_ms is not None:
            self._created_since_ms = dict.fromkeys(partitions, self._topic_absent_since_ms)
            self._topic_absent_since_ms = None

    def _now_ms(self) -> int:
        return int(self._clock() * 1000)

    def _discover_broker_id(self, metadata) -> int:
        """The broker this exporter runs beside, when the cluster makes it unambiguous."""
        brokers = metadata.brokers
        if len(brokers) == 1:
            return next(iter(brokers))
        wanted = {address.strip() for address in self._bootstrap_servers.split(",")}
        matches = {b.id for b in brokers.values() if f"{b.host}:{b.port}" in wanted}
        if len(matches) == 1:
            return matches.pop()
        raise OwnershipError(
            f"cannot tell which of brokers {sorted(brokers)} this exporter runs beside from "
            f"bootstrap servers {self._bootstrap_servers!r}: pass --broker-id N, or --all-partitions"
        )

    def _apply_ownership(self, owned: set[int], events: list[TopicEvent]) -> set[int]:
        """Follows `owned` from now on; returns the owned partitions that could not be assigned yet."""
        gone = sorted(set(self._followed) - owned)
        new = sorted(owned - set(self._followed))
        if gone:
            self._consumer.incremental_unassign([TopicPartition(TOPIC, p) for p in gone])
            for partition in gone:
                del self._followed[partition]
                self._replay_windows.pop(partition, None)
                self._created_since_ms.pop(partition, None)
                self._next_offset.pop(partition, None)
                self._epochs.pop(partition, None)
                self._fenced.pop(partition, None)
                events.append(PartitionRevoked(partition))
            log.info("stopped following %s partitions %s", TOPIC, gone)
        assigned = []
        waiting = set()
        for partition in new:
            try:
                _, high = self._consumer.get_watermark_offsets(
                    TopicPartition(TOPIC, partition), timeout=_METADATA_TIMEOUT_SECONDS
                )
            except KafkaException as e:
                # A leader moving or still loading: take the partition on the next refresh.
                log.info("not following %s-%d yet: %s", TOPIC, partition, e)
                self._next_refresh = min(self._next_refresh, self._clock() + _RETRY_SECONDS)
                waiting.add(partition)
                continue
            assigned.append(partition)
            events.append(PartitionAssigned(partition))
            self._next_offset[partition] = 0
            self._epochs.pop(partition, None)
            if high <= 0:
                self._followed[partition] = None
                self._created_since_ms.pop(partition, None)  # empty: live from its first record anyway
                events.append(PartitionReplayed(partition))
            else:
                self._followed[partition] = high
                self._replay_windows[partition] = {}
        if assigned:
            if self._consumer is self._idle and any(self._followed[p] is not None for p in assigned):
                self._go_busy("replay", sorted(set(self._followed) - set(assigned)))
            self._consumer.incremental_assign([TopicPartition(TOPIC, p, OFFSET_BEGINNING) for p in assigned])
            log.info("following %s partitions %s", TOPIC, assigned)
        if self._fenced:
            # Still led by this exporter's broker, in a newer epoch: refetched from the fenced record
            # (the partition's next offset, which the fence did not move).
            fenced = sorted(self._fenced)
            self._epochs.update(self._fenced)
            self._fenced.clear()
            self._hand_over(self._consumer, fenced)
            log.info("%s partitions %s: led by this exporter's broker in a newer epoch; refetched", TOPIC, fenced)
        return waiting

    def _report_progress(self, events: list[TopicEvent]) -> None:
        for partition, target in self._followed.items():
            # Cached: the high watermark the last fetch response carried, no request sent.
            _, high = self._consumer.get_watermark_offsets(TopicPartition(TOPIC, partition), cached=True)
            position = self._next_offset.get(partition, 0)
            if high >= 0:
                events.append(PartitionProgress(partition, position, high))
            if target is not None and high >= 0 and position >= high:
                # Replay done though the last offset below the watermark never came (compacted away).
                self._end_replay(partition, events)

    def _set_up(self, up: bool, events: list[TopicEvent]) -> None:
        if up != self._up:
            self._up = up
            events.append(SourceStatus(up))
            if up:
                self._outage_log.over()
                log.info("source up: reading %s from %s", TOPIC, self._bootstrap_servers)

    def _denied(self, error: KafkaError) -> None:
        if self._access_error is None:
            log.error(
                "Kafka refuses access to %s: %s. The exporter needs Describe and Read on the topic "
                "(see deploy/README.md, 'Kafka credentials and least privilege'); it stays up and not ready until then.",
                TOPIC,
                f"{error.name()}: {error.str()}",
            )
        self._access_error = f"access denied by Kafka: {error.name()}: {error.str()}"

    def _on_client_error(self, error: KafkaError, consumer: str = "idle") -> None:
        # Runs inside poll/consume on this thread; the next poll turns it into a SourceStatus event.
        if consumer != ("busy" if self.busy else "idle"):
            # The consumer holding no partition: its idle connection closed by the broker, say. What
            # matters about Kafka is told by the one that fetches.
            log.debug("kafka client (%s, not fetching): %s: %s", consumer, error.name(), error.str())
            return
        message = f"kafka client: {error.name()}: {_CONNECT_TIME.sub('', error.str())}"
        if error.code() in _ACCESS_ERRORS:
            self._denied(error)
        elif error.code() == KafkaError._ALL_BROKERS_DOWN:
            self._client_down = True
            self._outage_log.warning(error.name(), message)
            return
        elif error.code() in _CONNECTION_ERRORS:
            self._next_refresh = 0.0
            self._outage_log.warning(error.name(), message)
            return
        log.warning("%s", message)


class _OutageLog:
    """While Kafka does not answer, each kind of connection failure (a metadata read, a client error
    by name) is logged once, then at a slowing rate: after _OUTAGE_FIRST_REPORT_SECONDS, twice that,
    and so on up to _OUTAGE_MAX_REPORT_SECONDS, each line counting the failures it stands for; over()
    (the source up again) starts afresh."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._kinds: dict[str, _Reported] = {}

    def warning(self, kind: str, message: str) -> None:
        now = self._clock()
        reported = self._kinds.get(kind)
        if reported is None:
            reported = self._kinds[kind] = _Reported(now)
        elif now < reported.at + reported.interval:
            reported.unlogged += 1
            return
        else:
            message += f" ({reported.unlogged} more failures in the last {now - reported.at:.0f} s)"
            reported.at, reported.unlogged = now, 0
            reported.interval = min(reported.interval * 2, _OUTAGE_MAX_REPORT_SECONDS)
        log.warning("%s (while it lasts, the next report in %.0f s)", message, reported.interval)

    def over(self) -> None:
        self._kinds.clear()


_OUTAGE_FIRST_REPORT_SECONDS = 10.0
_OUTAGE_MAX_REPORT_SECONDS = 600.0


@dataclass(slots=True)
class _Reported:
    """One kind of failure: when it was last logged, the wait before the next line, failures since."""

    at: float
    interval: float = _OUTAGE_FIRST_REPORT_SECONDS
    unlogged: int = 0

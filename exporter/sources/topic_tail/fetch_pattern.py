"""The tail's fetch pattern: its clients of the followed partitions (idle and busy, and fresh while
the coordinator's own clock times the appends), the one assigned them, their settings, and the
errands (leaders, nudges) one not fetching runs on a thread of its own."""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Collection, Iterator, Mapping
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, TopicPartition

from exporter import defaults
from exporter.codec.states import PREPARE_STATES
from exporter.contracts.events import TopicEvent, TransactionLogRecords
from exporter.logs import kafka_client_logger
from exporter.sources.topic_tail.topic import METADATA_TIMEOUT_SECONDS, TOPIC, latest_offsets, log

# Settings the source owns; users' Kafka settings may not override them.
OWNED_SETTINGS = {
    "group.id": "txn-exporter",
    "enable.auto.commit": False,
    "enable.auto.offset.store": False,
    # The topic is not transactional; read_uncommitted avoids waiting on an LSO that never lags.
    "isolation.level": "read_uncommitted",
    # A position below the log start (records removed before they were read) resumes at the oldest
    # record left, as OFFSET_BEGINNING would, never at the end (librdkafka's default), which would
    # skip records: positions are handed over as numbers (see _hand_over).
    "auto.offset.reset": "earliest",
}
# Client settings users may override. librdkafka (2.1+) stops fetching a partition whose queue holds
# over queued.min.messages for fetch.queue.backoff.ms, 1 s by default, which idled a replay half the
# time (1M records took 8.8 s, 4.5 s at 10 ms:
# docs/benchmarks.md#live-exporter-throughput-against-raw-consume-replay-freshness).
# The queue is bounded for the whole consumer (librdkafka's 100k messages and 64 MiB let a replay's
# memory grow with the backlog); a fetch response adds at most fetch.max.bytes beyond it.
# A broker that is down costs next to nothing (issue 31): connected to every broker (not sparse), the
# consumers retry it on their backoff alone, 0.8 attempts a second for all the exporter's clients from
# 10 s after the stop, where sparse ones connected at once for every request that needs any connection
# (39 a second: docs/transactions-view.md). The price: each consumer connects to every broker, and the
# first reconnect after a dropped connection waits 1.5-3 s. KIP-899's rebootstrap
# (metadata.recovery.strategy) stays on: without it a client told of no broker by one starting up keeps none.
DEFAULT_SETTINGS = {
    "fetch.queue.backoff.ms": 10,
    "queued.min.messages": 10_000,
    "queued.max.messages.kbytes": 8192,
    "fetch.max.bytes": 8 << 20,
    "enable.sparse.connections": False,
    "reconnect.backoff.ms": 2000,
    "reconnect.backoff.max.ms": 4000,
}
# The fetch pattern. A sidecar's cost is mostly its fetches, in the client and in the broker serving
# them: each names every followed partition (librdkafka sends no KIP-227 fetch sessions), however few
# records it brings (docs/benchmarks.md#what-the-sidecar-costs-beside-a-real-broker). The append-latency
# bound's resolution (latency_resolution_ms) is a stated setting: a record may be gathered with others
# for up to that long. Two consumers of the same partitions, one assigned them at a time:
# - idle: one fetch held until a byte is appended (fetch.min.bytes 1) or for idle_wait_ms: a record
#   is delivered at once, 2 fetches a second when nothing happens (10 at the finest resolutions);
# - busy: a fetch held latency_resolution_ms (a min.bytes never reached): at most
#   1000/latency_resolution_ms fetches a second whatever the load, so a record waits at most the
#   resolution (docs/metrics.md#how-append-latency-is-measured). Busy during a replay and once the idle
#   consumer's deliveries a second reach the busy one's fetches a second; idle again, nothing replaying,
#   below IDLE_BELOW of those (where a fetch per record costs less; the band between stops flapping).
#   Not one consumer pausing its partitions for the resolution, nor librdkafka's queue backoff
#   (queued.min.messages 1): each puts partitions back one by one, and librdkafka's next fetch, with the
#   first alone (one in flight per broker), held the others up to fetch.wait.max.ms (their p99 about
#   that), as whenever the queue's limits stop a replay: hence replays on the busy, briefly held fetch.
#   Idle RETIRE_BUSY_AFTER_SECONDS without a live record, the busy client is closed (its threads cost
#   as much as the idle fetch: see fresh, below) and made again at the next live record, a second or
#   more before the load can move the partitions to it (adapt, once a second).
# - fresh: while the coordinator's own clock times the appends (exporter.model.append_clock), the
#   fetches time nothing: one fetch held half the freshness (a min.bytes never reached), about two a
#   second at any load, no nudges, no high-watermark errands; replays too. Made at its first use (never
#   without --broker-log). The busy one, which it stands in for, is closed meanwhile (an idle
#   librdkafka client's threads wake once a second each: 5 beside a 3-node cluster) and made again on
#   the way back, before the records of that moment need it.
BUSY_MIN_BYTES = 1 << 20
IDLE_BELOW = 0.3
# How long a transaction's COMPLETE_* record is waited for with nudges after its PREPARE_*, at least
# (its markers' round trip; a coordinator moving away takes longer, and is not waited for).
NUDGE_FOR_MS = 200
RETIRE_BUSY_AFTER_SECONDS = 30.0
QUIET_POLL_SECONDS = 1.0


def idle_wait_ms(resolution_ms: int) -> int:
    """How long the idle fetch is held: five resolutions, from 100 ms to 500 ms. A record appended in
    a request (EMPTY, ONGOING, PREPARE_*: the producer's and the partition leaders' requests) ends the
    held fetch at once, whatever the hold; a COMPLETE_* is nudged (see FetchPattern.nudge); the hold
    bounds only the rest, appended outside the broker's request threads with no nudge (a COMPLETE_*
    later than the nudges' window, a timed-out transaction's PREPARE_ABORT), and sets what an idle
    exporter costs: a fetch naming every followed partition per hold (docs/benchmarks.md, "The bill
    in place")."""
    return min(max(5 * resolution_ms, 100), 500)


def idle_settings(resolution_ms: int) -> dict[str, int]:
    return {"fetch.min.bytes": 1, "fetch.wait.max.ms": idle_wait_ms(resolution_ms)}


def nudge_for_ms(resolution_ms: int) -> int:
    """How long a COMPLETE_* is nudged for after its PREPARE_*: two idle holds, at least NUDGE_FOR_MS,
    so a slow round of markers is timed to the resolution for as long as the hold would add most."""
    return max(NUDGE_FOR_MS, 2 * idle_wait_ms(resolution_ms))


_NUDGE_TIMEOUT_SECONDS = 1.0


class FetchPattern:
    """The idle and the busy client of the followed partitions; `consumer` is the one assigned them."""

    def __init__(
        self,
        bootstrap_servers: str,
        kafka_settings: dict[str, str],
        consumer_factory: Callable[[dict[str, Any]], Consumer],
        latency_resolution_ms: int,
        on_error: Callable[[KafkaError], None],
        clock: Callable[[], float] = time.time,
        freshness_ms: int = int(defaults.FRESHNESS_SECONDS * 1000),
    ) -> None:
        """`on_error`: what the client fetching reports (librdkafka's error_cb), called inside its
        poll or consume; the other's errors are logged at DEBUG only."""
        self._bootstrap_servers = bootstrap_servers
        self._kafka_settings = kafka_settings
        self._consumer_factory = consumer_factory
        self._on_error = on_error
        self._clock = clock
        self.resolution_ms = latency_resolution_ms
        self._busy_from = 1000 / latency_resolution_ms  # the busy consumer's fetches a second, at most
        self._idle_below = IDLE_BELOW * self._busy_from
        self._nudge_for_ms = nudge_for_ms(latency_resolution_ms)
        self._idle = self._make_consumer("idle", idle_settings(latency_resolution_ms))
        # Made now, not at the first load: a new client's first fetch waits for its connections and
        # metadata, which the records of that moment would wait for too. None while fetching for
        # freshness (see the modes, above).
        self._busy_settings = {"fetch.min.bytes": BUSY_MIN_BYTES, "fetch.wait.max.ms": latency_resolution_ms}
        self._busy: Consumer | None = self._make_consumer("busy", self._busy_settings)
        self._retiring: list[Consumer] = []  # closed by the errands' thread (see _errand)
        self._fresh_wait_ms = max(1, freshness_ms // 2)
        self._fresh: Consumer | None = None
        self.consumer = self._idle  # the one assigned the followed partitions
        self._fetching = "idle"  # its name
        # Idle: transactions whose COMPLETE_* record is due -> (partition, until when it is waited
        # for, ms); see nudge.
        self._prepared: dict[str, tuple[int, int]] = {}
        self._next_nudge_ms = 0
        self._nudge_partition = 0
        # The errands of the consumer not fetching, on a thread of their own (see _errand).
        self._errands: threading.Thread | None = None
        self._errand_wanted = threading.Event()
        self._errands_wanted: set[str] = set()
        self._closing = False
        self._knows_leaders: set[int] = set()  # consumers (by id) that read the topic's metadata
        # The replaying partitions' high watermarks as their leaders answered them, (partition, high,
        # when, ms): appended on the errands' thread, taken on the poll's (see ask_high_watermarks).
        self._answered: deque[tuple[int, int, int]] = deque()
        self._asked: list[int] = []
        self._next_ask_ms = 0
        # Since the last adapt(): polls that brought live records, and those records.
        self._live_polls = 0
        self._live_records = 0
        self._quiet_seconds = 0.0  # idle, since the last live record

    @property
    def busy(self) -> bool:
        """Whether the followed partitions are fetched by the busy consumer (every latency_resolution_ms)."""
        return self.consumer is not self._idle and not self.fresh

    @property
    def fresh(self) -> bool:
        """Whether they are fetched for freshness only (the coordinator's clock times the appends)."""
        return self._fresh is not None and self.consumer is self._fresh

    def fetch_for_freshness(self, on: bool, followed: Collection[int], positions: Mapping[int, int]) -> None:
        """Moves the followed partitions to the fresh consumer (`on`), or back to the idle one, which
        adapt() moves on to the busy one under load."""
        if on == self.fresh:
            return
        if on:
            if self._fresh is None:
                self._fresh = self._make_consumer(
                    "fresh", {"fetch.min.bytes": BUSY_MIN_BYTES, "fetch.wait.max.ms": self._fresh_wait_ms}
                )
            self._prepared.clear()
            self._hand_over(self._fresh, sorted(followed), positions, "fresh")
            log.info(
                "fresh: fetching %s every %d ms at most (the coordinator's clock times the appends)",
                TOPIC,
                self._fresh_wait_ms,
            )
            if self._busy is not None:
                self._retire_busy()
        else:
            self._hand_over(self._idle, sorted(followed), positions, "idle")
            if self._busy is None:
                self._busy = self._make_consumer("busy", self._busy_settings)
                self._errand("metadata")  # the consumer not fetching is the busy one again
            log.info("idle: one fetch of %s held until a record is appended (the fetch clock times the appends)", TOPIC)

    def wait(self, timeout: float) -> float:
        """How long a poll may wait for its first record: no longer than the resolution while a
        COMPLETE_* record is due (see nudge); fetching for freshness, the freshness, and idle,
        QUIET_POLL_SECONDS (records end the wait, and nothing else is due sooner: the progress
        reports and checks run once a second). confluent-kafka wakes every 200 ms inside a poll to
        look for signals, so a longer poll saves only the loop's turns: idle, 5 wake-ups a second
        and 1 turn (a poll as long as the held fetch woke 6 times for 2 turns)."""
        if self.fresh:
            return max(timeout, 2 * self._fresh_wait_ms / 1000)
        if self._prepared:
            return min(timeout, self.resolution_ms / 1000)
        return max(timeout, QUIET_POLL_SECONDS) if self.consumer is self._idle else timeout

    def close(self) -> bool:
        """Closes both clients, once the errands' thread has left its request; returns False, leaving
        them open, if it has not within its longest request: closing a client that another thread is
        inside of crashes the process."""
        if self._errands is not None:
            self._closing = True
            self._errand_wanted.set()
            self._errands.join(METADATA_TIMEOUT_SECONDS + 1)
            if self._errands.is_alive():
                return False
        for consumer in (self._idle, self._busy, self._fresh, *self._retiring):
            if consumer is not None:
                consumer.close()
        return True

    def _make_consumer(self, name: str, fetching: dict[str, Any]) -> Consumer:
        return self._consumer_factory(
            {
                **DEFAULT_SETTINGS,
                **self._kafka_settings,
                **OWNED_SETTINGS,
                **fetching,
                "bootstrap.servers": self._bootstrap_servers,
                "error_cb": lambda error: self._client_error(error, name),
                # librdkafka's own log lines go through `logging`, not straight to stderr; its errors
                # are logged once, by the tail's on_error.
                "logger": kafka_client_logger(errors_logged=True),
            }
        )

    def _client_error(self, error: KafkaError, consumer: str) -> None:
        if consumer != self._fetching:
            # The consumer holding no partition: its idle connection closed by the broker, say. What
            # matters about Kafka is told by the one that fetches.
            log.debug("kafka client (%s, not fetching): %s: %s", consumer, error.name(), error.str())
            return
        self._on_error(error)

    def adapt(self, seconds: float, followed: Collection[int], replaying: bool, positions: Mapping[int, int]) -> None:
        """Once a second: the fetch pattern the last `seconds`' load asks for (see the comment over
        the modes, above); `positions`: the followed partitions' next offsets."""
        polls, records = (self._live_polls / seconds, self._live_records / seconds) if seconds > 0 else (0.0, 0.0)
        self._live_polls = self._live_records = 0
        # Serves the callbacks of those holding no partition (a connection the broker closed, say).
        for consumer in (self._idle, self._busy, self._fresh):
            if consumer is not None and consumer is not self.consumer:
                consumer.poll(0)
        if replaying or self.fresh:
            self._quiet_seconds = 0.0
            return  # replays on the busy consumer (see go_busy); fresh until the clock changes
        self._quiet_seconds = self._quiet_seconds + seconds if records == 0 and self.consumer is self._idle else 0.0
        if self._quiet_seconds >= RETIRE_BUSY_AFTER_SECONDS and self._busy is not None and not self._prepared:
            self._retire_busy()
            log.debug("idle: the busy client closed, %d s without a record", self._quiet_seconds)
        if self.consumer is self._idle and polls >= self._busy_from:
            self.go_busy("load", sorted(followed), positions)
        elif self.consumer is not self._idle and records < self._idle_below:
            self._hand_over(self._idle, sorted(followed), positions, "idle")
            log.info("idle: one fetch of %s held until a record is appended", TOPIC)

    def delivered(self, events: list[TopicEvent], live: int, received_ms: int) -> None:
        """A poll brought `live` (> 0) live records, in `events`. Idle: notes the transactions whose
        PREPARE_* record arrived (see nudge), forgets those whose next record arrived."""
        self._live_polls += 1
        self._live_records += live
        if self.consumer is not self._idle:
            return
        if self._busy is None:  # (retired while idle) ready before the load can ask for it
            self._busy = self._make_consumer("busy", self._busy_settings)
            self._errand("metadata")
        prepared = self._prepared
        for event in events:
            if type(event) is TransactionLogRecords and not event.replay:
                for record in event.records:
                    value = record.value
                    if value is not None and value.state in PREPARE_STATES:
                        prepared[record.transactional_id] = (event.partition, received_ms + self._nudge_for_ms)
                    elif prepared:
                        prepared.pop(record.transactional_id, None)

    def nudge(self) -> None:
        """While a transaction's COMPLETE_* record is due, asks its partition's leader for the high
        watermark every latency_resolution_ms, with the consumer not fetching (another connection: the
        idle one's held fetch stops its own connection's requests). A broker hands a waiting fetch (its
        followers' too, and so the high watermark) an append made outside its request threads, as the
        coordinator's COMPLETE_* after the markers, only when it next finishes a request: unnudged, in a
        3-node cluster at 10 transactions a second a broker, COMPLETE_COMMIT's bound read p90 101 ms, the
        idle fetch's whole hold (docs/benchmarks.md#the-idle-fetchs-tail-in-a-replicated-cluster)."""
        if not self._prepared:
            return
        now_ms = int(self._clock() * 1000)
        if now_ms < self._next_nudge_ms or self.consumer is not self._idle:
            if self.consumer is not self._idle:
                self._prepared.clear()
            return
        for tid, (_partition, until_ms) in list(self._prepared.items()):
            if until_ms <= now_ms:
                del self._prepared[tid]
        if self._prepared:
            self._nudge_partition = next(iter(self._prepared.values()))[0]
            self._errand("nudge")
        self._next_nudge_ms = now_ms + self.resolution_ms

    def _retire_busy(self) -> None:
        """Closes the busy client on the errands' thread, which may be inside a request of its (a nudge)."""
        assert self._busy is not None
        self._knows_leaders.discard(id(self._busy))
        self._retiring.append(self._busy)
        self._busy = None
        self._errand("retire")

    def ask_high_watermarks(self, replaying: Collection[int]) -> None:
        """At most every latency_resolution_ms, has the consumer not fetching ask the `replaying`
        partitions' leaders for their high watermarks (an errand; the answers come out of
        answered_high_watermarks): marks for what the coordinator appends during a replay, fresher than
        the replay's own fetch responses give (TransactionLogTail._note_high_watermarks)."""
        now_ms = int(self._clock() * 1000)
        if now_ms < self._next_ask_ms:
            return
        self._next_ask_ms = now_ms + self.resolution_ms
        self._asked = sorted(replaying)
        self._errand("watermarks")

    def answered_high_watermarks(self) -> Iterator[tuple[int, int, int]]:
        """The answers to ask_high_watermarks since the last call, oldest first: (partition, high
        watermark, when it was answered, ms)."""
        answered = self._answered
        while answered:
            yield answered.popleft()

    def leaders_read(self) -> None:
        """The consumer fetching read the topic's metadata. The one not fetching learns the topic's
        leaders too: one assigned partitions whose leaders it does not know waits a second
        (librdkafka's retry) before its first fetch."""
        self._knows_leaders.add(id(self.consumer))
        self._errand("metadata")

    def _errand(self, what: str) -> None:
        """Has the consumer not fetching do `what` ("metadata": read the topic's leaders, "nudge": ask
        the partition's high watermark, see nudge; "watermarks": the replaying partitions', see
        ask_high_watermarks; "retire": close the clients set aside, see fetch_for_freshness) from a
        thread of its own: a request's round trip on the poll's thread delays the records of the
        poll, and a stalled broker would hold them for its timeout (an errand still pending is not
        doubled)."""
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
            busy = self._busy
            # Never the consumer fetching: confluent-kafka lets one call into a client at a time, and
            # another thread's waits out the poll in 1 ms sleeps (0.016 cores, measured). None: the
            # busy one retired while idle (its errands wait for it to be made again).
            other = busy if self.consumer is self._idle else self._idle
            for what in ("metadata", "nudge", "watermarks", "retire"):
                if what not in self._errands_wanted or self._closing:
                    continue
                self._errands_wanted.discard(what)
                try:
                    if what == "retire":
                        while self._retiring:
                            self._retiring.pop().close()
                    elif other is None:
                        continue  # (nudges too: the record that asks for them makes it again)
                    elif what == "metadata":
                        other.list_topics(TOPIC, timeout=METADATA_TIMEOUT_SECONDS)
                        self._knows_leaders.add(id(other))
                    elif what == "nudge":
                        if other is busy:  # (else fetching for freshness since it was asked)
                            other.get_watermark_offsets(
                                TopicPartition(TOPIC, self._nudge_partition), timeout=_NUDGE_TIMEOUT_SECONDS
                            )
                    else:
                        listed = other.offsets_for_times(latest_offsets(self._asked), timeout=_NUDGE_TIMEOUT_SECONDS)
                        at_ms = int(self._clock() * 1000)
                        self._answered.extend((a.partition, a.offset, at_ms) for a in listed if a.error is None)
                except KafkaException as e:
                    log.debug("%s of %s with the consumer not fetching failed: %s", what, TOPIC, e)

    def go_busy(self, why: str, moving: list[int], positions: Mapping[int, int]) -> None:
        """Moves the assigned partitions `moving` to the busy consumer (see _hand_over)."""
        if self._busy is None:  # (fetching for freshness, where nothing calls this)
            self._busy = self._make_consumer("busy", self._busy_settings)
        self._hand_over(self._busy, moving, positions, "busy")
        log.info("busy (%s): fetching %s every %d ms", why, TOPIC, self.resolution_ms)

    def refetch(self, partitions: list[int], positions: Mapping[int, int]) -> None:
        """Has the consumer fetching fetch the assigned `partitions` again, from their next offsets."""
        self._hand_over(self.consumer, partitions, positions, self._fetching)

    def _hand_over(self, consumer: Consumer, partitions: list[int], positions: Mapping[int, int], name: str) -> None:
        """Moves `partitions` (the assigned ones) to `consumer`, each from the next offset not yet taken
        (`positions`): what the other consumer fetched but nobody took is dropped with its assignment
        and fetched again."""
        if id(consumer) not in self._knows_leaders:  # (the first time only: see leaders_read)
            try:
                consumer.list_topics(TOPIC, timeout=METADATA_TIMEOUT_SECONDS)
                self._knows_leaders.add(id(consumer))
            except KafkaException as e:
                log.debug("cannot read metadata of %s before fetching: %s", TOPIC, e)
        if partitions:
            self.consumer.incremental_unassign([TopicPartition(TOPIC, p) for p in partitions])
            # Offset 0 as a number, not OFFSET_BEGINNING: a partition assigned a logical offset is
            # looked up first (ListOffsets), and one handed on before that answer came kept being
            # fetched by the consumer it left (librdkafka 2.16: an idle exporter's empty partitions,
            # moved idle -> fresh at start, fetched 10 times a second besides the fresh fetch's 2).
            consumer.incremental_assign(
                [TopicPartition(TOPIC, p, positions.get(p, OFFSET_BEGINNING)) for p in partitions]
            )
        self.consumer = consumer
        self._fetching = name

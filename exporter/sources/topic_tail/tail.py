"""TransactionLogTail: the polls of the live source, and the coordination of its parts (the package's
docstring says which part holds what)."""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Collection
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, TopicPartition

from exporter import defaults
from exporter.codec import DecodeError, decode_record
from exporter.contracts.events import (
    PartitionAssigned,
    PartitionDraining,
    PartitionProgress,
    PartitionReplayed,
    PartitionRevoked,
    SourceStatus,
    TopicEvent,
    TransactionLogRecords,
    UndecodableRecord,
)
from exporter.sources.topic_tail.catch_up import CatchUp
from exporter.sources.topic_tail.counting import CountingRule
from exporter.sources.topic_tail.drains import Drains
from exporter.sources.topic_tail.fetch_pattern import QUIET_POLL_SECONDS, FetchPattern
from exporter.sources.topic_tail.outage_log import OutageLog, in_plain_words
from exporter.sources.topic_tail.ownership import Ownership
from exporter.sources.topic_tail.replay import Replay
from exporter.sources.topic_tail.topic import (
    METADATA_TIMEOUT_SECONDS,
    TOPIC,
    Fetched,
    latest_offsets,
    log,
    log_observed,
    records_log,
)

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
_PROGRESS_INTERVAL_SECONDS = 1.0


class TransactionLogTail:
    def __init__(
        self,
        bootstrap_servers: str,
        *,
        broker_id: int | None = None,
        all_partitions: bool = False,
        metadata_refresh_seconds: float = defaults.METADATA_REFRESH_SECONDS,
        kafka_settings: dict[str, str] | None = None,
        clock: Callable[[], float] = time.time,
        consumer_factory: Callable[[dict[str, Any]], Consumer] = Consumer,
        latency_resolution_ms: int = defaults.LATENCY_RESOLUTION_MS,
        freshness_ms: int = int(defaults.FRESHNESS_SECONDS * 1000),
    ) -> None:
        """`consumer_factory` makes the clients from their settings (confluent-kafka's Consumer; tests
        pass one of their own). `latency_resolution_ms`: how long a record may wait before it reaches the
        exporter, which under load fetches at most this often (see fetch_pattern.py); `freshness_ms`: how
        long, while the coordinator's clock times the appends (fetch_for_freshness)."""
        if latency_resolution_ms < 1:
            raise ValueError("latency_resolution_ms must be at least 1")
        self._bootstrap_servers = bootstrap_servers
        self._clock = clock
        self._fetch = FetchPattern(
            bootstrap_servers,
            kafka_settings or {},
            consumer_factory,
            latency_resolution_ms,
            self._on_client_error,
            clock,
            freshness_ms,
        )
        self._ownership = Ownership(
            bootstrap_servers,
            broker_id=broker_id,
            all_partitions=all_partitions,
            refresh_seconds=metadata_refresh_seconds,
            clock=clock,
        )
        self._replay = Replay(clock)
        self._counting = CountingRule(every_epoch=all_partitions)
        self._started_ms = int(clock() * 1000)
        # The partitions this exporter's broker led at the first complete view of ownership, not yet
        # assigned: their floor is the high watermark their leader answers (what predates the start).
        self._first_owned: set[int] | None = None
        self._draining = Drains()
        # Partitions taken over (counting.py), replaying -> when they were assigned.
        self._taken_over_at: dict[int, float] = {}
        self._catch_up = CatchUp()  # what stamps the records appended during a replay
        self._last_progress = clock()
        # Followed partitions -> the offset replay must reach (None once live).
        self._followed: dict[int, int | None] = {}
        self._next_offset: dict[int, int] = {}
        # Followed partitions -> the (position, high watermark) last sent in a PartitionProgress.
        self._progress_sent: dict[int, tuple[int, int]] = {}
        # Readiness waits for a first complete view of ownership (Ownership.complete_view), for owned
        # partitions whose leader did not answer yet, and for replays. Else records written meanwhile
        # would be replayed later as history instead of observed live. The HTTP thread reads
        # `not_ready`, published whole at the end of each poll, never state the poll is in the middle
        # of changing.
        self._waiting: set[int] = set()
        self.not_ready: str | None = "starting"
        self._access_error: str | None = None
        self._up: bool | None = None
        self._outage_log = OutageLog(clock)  # Kafka's connection failures, logged at a slowing rate
        self._client_down = False
        self._next_progress = 0.0

    @property
    def broker_id(self) -> int | None:
        return self._ownership.broker_id

    def refresh_ownership_soon(self) -> None:
        self._ownership.read_soon()

    def coordinator_elected(self, partition: int, epoch: int) -> None:
        """Any thread (the broker log's): this exporter's broker became the partition's coordinator in
        `epoch`; its records of that epoch are counted here (counting.py), and ownership read soon."""
        self._counting.hand("elected", partition, epoch)
        self._ownership.read_soon()

    def coordinator_resigned(self, partition: int) -> None:
        """Any thread: this exporter's broker stopped coordinating the partition (counting.py)."""
        self._counting.hand("resigned", partition)

    def coordinator_restarted(self) -> None:
        """Any thread: this exporter's broker (re)started (counting.py)."""
        self._counting.hand("restarted")

    def broker_log_read(self, read_ms: int) -> None:
        """Any thread: every line of the broker's log written before `read_ms` has been read."""
        self._counting.hand("read", read_ms)

    def fetch_for_freshness(self, on: bool) -> None:
        """Whether the coordinator's own clock times the appends (exporter.model.append_clock): then the
        followed partitions are fetched for freshness only, without nudges or high-watermark errands."""
        if on != self._fetch.fresh:
            self._fetch.fetch_for_freshness(on, self._followed, self._next_offset)

    def poll(self, timeout: float = 0.2, max_records: int = 1000) -> list[TopicEvent]:
        """Returns the events of one poll: ownership changes, records, progress, status."""
        events: list[TopicEvent] = []
        fetch, ownership = self._fetch, self._ownership
        self._counting.take_handed()
        now = self._clock()
        if ownership.due(now):
            self._refresh_ownership(events)
            if ownership.fenced:  # (the read failed, or a leader did not answer)
                ownership.retry_soon(now)
        if self._draining and self._draining.due(now):
            self._check_drains(events)
        if self._followed:
            self._consume(events, fetch.wait(timeout), max_records)
            fetch.nudge()
        else:
            # Nothing assigned (as before a cluster's first transaction): the poll returns nothing but
            # serves error_cb; it waits as the idle fetch's does, until the next metadata read is due.
            fetch.consumer.poll(ownership.wait(max(timeout, QUIET_POLL_SECONDS), self._clock()))
        if self._client_down:
            self._client_down = False
            self._set_up(False, events)
            ownership.read_soon()  # find out as soon as it is back
        now = self._clock()
        if now >= self._next_progress:
            self._next_progress = now + _PROGRESS_INTERVAL_SECONDS
            self._report_progress(events)
            fetch.adapt(now - self._last_progress, self._followed, bool(self._replay.windows), self._next_offset)
            self._last_progress = now
        self.not_ready = self._readiness()
        return events

    def _readiness(self) -> str | None:
        if self._access_error is not None:
            return self._access_error
        if not self._up:
            return "source down: Kafka does not answer"
        if not self._ownership.complete_view:
            return f"waiting for the leaders of {TOPIC}'s partitions"
        if self._waiting:
            return f"waiting for the leaders of {TOPIC} partitions {sorted(self._waiting)}"
        if self._replay.windows:  # (each replaying partition has one, so every poll asks in O(1))
            return f"replaying {TOPIC} partitions {sorted(self._replay.windows)}"
        return None

    def close(self) -> bool:
        """Closes both clients (FetchPattern.close: False if it could not yet)."""
        return self._fetch.close()

    @property
    def draining(self) -> bool:
        """Whether partitions this exporter's broker no longer leads are read on to the end of its
        epochs (any thread: a read of the dict's size)."""
        return bool(self._draining)

    @property
    def busy(self) -> bool:
        """Whether the followed partitions are fetched by the busy consumer (every latency_resolution_ms)."""
        return self._fetch.busy

    def _consume(self, events: list[TopicEvent], timeout: float, max_records: int) -> None:
        # Receipt time is what append latency is measured against, so never wait to fill a batch:
        # block for the first record only, then take what the client has already queued. The clock
        # is read once they are all taken, so no record is stamped before it was received.
        consumer = self._fetch.consumer
        first = consumer.poll(timeout)
        if first is None:
            return
        messages: list[Fetched] = [first, *consumer.consume(max_records - 1, 0)]  # type: ignore[list-item]  # because one without error() has its partition and offset (Fetched)
        received_ms = int(self._clock() * 1000)
        observed = records_log.isEnabledFor(logging.DEBUG)
        followed = self._followed
        replay = self._replay
        windows = replay.windows
        if windows and not self._fetch.fresh:  # (fresh: records are timed by their lines, not stamped)
            self._fetch.ask_high_watermarks(windows)
            self._note_high_watermarks(consumer, windows)
        catching_up = self._catch_up.marks
        window_ids = replay.window_ids
        next_offset = self._next_offset
        ownership = self._ownership
        fenced = ownership.fenced
        created_since_ms = ownership.created_since_ms
        counting = self._counting
        counts = counting.counts
        by_epoch = not counting.every_epoch
        draining = self._draining
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
            if window is not None and created_since_ms and partition in created_since_ms:
                if message.timestamp()[1] >= created_since_ms.pop(partition):
                    self._end_replay(partition, events)  # appended after the exporter looked: live
                    window = None
                else:
                    # The partition holds records from before: the topic was there, whatever the
                    # broker said (one starting up may say so), and this is history to replay.
                    counting.decided(partition, followed[partition])  # type: ignore[arg-type]  # because replaying, so its target is set
            epoch = message.leader_epoch()
            replay_end: int | None = None
            if window is not None:
                if not counts(partition, epoch, offset):
                    # History: a later record of the key replaces this one undecoded.
                    next_offset[partition] = offset + 1
                    if key is None:
                        append(UndecodableRecord(partition, offset, DecodeError("bad_length", "null key")))
                    else:
                        window[key] = message
                    if offset + 1 >= followed[partition]:  # type: ignore[operator]  # because replaying, so its target is set
                        self._end_replay(partition, events)
                    elif len(window) >= window_ids:
                        replay.hand_over(partition, events)
                    continue
                # A record of an epoch this exporter's broker led (a takeover's): counted as it is
                # read, after the window's records before it, in offset order.
                replay.hand_over(partition, events)
                run = None
                replay_end = followed[partition]
                earlier = False
            elif partition not in followed or partition in fenced:
                continue  # fetched just before an unassign; or refetched once ownership is read
            elif epoch is None:  # (a broker that does not say: counted beside its leader)
                earlier = partition in draining
            else:
                earlier = not counts(partition, epoch, offset)
                if earlier and by_epoch and epoch > counting.newest(partition):
                    # A newer leader's: a draining partition has been read to the end of this broker's
                    # epochs; a followed one waits for ownership to say whose epoch it is (ownership.py).
                    run = None
                    if partition in draining:
                        self._drained(partition, events, "read past its epochs")
                    else:
                        ownership.fence(partition, offset, epoch, counting.newest(partition))
                    continue
                # Else appended by another leader (whose exporter counted it), or below the floor.
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
                if earlier:  # applied to the state, neither counted nor observed
                    append(TransactionLogRecords(partition, [record], received_ms, True))
                    run = None
                    continue
                if catching_up and partition in catching_up:  # appended during its replay (CatchUp)
                    readable_ms = self._catch_up.readable_at(partition, offset, received_ms)
                    if run is not None and run.received_ms != readable_ms:
                        run = None
                else:
                    readable_ms = received_ms
                if run is None or run.partition != partition:
                    run = TransactionLogRecords(partition, [], readable_ms, False)
                    append(run)
                run.records.append(record)
                live += 1
                if observed:
                    log_observed(partition, record, readable_ms)
            if replay_end is not None and offset + 1 >= replay_end:
                self._end_replay(partition, events)
                run = None
        if live:
            self._fetch.delivered(events, live, received_ms)
        if errors < len(messages):
            self._access_error = None

    def _note_high_watermarks(self, consumer: Consumer, replaying: Collection[int]) -> None:
        """Marks for CatchUp: the replaying partitions' high watermarks their leaders answered since the
        last delivery (FetchPattern.ask_high_watermarks), then the one each partition's last fetch
        response carried (cached: no request), stamped with the clock read after them. The replay's
        own fetch responses refresh a partition's watermark only every 110-140 ms (p50), so alone they
        stamped the records appended meanwhile up to that much late (docs/benchmarks.md, "The
        exporter's start under load")."""
        catch_up = self._catch_up
        for partition, high, at_ms in self._fetch.answered_high_watermarks():
            if partition in replaying:  # (one whose replay ended since is live: no marks)
                catch_up.seen(partition, high, at_ms)
        highs = [
            (partition, consumer.get_watermark_offsets(TopicPartition(TOPIC, partition), cached=True)[1])
            for partition in replaying
        ]
        at_ms = int(self._clock() * 1000)
        for partition, high in highs:
            catch_up.seen(partition, high, at_ms)

    def _message_error(self, error: KafkaError) -> None:
        if error.code() in _ACCESS_ERRORS:
            self._denied(error)
        elif error.code() == KafkaError.GROUP_AUTHORIZATION_FAILED:
            log.debug("consumer error (the unused group id has no ACL, harmless): %s", error)
        elif error.code() != KafkaError._PARTITION_EOF:
            log.warning("consumer error: %s", error)

    def _end_replay(self, partition: int, events: list[TopicEvent]) -> None:
        self._replay.end(partition, events, self._takeover_replay_ms(partition))
        self._ownership.live(partition)
        self._followed[partition] = None

    def _refresh_ownership(self, events: list[TopicEvent]) -> None:
        try:
            metadata = self._fetch.consumer.list_topics(TOPIC, timeout=METADATA_TIMEOUT_SECONDS)
        except KafkaException as e:
            if e.args[0].code() in _ACCESS_ERRORS:
                self._denied(e.args[0])
            else:
                self._outage_log.warning(
                    "metadata", f"cannot read metadata of {TOPIC} from {self._bootstrap_servers}: {e.args[0].str()}"
                )
            self._set_up(False, events)
            return
        self._set_up(True, events)
        self._fetch.leaders_read()
        topic = metadata.topics.get(TOPIC)
        if topic is not None and topic.error is not None and topic.error.code() in _ACCESS_ERRORS:
            self._denied(topic.error)
            return
        owned = self._ownership.owned(metadata)
        if owned is not None:
            self._waiting = self._apply_ownership(owned, events)

    def _apply_ownership(self, owned: set[int], events: list[TopicEvent]) -> set[int]:
        """Follows `owned` from now on, draining the partitions that moved away; returns the owned
        partitions that could not be assigned yet."""
        ownership, replay, counting = self._ownership, self._replay, self._counting
        if self._first_owned is None:
            self._first_owned = set(owned)
        draining = self._draining
        # Taken back while draining: followed afresh below (the floor keeps what was counted).
        back = sorted(owned & set(draining.partitions))
        gone = sorted(set(self._followed) - owned - set(draining.partitions))
        drain = [p for p in gone if not counting.every_epoch and self._followed[p] is None and counting.led(p)]
        if drain:
            self._start_drains(drain, events)
        stop = sorted(set(gone) - set(drain)) + back
        if stop:
            self._unfollow(stop, events)
            log.info("stopped following %s partitions %s", TOPIC, stop)
        if ownership.fenced:
            self._settle_fences(events)
        new = sorted(owned - set(self._followed))
        assigned = []
        waiting = set()
        answers = self._leader_answers(new)
        for partition in new:
            answer = answers[partition]
            if answer is None:  # a leader moving or still loading: taken on the next refresh
                ownership.retry_soon(self._clock())
                waiting.add(partition)
                continue
            high, epoch = answer
            assigned.append(partition)
            events.append(PartitionAssigned(partition, ownership.here(partition), self._started_ms))
            self._progress_sent.pop(partition, None)  # (the model's new PartitionState has none)
            self._next_offset[partition] = 0
            if epoch is not None and ownership.here(partition):
                counting.learn(partition, epoch)  # its leader, this exporter's broker, answered in it
            if partition in self._first_owned:
                if partition not in ownership.created_since_ms:
                    counting.decided(partition, high)  # led since before the start: history below
                self._first_owned.discard(partition)
            elif not counting.every_epoch:
                self._taken_over_at[partition] = self._clock()
            if high <= 0:
                self._followed[partition] = None
                ownership.live(partition)  # empty: live from its first record anyway
                events.append(PartitionReplayed(partition, self._takeover_replay_ms(partition)))
            else:
                self._followed[partition] = high
                replay.start(partition)
        if assigned:
            fetch = self._fetch
            if not (fetch.busy or fetch.fresh) and any(self._followed[p] is not None for p in assigned):
                self._fetch.go_busy("replay", sorted(set(self._followed) - set(assigned)), self._next_offset)
            self._fetch.consumer.incremental_assign([TopicPartition(TOPIC, p, OFFSET_BEGINNING) for p in assigned])
            log.info("following %s partitions %s", TOPIC, assigned)
        return waiting

    def _takeover_replay_ms(self, partition: int) -> int | None:
        """A takeover's replay time, as it ends; None for a partition led since the start."""
        since = self._taken_over_at.pop(partition, None)
        return None if since is None else int((self._clock() - since) * 1000)

    def _unfollow(self, partitions: list[int], events: list[TopicEvent], drain: str | None = None) -> None:
        self._fetch.consumer.incremental_unassign([TopicPartition(TOPIC, p) for p in partitions])
        for partition in partitions:
            if self._followed[partition] is None:  # (a replay's next offset holds undecided records)
                self._counting.decided(partition, self._next_offset.get(partition, 0))
            self._draining.forget(partition)
            self._taken_over_at.pop(partition, None)
            del self._followed[partition]
            self._replay.drop(partition)
            self._catch_up.drop(partition)
            self._next_offset.pop(partition, None)
            self._progress_sent.pop(partition, None)
            self._ownership.forget(partition)
            events.append(PartitionRevoked(partition, drain))

    def _settle_fences(self, events: list[TopicEvent]) -> None:
        """The fenced partitions this exporter's broker still leads (ownership just read), each by
        what its leader answers now: the epoch it answers in is this broker's (a broker that does
        not say: the fenced record's), and the partition is refetched from the fenced record (its
        next offset, which the fence did not move), counted if its epoch is one this broker led (an
        epoch between may have been another broker's). One that does not answer stays fenced, asked
        again within a second (poll)."""
        fenced = sorted(self._ownership.fenced.items())
        answers = self._leader_answers([partition for partition, _ in fenced])
        settle, fenced_ms = self._counting.settle, self._ownership.fenced_ms
        answered = [
            partition
            for partition, fenced_epoch in fenced
            if answers[partition] is not None
            and settle(partition, fenced_epoch, answers[partition][1], fenced_ms[partition])  # type: ignore[index]  # because answered
        ]
        if not answered:
            return
        self._ownership.lift(answered)
        self._fetch.refetch(answered, self._next_offset)
        log.info("%s partitions %s: led by this exporter's broker in a newer epoch; refetched", TOPIC, answered)

    def _start_drains(self, partitions: list[int], events: list[TopicEvent]) -> None:
        """`partitions` moved away: drained (drains.py). One fenced on a newer leader's record has been
        read to its end already."""
        now = self._clock()
        for partition in partitions:
            self._draining.start(partition, self._counting.newest(partition), now)
            events.append(PartitionDraining(partition))
        for partition in [p for p in partitions if p in self._ownership.fenced]:
            self._drained(partition, events, "read past its epochs")
        log.info("%s partitions %s: led elsewhere now; read on to the end of this broker's epochs", TOPIC, partitions)

    def _check_drains(self, events: list[TopicEvent]) -> None:
        answers = self._leader_answers(sorted(self._draining.partitions))
        for partition, how in self._draining.ended(answers, self._next_offset, self._clock()):
            self._drained(partition, events, how)

    def _drained(self, partition: int, events: list[TopicEvent], how: str) -> None:
        if partition in self._draining:
            self._unfollow([partition], events, "cut" if how == "cut" else "read_to_end")
            log.info("%s-%d: drained (%s); stopped following it", TOPIC, partition, how)

    def _leader_answers(self, partitions: list[int]) -> dict[int, tuple[int, int | None] | None]:
        """Each partition's high watermark and leader epoch as its leader answers them (ListOffsets for
        the latest offset, which carries the leader's epoch); None, logged, for one whose leader does
        not answer yet. The request names the epoch the client knows, so a broker that no longer leads
        refuses it, and a new leader whose high watermark still lags the start of its epoch answers
        OFFSET_NOT_AVAILABLE (KIP-207): the offset answered is never below a record the previous
        leader's exporter counted.

        Asked in one call, a request per leader rather than a round trip per partition (50 answered in
        44-48 ms at a start beside a broker at 1,500 transactions a second). librdkafka fails the whole
        call when any leader refuses, so then each partition is asked alone, and one leader moving
        holds back only its own partitions."""
        answers: dict[int, tuple[int, int | None] | None] = dict.fromkeys(partitions)
        try:
            listed = self._list_latest(partitions) if partitions else []
        except KafkaException:
            listed = []
            for partition in partitions:
                try:
                    listed += self._list_latest([partition])
                except KafkaException as e:
                    _no_answer(partition, e.args[0])
        for answer in listed:
            if answer.error is None:
                answers[answer.partition] = (answer.offset, answer.leader_epoch)
            else:
                _no_answer(answer.partition, answer.error)
        return answers

    def _list_latest(self, partitions: list[int]) -> list[TopicPartition]:
        return self._fetch.consumer.offsets_for_times(latest_offsets(partitions), timeout=METADATA_TIMEOUT_SECONDS)

    def _report_progress(self, events: list[TopicEvent]) -> None:
        consumer = self._fetch.consumer
        for partition, target in self._followed.items():
            # Cached: the high watermark the last fetch response carried, no request sent.
            _, high = consumer.get_watermark_offsets(TopicPartition(TOPIC, partition), cached=True)
            position = self._next_offset.get(partition, 0)
            # Sent when it moved: the model keeps the last, and an idle exporter's every second
            # otherwise made and applied an event per followed partition.
            if high >= 0 and self._progress_sent.get(partition) != (position, high):
                self._progress_sent[partition] = (position, high)
                events.append(PartitionProgress(partition, position, high))
            if target is not None and high >= 0 and position >= high:
                # Replay done though the watermark fell below its target (the log truncated, an unclean
                # election): what comes below the target later is held to the leader epoch (_consume).
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

    def _on_client_error(self, error: KafkaError) -> None:
        # The fetching client's (FetchPattern): runs inside poll/consume on this thread; the next poll
        # turns it into a SourceStatus event.
        message = f"kafka client: {error.name()}: {_CONNECT_TIME.sub('', error.str())}"
        if error.code() in _ACCESS_ERRORS:
            self._denied(error)
        elif error.code() == KafkaError._ALL_BROKERS_DOWN:
            self._client_down = True
            self._outage_log.warning(error.name(), in_plain_words(error.str()))
            return
        elif error.code() in _CONNECTION_ERRORS:
            self._ownership.read_soon()
            self._outage_log.warning(error.name(), in_plain_words(error.str()))
            return
        log.warning("%s", message)


def _no_answer(partition: int, error: KafkaError) -> None:
    log.info("%s-%d: no answer from its leader yet (asked again within a second): %s", TOPIC, partition, error)

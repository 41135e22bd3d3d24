"""The tail's fetch pattern (exporter.sources.topic_tail.fetch_pattern): an idle consumer
whose one fetch waits for the next record, a busy one fetching every interval under load, the followed
partitions moved between them at their next offsets; the receipt time read after the records are
taken. Driven by scripted clients; what it costs and how tight the bound stays against a real broker
is bench/sidecar_cost.py and tests/integration/broker_truth.py (P4)."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace

import pytest
from confluent_kafka import OFFSET_BEGINNING, KafkaError, KafkaException

from exporter.codec import TransactionLogValue, TransactionState, encode_key, encode_value
from exporter.contracts.events import SourceStatus, TransactionLogRecords
from exporter.sources import topic_tail
from exporter.sources.topic_tail import TransactionLogTail, fetch_pattern
from tests.sources.test_topic_tail_readiness import PARTITIONS
from tests.sources.test_topic_tail_runs import DeliveringConsumer, Message

INTERVAL_MS = 4  # busy from 250 deliveries a second, idle again below 75


class Client(DeliveringConsumer):
    """Records its settings and where each partition was assigned from."""

    def __init__(self, settings: dict) -> None:
        super().__init__(settings)
        self.settings = settings
        self.offsets: dict[int, int] = {}
        self.polled = self.metadata_reads = 0
        self.timeouts: list[float] = []  # each poll's wait, seconds
        self.asked: list[int] = []  # partitions whose high watermark was asked of the broker
        self.closed = False
        self.refused_metadata_reads = 0  # the next reads of the topic's metadata that fail

    def incremental_assign(self, tps):
        if {tp.partition for tp in tps} & self.assigned:
            raise KafkaException(KafkaError(KafkaError._INVALID_ARG))  # as librdkafka: assigned already
        super().incremental_assign(tps)
        self.offsets.update({tp.partition: tp.offset for tp in tps})

    def incremental_unassign(self, tps):
        if {tp.partition for tp in tps} - self.assigned:
            raise KafkaException(KafkaError(KafkaError._INVALID_ARG))  # as librdkafka: not assigned
        super().incremental_unassign(tps)

    def poll(self, timeout):
        self.polled += 1
        self.timeouts.append(timeout)
        return super().poll(timeout)

    def get_watermark_offsets(self, tp, timeout=None, cached=False):
        if not cached:
            self.asked.append(tp.partition)
        return super().get_watermark_offsets(tp, timeout, cached)

    def list_topics(self, topic, timeout):
        self.metadata_reads += 1
        if self.refused_metadata_reads:
            self.refused_metadata_reads -= 1
            raise KafkaException(KafkaError(KafkaError._TRANSPORT))
        return super().list_topics(topic, timeout)

    def close(self):
        self.closed = True


@pytest.fixture
def fetching():
    return start_fetching()


def start_fetching(busy_refuses_metadata: int = 0) -> SimpleNamespace:
    """A tail following four empty partitions, idle; its busy client refuses its first
    `busy_refuses_metadata` metadata reads."""
    clock = SimpleNamespace(now=1000.0)
    made: list[Client] = []

    def factory(settings: dict) -> Client:
        made.append(Client(settings))
        if len(made) == 2:
            made[-1].refused_metadata_reads = busy_refuses_metadata
        return made[-1]

    tail = TransactionLogTail(
        "127.0.0.1:9092",
        metadata_refresh_seconds=3600,
        clock=lambda: clock.now,
        consumer_factory=factory,
        latency_resolution_ms=INTERVAL_MS,
        kafka_settings={"fetch.queue.backoff.ms": "50", "security.protocol": "PLAINTEXT"},
    )
    tail.poll(timeout=0)  # follows the four (empty) partitions: live at once
    written = dict.fromkeys(range(PARTITIONS), 0)

    def deliver(polls: int, partition: int = 0) -> None:
        """From a progress report (once a second) to the next: `polls` polls each bringing one live
        record of `partition`."""
        client = made[-1] if tail.busy else made[0]
        for _ in range(polls):
            client.queued.append(Message(partition, written[partition]))
            written[partition] += 1
            clock.now += 0.9 / polls
            tail.poll(timeout=0)
        clock.now += 0.1 + 1e-9
        tail.poll(timeout=0)

    return SimpleNamespace(tail=tail, made=made, clock=clock, deliver=deliver)


def test_idle_one_fetch_waits_for_the_next_record_and_the_queue_is_bounded(fetching):
    idle, busy = fetching.made
    assert not fetching.tail.busy and busy.assigned == set()
    assert idle.settings["fetch.min.bytes"] == 1 and idle.settings["fetch.wait.max.ms"] == 100
    assert idle.settings["queued.max.messages.kbytes"] == 8192 and idle.settings["queued.min.messages"] == 10_000
    assert idle.settings["fetch.max.bytes"] == 8 << 20
    assert idle.settings["fetch.queue.backoff.ms"] == "50"  # the user's settings over the defaults
    assert idle.settings["security.protocol"] == "PLAINTEXT"
    assert idle.assigned == set(range(PARTITIONS))


def test_under_load_the_partitions_move_to_a_consumer_fetching_every_interval_from_their_next_offsets(fetching):
    tail, made = fetching.tail, fetching.made
    fetching.deliver(polls=300)  # 300 deliveries a second: as many fetches as the busy pattern's
    assert tail.busy
    idle, busy = made
    assert busy.settings["fetch.wait.max.ms"] == INTERVAL_MS and busy.settings["fetch.min.bytes"] == 1 << 20
    assert busy.settings["security.protocol"] == "PLAINTEXT"
    assert idle.assigned == set() and busy.assigned == set(range(PARTITIONS))
    # Partition 0 from the record after the last one taken; the others had none: from offset 0, a
    # number (a logical offset's lookup, cut short by a hand-over, left the old consumer fetching),
    # and from the oldest record left should 0 be gone.
    assert busy.offsets == {0: 300, 1: 0, 2: 0, 3: 0}
    assert busy.settings["auto.offset.reset"] == "earliest"


def test_below_the_band_idle_again_on_the_same_idle_consumer_and_between_its_bounds_no_change(fetching):
    tail, made = fetching.tail, fetching.made
    fetching.deliver(polls=200)  # 200 a second: below the busy pattern's 250 fetches
    assert not tail.busy
    fetching.deliver(polls=300)
    assert tail.busy
    fetching.deliver(polls=100)  # busy fetches bringing records: 100 a second, of 250
    assert tail.busy
    fetching.deliver(polls=50)  # fewer than 75: idle
    assert not tail.busy
    idle, busy = made
    assert busy.assigned == set() and idle.assigned == set(range(PARTITIONS))
    assert idle.offsets[0] == 200 + 300 + 100 + 50
    fetching.deliver(polls=300)
    assert tail.busy and len(made) == 2  # each made once


def test_the_consumer_not_fetching_is_polled_for_its_callbacks_and_its_errors_do_not_take_the_source_down(fetching):
    tail, made = fetching.tail, fetching.made
    fetching.deliver(polls=300)
    idle, busy = made
    polled = idle.polled
    fetching.deliver(polls=100)  # still busy
    assert tail.busy and idle.polled - polled == 1  # once a second, besides nothing
    idle.settings["error_cb"](KafkaError(KafkaError._ALL_BROKERS_DOWN))
    assert not [e for e in tail.poll(timeout=0) if isinstance(e, SourceStatus)]
    busy.settings["error_cb"](KafkaError(KafkaError._ALL_BROKERS_DOWN))
    assert SourceStatus(False) in tail.poll(timeout=0)


def test_a_replay_is_fetched_by_the_busy_consumer_and_the_pattern_holds_until_it_ends(fetching):
    tail, made, clock = fetching.tail, fetching.made, fetching.clock
    idle, busy = made
    for client in made:  # partition 3 moves to another broker, whose epoch ends the drain at once
        client.leaders[3] = 2
        client.leader_epochs[3] = 1
    tail.refresh_ownership_soon()
    fetching.deliver(polls=0)
    assert not tail.busy and idle.assigned == {0, 1, 2}
    for client in made:  # and back, with a history of 5 records: the ownership read assigns and replays it
        client.leaders[3] = 1
        client.leader_epochs[3] = 2
        client.high[3] = 5
    tail.refresh_ownership_soon()
    fetching.deliver(polls=0)
    assert tail.busy and busy.assigned == set(range(PARTITIONS)) and busy.offsets[3] == OFFSET_BEGINNING
    fetching.deliver(polls=0)  # nothing arrives, but a partition replays: busy still
    assert tail.busy and "replaying" in tail.not_ready
    busy.queued += [Message(3, offset) for offset in range(5)]
    clock.now += 0.5
    tail.poll(timeout=0)
    assert tail.not_ready is None
    clock.now += 1.0  # the next progress report: replayed, nothing live arrives
    tail.poll(timeout=0)
    assert not tail.busy and idle.assigned == set(range(PARTITIONS))


def test_the_receipt_time_is_read_once_every_record_of_the_poll_is_taken(fetching):
    tail, made, clock = fetching.tail, fetching.made, fetching.clock
    idle = made[0]

    def consume(n, timeout):  # what the client had queued, taken 5 ms after the first record
        clock.now += 0.005
        return DeliveringConsumer.consume(idle, n, timeout)

    idle.consume = consume
    idle.queued += [Message(1, 0), Message(1, 1)]
    before_ms = int(clock.now * 1000)
    (run,) = [e for e in tail.poll(timeout=0) if isinstance(e, TransactionLogRecords)]
    assert run.received_ms == before_ms + 5


def test_the_consumer_not_fetching_reads_the_leaders_at_every_ownership_read(fetching):
    """A consumer assigned partitions whose leaders it does not know waits a second (librdkafka's
    retry) before it fetches: the one not fetching learns them whenever ownership is read."""
    tail, (idle, busy) = fetching.tail, fetching.made
    _metadata_reads(busy, 1)
    assert idle.metadata_reads == busy.metadata_reads == 1
    tail.refresh_ownership_soon()
    tail.poll(timeout=0)
    _metadata_reads(busy, 2)  # (from a thread of the tail's own)
    assert idle.metadata_reads == busy.metadata_reads == 2
    tail.close()


def test_a_consumer_that_never_read_the_leaders_reads_them_before_it_is_assigned():
    fetching = start_fetching(busy_refuses_metadata=1)
    tail, busy = fetching.tail, fetching.made[1]
    _metadata_reads(busy, 1)  # at the first ownership read, on the errands' thread: refused
    time.sleep(0.01)
    assert busy.metadata_reads == 1 and busy.assigned == set()
    fetching.deliver(polls=300)
    assert tail.busy and busy.metadata_reads == 2 and busy.assigned == set(range(PARTITIONS))
    tail.close()


def _metadata_reads(client: Client, count: int) -> None:
    deadline = time.monotonic() + 5
    while client.metadata_reads < count and time.monotonic() < deadline:
        time.sleep(0.001)


def _asked(client: Client, count: int, seconds: float = 5) -> list[int]:
    """The partitions the client asked for, once `count` (or more) were asked, or after `seconds`: the
    nudges are asked from a thread of the tail's own."""
    deadline = time.monotonic() + seconds
    while len(client.asked) < count and time.monotonic() < deadline:
        time.sleep(0.001)
    time.sleep(0.01)  # (and no more)
    return client.asked


def _value(state: TransactionState) -> bytes:
    return encode_value(
        TransactionLogValue(
            version=1,
            producer_id=7,
            producer_epoch=0,
            transaction_timeout_ms=60_000,
            state=state,
            partitions={} if state > 3 else {"orders": [0]},
            last_update_timestamp_ms=5,
            start_timestamp_ms=4,
        )
    )


def test_idle_a_prepare_makes_the_other_consumer_ask_the_broker_every_interval_until_its_complete_arrives(fetching):
    """A broker completes the fetch waiting for a COMPLETE_* record (appended by the coordinator after
    the markers, outside its request threads) at its next request only: idle, the exporter makes one
    every interval while a COMPLETE_* is due, on the other consumer's connection."""
    tail, (idle, busy), clock = fetching.tail, fetching.made, fetching.clock
    tid = encode_key("tx-1")
    idle.queued.append(Message(2, 0, _value(TransactionState.ONGOING), tid))
    tail.poll(timeout=0.2)
    assert busy.asked == []
    idle.queued.append(Message(2, 1, _value(TransactionState.PREPARE_COMMIT), tid))
    tail.poll(timeout=0.2)
    assert _asked(busy, 1) == [2]
    tail.poll(timeout=0.2)  # within the interval: not again
    assert _asked(busy, 1) == [2]
    clock.now += INTERVAL_MS / 1000
    tail.poll(timeout=0.2)
    assert _asked(busy, 2) == [2, 2]
    idle.queued.append(Message(2, 2, _value(TransactionState.COMPLETE_COMMIT), tid))
    clock.now += INTERVAL_MS / 1000
    tail.poll(timeout=0.2)
    clock.now += INTERVAL_MS / 1000
    tail.poll(timeout=0.2)
    assert _asked(busy, 3, seconds=0.1) == [2, 2]  # the COMPLETE arrived: no more
    tail.close()


def test_a_partition_with_in_sync_followers_is_nudged_too(fetching):
    """Its followers get the COMPLETE_* at the leader's next request too, and the high watermark waits
    for them (measured in a 3-node cluster: docs/benchmarks.md, "The idle fetch's tail")."""
    tail, (idle, busy), clock = fetching.tail, fetching.made, fetching.clock
    idle.followers[2] = [2, 3]
    tail.refresh_ownership_soon()
    tail.poll(timeout=0)
    idle.queued.append(Message(2, 0, _value(TransactionState.PREPARE_COMMIT), encode_key("tx-1")))
    tail.poll(timeout=0.2)
    assert _asked(busy, 1) == [2]
    clock.now += INTERVAL_MS / 1000
    tail.poll(timeout=0.2)
    assert _asked(busy, 2) == [2, 2]
    tail.close()


def test_idle_the_hold_is_five_resolutions_within_100_to_500_ms_and_the_nudges_last_two_holds():
    """The hold bounds only what no request and no nudge delivers; it sets what an idle exporter
    costs (a fetch of every followed partition per hold)."""
    assert [fetch_pattern.idle_wait_ms(r) for r in (4, 10, 25, 50, 100, 250)] == [100, 100, 125, 250, 500, 500]
    assert fetch_pattern.idle_settings(100) == {"fetch.min.bytes": 1, "fetch.wait.max.ms": 500}
    assert [fetch_pattern.nudge_for_ms(r) for r in (4, 10, 100)] == [200, 200, 1000]


def test_idle_without_records_the_busy_consumer_is_closed_and_made_again_at_the_next_record(fetching):
    """An idle librdkafka client's threads cost as much as the idle fetch: closed after
    RETIRE_BUSY_AFTER_SECONDS without a live record, made again (its leaders read) by the next one, a
    second or more before a load can move the partitions to it."""
    tail, made, clock = fetching.tail, fetching.made, fetching.clock
    busy = made[1]

    def quiet(seconds: int) -> None:
        for _ in range(seconds):
            clock.now += 1.0
            tail.poll(timeout=0)

    quiet(int(fetch_pattern.RETIRE_BUSY_AFTER_SECONDS) - 1)
    assert not busy.closed and len(made) == 2
    assert made[0].timeouts[-1] == fetch_pattern.QUIET_POLL_SECONDS  # nothing due sooner than a record
    quiet(2)
    _wait_until(lambda: busy.closed)
    # Meanwhile the errands never call into the consumer fetching: confluent-kafka serializes a
    # client's calls, and another thread's wait for the poll to end spins.
    idle = made[0]
    callers: list[str] = []
    list_topics = idle.list_topics

    def list_topics_noting_caller(topic, timeout):
        callers.append(threading.current_thread().name)
        return list_topics(topic, timeout)

    idle.list_topics = list_topics_noting_caller
    tail.refresh_ownership_soon()
    tail.poll(timeout=0)
    time.sleep(0.05)
    assert "topic-errands" not in callers
    fetching.deliver(polls=1)
    again = made[2]
    assert again.settings["fetch.wait.max.ms"] == busy.settings["fetch.wait.max.ms"] and not again.closed
    _metadata_reads(again, 1)
    assert again.metadata_reads == 1
    fetching.deliver(polls=300)
    assert tail.busy and again.assigned == set(range(PARTITIONS)) and len(made) == 3
    tail.close()


def test_a_complete_never_seen_is_waited_for_200_ms(fetching):
    tail, (idle, busy), clock = fetching.tail, fetching.made, fetching.clock
    idle.queued.append(Message(1, 0, _value(TransactionState.PREPARE_ABORT), encode_key("tx-2")))
    tail.poll(timeout=0.2)
    asked = len(busy.asked)
    for _ in range(100):
        clock.now += INTERVAL_MS / 1000
        tail.poll(timeout=0.2)
        _asked(busy, len(busy.asked) + 1, seconds=0.05)  # one at a time
    assert 200 / INTERVAL_MS - 2 <= len(busy.asked) - asked <= 200 / INTERVAL_MS + 1
    tail.close()


def test_close_leaves_both_clients_open_while_an_errand_is_inside_a_request(fetching, monkeypatch):
    """Closing a client another thread is inside of crashes the process: close() says it did not close."""
    tail, (idle, busy) = fetching.tail, fetching.made
    inside, release = threading.Event(), threading.Event()

    def list_topics(topic, timeout):  # a broker that does not answer, past close()'s wait
        inside.set()
        release.wait(5)
        return Client.list_topics(busy, topic, timeout)

    busy.list_topics = list_topics
    monkeypatch.setattr(fetch_pattern, "METADATA_TIMEOUT_SECONDS", 0.05)  # close()'s wait: 1.05 s
    tail.refresh_ownership_soon()
    tail.poll(timeout=0)  # an ownership read: the consumer not fetching reads the leaders too, on the errands' thread
    assert inside.wait(5)
    try:
        assert tail.close() is False
        assert not idle.closed and not busy.closed
    finally:
        release.set()


def test_close_closes_both_clients_once_the_errands_thread_has_left(fetching):
    tail, (idle, busy) = fetching.tail, fetching.made
    tail.refresh_ownership_soon()
    tail.poll(timeout=0)
    _metadata_reads(busy, 2)
    assert tail.close() is True
    assert idle.closed and busy.closed


def test_each_kind_of_connection_failure_is_logged_once_then_at_a_slowing_rate(fetching, caplog):
    """A broker that is down: librdkafka reports each failed connection; the log says so once per kind,
    then after 10 s, 20 s, ... each line counting the failures it stands for."""
    tail, (idle, _), clock = fetching.tail, fetching.made, fetching.clock
    refused = KafkaError(
        KafkaError._TRANSPORT, "127.0.0.1:9092/1: Connect to ipv4#127.0.0.1:9092 failed: Connection refused"
    )
    caplog.set_level("WARNING", logger=topic_tail.__name__)
    for _ in range(35):  # one a second
        idle.settings["error_cb"](refused)
        idle.settings["error_cb"](KafkaError(KafkaError._ALL_BROKERS_DOWN))
        clock.now += 1
    lines = [r.getMessage() for r in caplog.records]
    transport = [line for line in lines if "cannot connect to Kafka broker 1 at 127.0.0.1:9092" in line]
    assert len(transport) == 3  # at 0, 10 and 30 s
    assert transport[0] == (
        "cannot connect to Kafka broker 1 at 127.0.0.1:9092: connection refused; while it lasts, said again in 10 s"
    )
    assert "(9 more in the last 10 s)" in transport[1] and "said again in 40 s" in transport[2]
    assert len([line for line in lines if "all broker connections are down" in line]) == 3
    # Plain words, a line short enough to read at a glance, no client error codes (_TRANSPORT).
    assert all(len(line.split()) <= 25 and "_" not in line for line in lines), lines
    tail.close()


def test_for_freshness_a_third_consumer_fetches_twice_within_it_without_nudges_and_load_moves_nothing(fetching):
    """The coordinator's clock times the appends: the partitions move, at their next offsets, to a
    consumer made then, whose fetch is held half the freshness, and the busy one is closed; a
    PREPARE_* nudges nothing; load moves nothing; back to the fetch clock, the idle consumer has them
    again, and a busy one is made again."""
    tail, made, clock = fetching.tail, fetching.made, fetching.clock
    idle, busy = made
    idle.queued.append(Message(1, 0))
    tail.poll(timeout=0)
    tail.fetch_for_freshness(True)
    fresh = made[2]
    assert fresh.settings["fetch.wait.max.ms"] == 500 and fresh.settings["fetch.min.bytes"] == 1 << 20
    assert idle.assigned == set() and fresh.assigned == set(range(PARTITIONS))
    assert fresh.offsets == {0: 0, 1: 1, 2: 0, 3: 0}
    tail.poll(timeout=0.2)  # nothing arrives: the poll waits the freshness, not 0.2 s
    assert fresh.timeouts[-1] == 1.0
    fresh.queued.append(Message(2, 0, _value(TransactionState.PREPARE_COMMIT), encode_key("tx-1")))
    tail.poll(timeout=0.2)
    clock.now += INTERVAL_MS / 1000
    tail.poll(timeout=0.2)
    assert _asked(busy, 0, seconds=0.1) == []  # no nudge
    for n in range(300):  # 300 deliveries a second
        fresh.queued.append(Message(3, n))
        clock.now += 0.003
        tail.poll(timeout=0)
    clock.now += 1
    tail.poll(timeout=0)
    assert fresh.assigned == set(range(PARTITIONS)) and busy.assigned == set() and not tail.busy
    _wait_until(lambda: busy.closed)  # the fresh consumer stands in for it: closed by the errands' thread
    tail.fetch_for_freshness(False)
    assert idle.assigned == set(range(PARTITIONS)) and fresh.assigned == set() and idle.offsets[3] == 300
    again = made[3]  # the busy consumer made again, before a load needs it
    assert again.settings["fetch.wait.max.ms"] == busy.settings["fetch.wait.max.ms"] and not again.closed
    tail.close()
    assert fresh.closed and again.closed


def _wait_until(condition, seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "not within 10 s"
        time.sleep(0.01)

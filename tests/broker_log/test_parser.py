"""BrokerLogParser: the prefilter, continuations, and DEBUG/INFO pairs counted once."""

from __future__ import annotations

import tracemalloc

from exporter.broker_log.parser import CACHE_BYTES, MAX_UNPAIRED, MAX_UNPAIRED_BYTES, BrokerLogParser
from exporter.codec.states import TransactionState as S
from exporter.contracts.events import (
    MarkerWriteFailed,
    MarkerWriteRetried,
    TransactionLogAppendFailed,
    TransitionAppended,
)
from tests.broker_log.test_lines import META_3, META_41, debug_line, info_line

NOISE = b"[2026-11-21 07:23:25,279] INFO [ReplicaManager broker=1] Something else (kafka.server.ReplicaManager)"


def feed(*lines: str | bytes) -> tuple[BrokerLogParser, list]:
    parser = BrokerLogParser()
    events = parser.feed([line.encode() if isinstance(line, str) else line for line in lines])
    return parser, events


def test_debug_and_info_lines_of_one_failure_count_once_with_the_raw_error():
    meta = META_41.format("PREPARE_COMMIT")
    parser, events = feed(debug_line(meta), NOISE, info_line(meta), info_line(meta, tid="other"))
    assert events == [
        TransactionLogAppendFailed(S.PREPARE_COMMIT, "NOT_ENOUGH_REPLICAS"),
        TransactionLogAppendFailed(S.PREPARE_COMMIT, "COORDINATOR_NOT_AVAILABLE"),
    ]
    assert parser.lines == 4


def test_pairs_across_feeds_and_interleaved_ids():
    parser = BrokerLogParser()
    a, b = META_3.format("PrepareAbort"), META_3.format("CompleteCommit")
    assert parser.feed([debug_line(a, tid="a").encode(), debug_line(b, tid="b").encode()]) == []
    assert parser.feed([info_line(b, tid="b").encode()]) == [
        TransactionLogAppendFailed(S.COMPLETE_COMMIT, "NOT_ENOUGH_REPLICAS")
    ]
    assert parser.feed([info_line(a, tid="a").encode()]) == [
        TransactionLogAppendFailed(S.PREPARE_ABORT, "NOT_ENOUGH_REPLICAS")
    ]


def test_a_debug_line_without_its_info_line_is_still_counted_once():
    meta = META_3.format("Ongoing")
    timeout = "org.apache.kafka.common.errors.TimeoutException"
    _, events = feed(debug_line(meta, exception=timeout), debug_line(meta), info_line(meta))
    assert events == [
        TransactionLogAppendFailed(S.ONGOING, "REQUEST_TIMED_OUT"),
        TransactionLogAppendFailed(S.ONGOING, "NOT_ENOUGH_REPLICAS"),
    ]
    lines = [debug_line(meta, tid=f"t{i}") for i in range(MAX_UNPAIRED + 1)]
    _, events = feed(*lines)
    assert events == [TransactionLogAppendFailed(S.ONGOING, "NOT_ENOUGH_REPLICAS")]  # the oldest


def test_continuations_and_the_fatal_marker_error():
    parser, events = feed(
        "[2026-11-21 07:23:25,279] ERROR [TxnMarkerSenderThread-1]: Uncaught error in request completion:"
        " (org.apache.kafka.server.util.InterBrokerSendThread)",
        "java.lang.IllegalStateException: Received fatal error org.apache.kafka.common.errors.RecordTooLargeException"
        " while sending txn marker for t-1",
        "\tat kafka.coordinator.transaction.TransactionMarkerRequestCompletionHandler.onComplete(X.scala:12)",
        "\tat org.apache.kafka.clients.NetworkClient.poll(NetworkClient.java:1)",
    )
    assert events == [MarkerWriteFailed("MESSAGE_TOO_LARGE", "t-1")]
    assert (parser.lines, parser.malformed, parser.unrecognized) == (4, 0, 0)


def test_non_utf8_and_crlf_lines_do_not_break_parsing():
    meta = META_3.format("PrepareCommit")
    parser, events = feed(
        b"\xff\xfe garbage coordinator.transaction. [", info_line(meta, tid="\u00e9t\u00e9").encode() + b"\r"
    )
    assert events == [TransactionLogAppendFailed(S.PREPARE_COMMIT, "COORDINATOR_NOT_AVAILABLE")]
    assert parser.malformed == 1  # the first: neither Kafka's layout nor a stack-trace line


def test_the_cache_of_parsed_lines_is_bounded_in_bytes():
    """Distinct long coordinator lines (a transaction over thousands of partitions prints them all,
    up to the follower's 64 KiB line limit): the memory the parser holds between feeds (tracemalloc:
    what is allocated since before the first line and still is) stays within CACHE_BYTES and a little."""
    parser = BrokerLogParser()
    meta = META_41.format("PREPARE_COMMIT").replace("topicPartitions=[", "topicPartitions=[" + "orders-1, " * 6000)
    size = len(info_line(meta, tid="t0"))
    held = 0  # the most, after a feed (a running maximum: a list of every value would count itself)
    tracemalloc.start()
    try:
        parser.feed(
            [b"[2026-11-21 07:23:25,573] INFO unrelated (kafka.server.ReplicaManager)"]
        )  # its first allocations
        before = tracemalloc.get_traced_memory()[0]
        for n in range(200):
            events = parser.feed([info_line(meta, tid=f"t{n}").encode()])
            assert events == [TransactionLogAppendFailed(S.PREPARE_COMMIT, "COORDINATOR_NOT_AVAILABLE")]
            del events
            held = max(held, tracemalloc.get_traced_memory()[0] - before)
    finally:
        tracemalloc.stop()
    assert held <= CACHE_BYTES + 64 * 1024, held
    assert held >= 2 * size, held  # still caching: more than one line's text is kept


def test_debug_lines_waiting_for_their_info_line_are_bounded_in_bytes():
    """Transactional ids are the clients' (up to 32 KiB): the waiting DEBUG lines keep within
    MAX_UNPAIRED_BYTES of them, the oldest counted on its own when more come."""
    meta = META_3.format("Ongoing")
    count = 2 * MAX_UNPAIRED_BYTES // 30000
    _, events = feed(*(debug_line(meta, tid=f"{n:05d}" + "x" * 30000) for n in range(count)))
    assert len(events) >= count - MAX_UNPAIRED_BYTES // 30000
    assert all(e == TransactionLogAppendFailed(S.ONGOING, "NOT_ENOUGH_REPLICAS") for e in events)


def test_marker_errors_are_stamped_with_the_time_they_were_read():
    retry = (
        "[2026-11-21 07:23:25,{}] INFO [Transaction Marker Request Completion Handler 1]: Sending t-1's"
        " transaction marker for partition orders-3 has failed with error"
        " org.apache.kafka.common.errors.NotEnoughReplicasException, retrying with current coordinator epoch 4"
        " (kafka.coordinator.transaction.TransactionMarkerRequestCompletionHandler)"
    )
    parser = BrokerLogParser()
    first = parser.feed([retry.format(100).encode()], now_ms=1_000)
    again = parser.feed([retry.format(200).encode(), retry.format(300).encode()], now_ms=2_000)  # cached: same body
    assert first == again[:1] == [MarkerWriteRetried("NOT_ENOUGH_REPLICAS", "t-1", "orders-3")]
    assert [e.seen_ms for e in first + again] == [1_000, 2_000, 2_000]


def test_append_failures_name_their_transactional_id_and_when_they_were_read():
    meta = META_41.format("PREPARE_ABORT")
    parser = BrokerLogParser()
    assert parser.feed([debug_line(meta, tid="pay-1").encode()], now_ms=1_000) == []
    (paired,) = parser.feed([info_line(meta, tid="pay-1").encode()], now_ms=2_000)
    (info_only,) = parser.feed([info_line(meta, tid="pay-2").encode()], now_ms=3_000)
    assert (paired.transactional_id, paired.seen_ms, paired.error) == ("pay-1", 2_000, "NOT_ENOUGH_REPLICAS")
    assert (info_only.transactional_id, info_only.seen_ms, info_only.error) == (
        "pay-2",
        3_000,
        "COORDINATOR_NOT_AVAILABLE",
    )


def test_the_state_managers_successes_are_read_as_transitions_and_its_failures_still_read():
    succeeded = (
        "[2026-11-25 22:11:32,123] DEBUG [Transaction State Manager 1]: Updating t-1's transaction state to "
        + META_41.format("PREPARE_COMMIT").replace("txnLastUpdateTimestamp=2", "txnLastUpdateTimestamp=1795644692120")
        + " with coordinator epoch 0 for t-1 succeeded (kafka.coordinator.transaction.TransactionStateManager)"
    )
    meta = META_41.format("COMPLETE_COMMIT")
    parser, events = feed(
        succeeded,
        succeeded + "\r",
        debug_line(meta),
        info_line(meta).encode() + b"\r",
        "[no frame (kafka.coordinator.transaction.TransactionStateManager)",  # malformed as before
    )
    transition = TransitionAppended("t-1", S.PREPARE_COMMIT, 2, 0, 1795644692120, 1795644692123)
    assert events == [transition, transition, TransactionLogAppendFailed(S.COMPLETE_COMMIT, "NOT_ENOUGH_REPLICAS")]
    assert (parser.lines, parser.malformed, parser.unrecognized) == (5, 1, 0)

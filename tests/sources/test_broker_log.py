"""BrokerLogFollower on files we write: start position, a file that appears later, rotation by
rename and by copytruncate (alone and during a burst), long lines."""

from __future__ import annotations

import os
import shutil
import threading
import time
from datetime import datetime, timezone
from pathlib import Path

import pytest

from exporter.sources.broker_log import BrokerLogFollower
from exporter.sources.events import BrokerLogStats, CompleteAppendRetried

# A real 4.4.0 line (tests/sources/broker_log_corpus/4.4.0.log) with the transactional id as a hole,
# and the time: every line a writer writes has its own, as in a real log.
LINE = (
    "[2026-11-21 07:{{:%M:%S,%f}}] INFO [Transaction Marker Channel Manager 1]: Not available to append"
    " PendingCompleteTxn[transactionalId={}, coordinatorEpoch=0, txnMetadata=TransactionMetadata(transactionalId={},"
    " producerId=4, prevProducerId=4, nextProducerId=-1, producerEpoch=0, lastProducerEpoch=-1, txnTimeoutMs=60000,"
    " state=PREPARE_COMMIT, pendingState=Optional[COMPLETE_COMMIT], topicPartitions=[], txnStartTimestamp=1795245830683,"
    " txnLastUpdateTimestamp=1795245833466, clientTransactionVersion=TV_0), newMetadata=TxnTransitMetadata[producerId=4,"
    " prevProducerId=4, nextProducerId=-1, producerEpoch=0, lastProducerEpoch=-1, txnTimeoutMs=60000,"
    " txnState=COMPLETE_COMMIT, topicPartitions=[], txnStartTimestamp=1795245830683, txnLastUpdateTimestamp=1795245833467,"
    " clientTransactionVersion=TV_0]]: possible causes include UNKNOWN_TOPIC_OR_PARTITION, NOT_ENOUGH_REPLICAS,"
    " NOT_ENOUGH_REPLICAS_AFTER_APPEND and REQUEST_TIMED_OUT; retry appending"
    " (kafka.coordinator.transaction.TransactionMarkerChannelManager)\n"
)
NOISE = "[2026-11-21 07:23:55,573] INFO [ReplicaManager broker=1] Unrelated (kafka.server.ReplicaManager)\n"


_clock = [0]


def line(tid: object) -> str:
    _clock[0] += 1
    return LINE.format(tid, tid).format(datetime.fromtimestamp(_clock[0] / 1000, tz=timezone.utc))


def lines(*ids: object) -> str:
    return "".join(line(i) for i in ids)


def ids(events) -> list[str]:
    return [e.transactional_id for e in events if type(e) is CompleteAppendRetried]


def stats(events) -> BrokerLogStats:
    total = BrokerLogStats()
    for e in events:
        if type(e) is BrokerLogStats:
            for field in ("lines", "truncated", "malformed", "unrecognized", "rotations"):
                setattr(total, field, getattr(total, field) + getattr(e, field))
    return total


def append(path: Path, text: str | bytes) -> None:
    with path.open("ab") as f:
        f.write(text.encode() if isinstance(text, str) else text)


@pytest.fixture
def log(tmp_path: Path) -> Path:
    return tmp_path / "server.log"


def test_starts_at_the_end_or_from_the_start(log):
    append(log, lines("old") + NOISE)
    at_end, from_start = BrokerLogFollower(log), BrokerLogFollower(log, from_start=True)
    assert at_end.poll() == []  # nothing read: no stats event either
    assert ids(from_start.poll()) == ["old"]
    append(log, lines("new"))
    assert ids(at_end.poll()) == ["new"]
    assert ids(from_start.poll()) == ["new"]


def test_starting_mid_line_skips_the_fragment(log):
    append(log, lines("old") + LINE[:50])
    follower = BrokerLogFollower(log)
    append(log, line("x")[50:] + lines("new"))
    assert ids(follower.poll()) == ["new"]


def test_a_file_that_appears_later_is_read_from_its_start(log):
    follower = BrokerLogFollower(log)
    assert follower.poll() == []
    append(log, lines("first") + NOISE)
    events = follower.poll()
    assert ids(events) == ["first"]
    assert stats(events).lines == 2


def test_an_incomplete_line_waits_for_its_end(log):
    follower = BrokerLogFollower(log, from_start=True)
    text = lines("a")
    append(log, text[:100])
    assert ids(follower.poll()) == []
    append(log, text[100:])
    assert ids(follower.poll()) == ["a"]


def test_rotation_by_rename(log):
    follower = BrokerLogFollower(log)
    append(log, lines(1))
    assert ids(follower.poll()) == ["1"]
    append(log, lines(2))  # unread when the file is renamed
    log.rename(log.with_name("server.log.1"))
    append(log.with_name("server.log.1"), lines(3))  # the writer had not reopened yet
    assert ids(follower.poll()) == ["2", "3"]  # the path is gone for now: the old file is read on
    append(log, lines(4))
    events = follower.poll()
    assert ids(events) == ["4"]
    assert stats(events).rotations == 1


def test_rotation_by_rename_with_an_unterminated_last_line(log):
    follower = BrokerLogFollower(log)
    append(log, lines(1).rstrip("\n"))
    assert ids(follower.poll()) == []  # opened, nothing complete yet
    log.rename(log.with_name("server.log.1"))
    append(log, lines(2))
    assert ids(follower.poll()) == ["1", "2"]


@pytest.mark.parametrize("written_after", [0, 1, 5])
def test_copytruncate_reads_the_unread_rest_from_the_copy(log, written_after):
    """The file is copied, truncated, then written again, possibly past the old position (which
    only the bytes before the position tell)."""
    follower = BrokerLogFollower(log)
    append(log, lines(1))
    assert ids(follower.poll()) == ["1"]
    append(log, lines(2, 3))  # written, not read yet
    shutil.copy(log, log.with_name("server.log.1"))
    (log.parent / "server.log.2").write_text(lines(1, 2))  # an older, unrelated rotation
    os.truncate(log, 0)
    append(log, lines(*range(10, 10 + written_after)))
    events = follower.poll()
    assert ids(events) == ["2", "3", *map(str, range(10, 10 + written_after))]
    assert stats(events).rotations == 1
    append(log, lines(99))
    assert ids(follower.poll()) == ["99"]


def test_copytruncate_without_a_copy_goes_on_from_the_start(log):
    follower = BrokerLogFollower(log)
    append(log, lines(1))
    follower.poll()
    append(log, lines(2))
    os.truncate(log, 0)
    append(log, lines(3))
    assert ids(follower.poll()) == ["3"]  # 2 is lost, as it is for everyone


def test_long_lines_keep_head_and_tail_within_bounded_memory(log):
    limit = 4096
    follower = BrokerLogFollower(log, from_start=True, max_line_bytes=limit)
    text = line("big").replace("topicPartitions=[]", "topicPartitions=[" + "orders-1, " * 2000 + "orders-2]")
    assert len(text) > 10 * limit
    for start in range(0, len(text), 1000):  # arriving in pieces, as a writer flushes it
        append(log, text[start:start + 1000])
        events = follower.poll()
        assert len(follower._partial) <= limit and len(follower._cut_tail or b"") <= limit
    assert ids(events) == ["big"]  # the transactional id is in the head, the logger in the tail
    assert stats(events).truncated == 1
    append(log, "x" * (3 * limit) + "\n" + lines("after"))
    events = follower.poll()
    assert ids(events) == ["after"]
    assert stats(events).truncated == 1


def test_burst_with_rotations_both_ways_loses_and_repeats_nothing(log):
    """A writer appends numbered lines as fast as it can and rotates the file every 500 lines,
    alternately by rename and by copytruncate, while the follower polls on another thread."""
    total, every = 6000, 500
    follower = BrokerLogFollower(log)
    polls = [0]
    got: list[str] = []
    rotations = [0]
    stop = threading.Event()

    def follow() -> None:
        while True:
            last = stop.is_set()
            events = follower.poll()
            got.extend(ids(events))
            rotations[0] += stats(events).rotations
            polls[0] += 1
            if last:
                return
            time.sleep(0.001)

    thread = threading.Thread(target=follow)
    thread.start()
    out = log.open("ab")
    try:
        for n in range(total):
            out.write((line(n) + NOISE).encode())
            if n % 7 == 0:
                out.flush()
            if n and n % every == 0:
                out.flush()
                seen = polls[0]
                rotation = n // every
                if rotation % 2:
                    out.close()
                    log.rename(log.with_name(f"server.log.{rotation}"))
                    out = log.open("ab")
                else:
                    shutil.copy(log, log.with_name(f"server.log.{rotation}"))
                    os.truncate(log, 0)
                while polls[0] < seen + 2:  # the one limit: not two rotations between two polls
                    time.sleep(0.001)
        out.flush()
    finally:
        out.close()
        time.sleep(0.05)
        stop.set()
        thread.join(30)
    assert got == [str(n) for n in range(total)]
    assert rotations[0] == total // every - (1 if total % every == 0 else 0)

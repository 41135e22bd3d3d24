"""BrokerLogFollower on files we write: start position, a file that appears later, rotation by
rename and by copytruncate (alone and during a burst), long lines."""

from __future__ import annotations

import logging
import os
import random
import shutil
import tracemalloc
from datetime import UTC, datetime
from pathlib import Path

import pytest

from exporter.contracts.events import BrokerLogStats, CompleteAppendRetried, CoordinatorLogAtDebug
from exporter.sources.broker_log_tail import _FINGERPRINT_BYTES, LOOK_BACK_BYTES, BrokerLogFollower

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
    return LINE.format(tid, tid).format(datetime.fromtimestamp(_clock[0] / 1000, tz=UTC))


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


SUCCEEDED = (
    "[2026-11-24 05:42:45,453] DEBUG [Transaction State Manager 1]: Updating cap-debug's transaction state to "
    "TxnTransitMetadata(producerId=3, lastProducerId=3, producerEpoch=0, lastProducerEpoch=-1, txnTimeoutMs=120000, "
    "txnState=Empty, topicPartitions=Set(), txnStartTimestamp=-1, txnLastUpdateTimestamp=1795498965447) with "
    "coordinator epoch 0 for cap-debug succeeded (kafka.coordinator.transaction.TransactionStateManager)\n"
)


def test_succeeded_lines_just_before_the_end_say_the_coordinators_clock_is_in_force_once(log):
    """Started at its end, the follower looks back LOOK_BACK_BYTES for the coordinator's `succeeded`
    lines (its logger at DEBUG), says so at its first poll, and counts nothing of them."""
    append(log, SUCCEEDED + lines("old") + NOISE)
    follower = BrokerLogFollower(log, clock=lambda: 1000.0)
    assert follower.poll() == [CoordinatorLogAtDebug(1_000_000)]
    assert follower.poll() == []
    append(log, lines("new"))
    assert ids(follower.poll()) == ["new"]


def test_no_succeeded_line_within_the_look_back_says_nothing(log):
    append(log, SUCCEEDED + "x" * LOOK_BACK_BYTES + "\n" + lines("old"))
    assert BrokerLogFollower(log).poll() == []
    assert BrokerLogFollower(log.with_name("absent.log")).poll() == []


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


def test_a_directory_that_appears_later_is_waited_for_quietly(tmp_path, caplog):
    log = tmp_path / "logs" / "server.log"
    with caplog.at_level(logging.WARNING, "exporter.sources.broker_log_tail"):
        follower = BrokerLogFollower(log)
        assert follower.poll() == []
    log.parent.mkdir()
    append(log, lines("first"))
    assert ids(follower.poll()) == ["first"]
    assert caplog.records == []


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
    log.with_name("server.log.1").write_text(lines("older"))  # an older rotation, there at start
    follower = BrokerLogFollower(log)
    append(log, lines(1))
    assert ids(follower.poll()) == ["1"]
    append(log, lines(2, 3))  # written, not read yet
    log.with_name("server.log.1").rename(log.with_name("server.log.2"))  # logrotate: older copies move on
    shutil.copy(log, log.with_name("server.log.1"))
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
    """The memory the follower holds between polls (tracemalloc: what is allocated since before the
    line began and still is) stays within about twice the limit while an over-long line arrives."""
    limit = 16384
    follower = BrokerLogFollower(log, from_start=True, max_line_bytes=limit)
    text = line("big").replace("topicPartitions=[]", "topicPartitions=[" + "orders-1, " * 40000 + "orders-2]")
    assert len(text) > 20 * limit
    held = 0  # the most, after a poll (a running maximum: a list of every value would count itself)
    tracemalloc.start()
    try:
        events = follower.poll()  # the follower's own first allocations, before the line
        before = tracemalloc.get_traced_memory()[0]
        for start in range(0, len(text), 1000):  # arriving in pieces, as a writer flushes it
            append(log, text[start : start + 1000])
            events = follower.poll()
            held = max(held, tracemalloc.get_traced_memory()[0] - before)
    finally:
        tracemalloc.stop()
    assert held <= 3 * limit, held
    assert ids(events) == ["big"]  # the transactional id is in the head, the logger in the tail
    assert stats(events).truncated == 1
    append(log, "x" * (3 * limit) + "\n" + lines("after"))
    events = follower.poll()
    assert ids(events) == ["after"]
    assert stats(events).truncated == 1


def test_a_file_rotated_before_it_was_ever_read_is_read(log):
    """The follower polls after the file appeared, was written and renamed away: the first poll
    finds only its successor at the path."""
    follower = BrokerLogFollower(log)  # no file yet
    append(log, lines(1, 2))
    log.rename(log.with_name("server.log.2026-11-21-07"))
    append(log, lines(3))
    events = follower.poll()
    assert ids(events) == ["1", "2", "3"]
    assert stats(events).rotations == 1


def test_copytruncate_of_a_file_nothing_was_read_from(log):
    """Renamed, the new file polled while still empty (position 0), then written, copied and
    truncated before the next poll: its first lines are only in the copy."""
    follower = BrokerLogFollower(log)
    append(log, lines(1))
    assert ids(follower.poll()) == ["1"]
    log.rename(log.with_name("server.log.2026-11-21-07"))
    log.touch()
    assert stats(follower.poll()).rotations == 1
    append(log, lines(2, 3))
    shutil.copy(log, log.with_name("server.log.1"))
    os.truncate(log, 0)
    append(log, lines(4))
    events = follower.poll()
    assert ids(events) == ["2", "3", "4"]
    assert stats(events).rotations == 1
    log.with_name("server.log.1").rename(log.with_name("server.log.2"))  # the next copytruncate
    append(log, lines(5))
    shutil.copy(log, log.with_name("server.log.1"))
    os.truncate(log, 0)
    assert ids(follower.poll()) == ["5"]


@pytest.mark.parametrize(
    "names",
    [
        ["server.log.2026-11-21-07", "server.log.2026-11-21-08", "server.log.2026-11-21-09"],  # Kafka 3.x and 4.x
        ["server.log.1", "server.log.1", "server.log.1"],  # size-based, the newest .1 (older ones move on)
    ],
)
def test_renames_between_two_polls_lose_no_file(log, names):
    follower = BrokerLogFollower(log)
    append(log, lines(0))
    assert ids(follower.poll()) == ["0"]
    for n, name in enumerate(names, 1):
        append(log, lines(f"{n}a", f"{n}b"))
        if name == "server.log.1":
            for k in range(n, 1, -1):
                log.with_name(f"server.log.{k - 1}").rename(log.with_name(f"server.log.{k}"))
        log.rename(log.with_name(name))
    append(log, lines("new"))
    events = follower.poll()
    assert ids(events) == ["1a", "1b", "2a", "2b", "3a", "3b", "new"]
    assert stats(events).rotations == 3
    assert ids(follower.poll()) == []


def test_copytruncates_between_two_polls_lose_no_copy(log):
    follower = BrokerLogFollower(log)
    append(log, lines(0))
    assert ids(follower.poll()) == ["0"]
    for n in (1, 2, 3):
        append(log, lines(f"{n}a", f"{n}b"))
        shutil.copy(log, log.with_name(f"server.log-2026112{n}"))  # logrotate's dateext
        os.truncate(log, 0)
    append(log, lines("new"))
    events = follower.poll()
    assert ids(events) == ["1a", "1b", "2a", "2b", "3a", "3b", "new"]
    assert stats(events).rotations == 3


def test_a_copy_still_being_made_is_not_read_twice(log):
    follower = BrokerLogFollower(log)
    log.touch()
    assert follower.poll() == []
    append(log, lines(1, 2))
    copy = log.with_name("server.log.1")
    copy.write_bytes(log.read_bytes()[:100])  # logrotate copying, not truncated yet
    assert ids(follower.poll()) == ["1", "2"]
    copy.write_bytes(log.read_bytes())
    assert ids(follower.poll()) == []
    os.truncate(log, 0)
    append(log, lines(3))
    assert ids(follower.poll()) == ["3"]


def test_compressed_rotations_are_not_read(log):
    follower = BrokerLogFollower(log)
    append(log, lines(1))
    assert ids(follower.poll()) == ["1"]
    log.rename(log.with_name("server.log.2026-11-21-07"))
    log.with_name("server.log.2026-11-21-06.gz").write_text(lines("zipped"))
    append(log, lines(2))
    assert ids(follower.poll()) == ["2"]


def shift_numbered(log: Path) -> None:
    """server.log.N -> server.log.N+1, oldest first: what size-based appenders and logrotate do."""
    numbers = [int(p.suffix[1:]) for p in log.parent.glob("server.log.*") if p.suffix[1:].isdigit()]
    for n in sorted(numbers, reverse=True):
        log.with_name(f"server.log.{n}").rename(log.with_name(f"server.log.{n + 1}"))


@pytest.mark.parametrize("seed", range(60))
def test_rotations_both_ways_under_any_poll_schedule_lose_and_repeat_nothing(log, seed):
    """Numbered lines written in bursts; the file rotated by rename (Kafka's dated names, or numbered
    ones moved on at each rotation) or by copytruncate (logrotate's numbered or dated copies), in
    any order and any number between two polls; lines sometimes arrive in two writes. Every line is
    read once, in order."""
    rng = random.Random(seed)
    numbered_renames = seed % 2  # else Kafka's dated names, and copies numbered by logrotate
    follower = BrokerLogFollower(log)  # no file yet
    got: list[str] = []
    rotations = expected_rotations = written = rotations_so_far = 0
    unrotated = False  # lines written since the last rotation (a rotation of nothing is not seen)

    def poll() -> None:
        nonlocal rotations
        events = follower.poll()
        got.extend(ids(events))
        rotations += stats(events).rotations

    for _ in range(rng.randrange(20, 60)):
        op = rng.choice(["write", "write", "split", "rename", "copytruncate", "poll", "poll"])
        if op in ("rename", "copytruncate"):
            if not unrotated:
                append(log, line(written) + NOISE)
                written += 1
            rotations_so_far += 1
            if op == "rename":
                if numbered_renames:
                    shift_numbered(log)
                log.rename(
                    log.with_name(
                        "server.log.1" if numbered_renames else f"server.log.2026-11-21-{rotations_so_far:02d}"
                    )
                )
                if rng.random() < 0.7:
                    log.touch()  # the appender's new file (else created by the next write)
            else:
                if not numbered_renames:
                    shift_numbered(log)
                shutil.copy(
                    log, log.with_name(f"server.log-2026112{rotations_so_far}" if numbered_renames else "server.log.1")
                )
                os.truncate(log, 0)
            expected_rotations += 1
            unrotated = False
        elif op == "write":
            count = rng.randrange(1, 30)
            append(log, "".join(line(n) + NOISE for n in range(written, written + count)))
            written += count
            unrotated = True
        elif op == "split":
            text = line(written)
            cut = rng.randrange(_FINGERPRINT_BYTES, len(text))  # writers write whole lines, or 8 KiB
            append(log, text[:cut])
            poll()
            append(log, text[cut:])
            written += 1
            unrotated = True
        else:
            poll()
    append(log, line(written) + NOISE)  # the path names a file again (a rename is seen then)
    written += 1
    poll()
    assert got == [str(n) for n in range(written)]
    assert rotations == expected_rotations


def test_unrecognized_lines_are_counted_each_and_warned_about_once(log, caplog):
    """A coordinator line reworded by a future Kafka: counted as unrecognized, never silently 0, and
    one warning with its logger and the line, however many come."""
    reworded = line("x").replace("PendingCompleteTxn[", "PendingCompletion[")
    follower = BrokerLogFollower(log)
    with caplog.at_level(logging.WARNING, "exporter.sources.broker_log_tail"):
        for _ in range(5):
            append(log, reworded * 20 + NOISE)
            events = follower.poll()
            assert stats(events).unrecognized == 20
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 1
    assert "kafka.coordinator.transaction.TransactionMarkerChannelManager line" in warnings[0]
    assert 'txn_exporter_broker_log_skipped_lines_total{reason="unrecognized"}' in warnings[0]
    assert warnings[0].endswith(reworded[:300].rstrip("\n"))

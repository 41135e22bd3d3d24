"""Records appended during a partition's replay are stamped with when a fetch response's high
watermark first showed them readable, not with the delivery after the replay that brought them
(exporter/sources/topic_tail/catch_up.py). The real broker measure of it is in docs/benchmarks.md,
"The exporter's start under load"."""

from __future__ import annotations

import time

from exporter.contracts.events import TransactionLogRecords
from exporter.sources.topic_tail import catch_up as catch_up_module
from exporter.sources.topic_tail.catch_up import CatchUp
from tests.sources.test_topic_tail_replay import tail_replaying
from tests.sources.test_topic_tail_runs import Message


def test_a_record_is_stamped_with_the_earliest_mark_above_it():
    catch_up = CatchUp()
    catch_up.seen(0, 5, 1_000)
    catch_up.seen(0, 5, 1_200)  # the same watermark, later: not a mark
    catch_up.seen(0, 9, 1_200)
    assert catch_up.readable_at(0, 3, 2_000) == 1_000
    assert catch_up.readable_at(0, 4, 2_000) == 1_000
    assert catch_up.readable_at(0, 5, 2_000) == 1_200  # at the first mark's watermark: not below it
    assert catch_up.readable_at(0, 8, 1_150) == 1_150  # never later than its own delivery
    assert catch_up.readable_at(0, 9, 2_000) == 2_000  # above every mark: its delivery
    assert catch_up.marks == {}  # passed: the live path asks nothing more


def test_marks_are_kept_at_most_every_mark_every_ms_and_thinned_to_a_bound(monkeypatch):
    catch_up = CatchUp()
    catch_up.seen(0, 5, 1_000)
    catch_up.seen(0, 7, 1_000 + catch_up_module.MARK_EVERY_MS - 1)  # too soon: skipped
    catch_up.seen(0, 8, 1_000 + catch_up_module.MARK_EVERY_MS)
    assert catch_up.readable_at(0, 6, 5_000) == 1_000 + catch_up_module.MARK_EVERY_MS  # later, still a bound
    monkeypatch.setattr(catch_up_module, "MAX_MARKS", 4)
    for n in range(1, 10):
        catch_up.seen(1, n, n * 1_000)
    marks = list(catch_up.marks[1])
    assert len(marks) <= 4 and marks[-1] == (9, 9_000)
    assert marks == sorted(marks)
    # Every stamp is a mark at or after the first one above the offset: an upper bound.
    for offset in range(9):
        assert catch_up.readable_at(1, offset, 10_000) >= (offset + 1) * 1_000


def test_a_leaders_answer_taken_late_replaces_the_marks_it_dominates():
    catch_up = CatchUp()
    catch_up.seen(0, 3, 1_000)
    catch_up.seen(0, 4, 1_100)  # a fetch response's, noted while the leader's answer was on its way
    catch_up.seen(0, 6, 1_050)  # the leader's: 6 at 1,050, taken after the mark above
    assert list(catch_up.marks[0]) == [(3, 1_000), (6, 1_050)]
    catch_up.seen(0, 5, 1_040)  # an answer older than a higher mark: nothing to add
    assert catch_up.readable_at(0, 4, 2_000) == 1_050


def test_an_answer_asked_in_an_earlier_replay_stamps_no_live_record_of_the_next():
    # The errand that asked during one replay may answer after the partition was dropped and followed
    # afresh. Its watermark is no higher than the new replay's target (the leader's watermark only
    # grows), so it lies below every live record of the new replay: dropped as soon as one is
    # taken, it stamps none of them (and where it pops marks, it says as true a thing, earlier).
    catch_up = CatchUp()
    catch_up.seen(0, 10, 1_000)  # the first replay's marks
    catch_up.drop(0)  # followed afresh: the new replay's target is 12
    catch_up.seen(0, 12, 2_000)
    catch_up.seen(0, 15, 2_020)
    catch_up.seen(0, 11, 1_500)  # the first replay's answer, taken late
    assert list(catch_up.marks[0]) == [(12, 2_000), (15, 2_020)]
    catch_up.drop(0)
    catch_up.seen(0, 11, 1_500)  # ... or taken before the new replay's first mark
    catch_up.seen(0, 12, 2_000)
    assert catch_up.readable_at(0, 12, 3_000) == 3_000  # the first live record (12): no mark above it
    catch_up.seen(0, 14, 2_100)
    assert catch_up.readable_at(0, 13, 3_000) == 2_100


def test_no_mark_before_a_fetch_response_and_drop_forgets():
    catch_up = CatchUp()
    catch_up.seen(0, -1001, 1_000)  # no fetch response for it yet
    assert catch_up.marks == {}
    catch_up.seen(1, 4, 1_000)
    catch_up.drop(1)
    assert catch_up.marks == {}


def received(events):
    return [
        (e.partition, [r.offset for r in e.records], e.replay, e.received_ms)
        for e in events
        if type(e) is TransactionLogRecords
    ]


def test_records_appended_during_the_replay_are_stamped_when_first_seen_readable(monkeypatch):
    tail, consumer, clock = tail_replaying(3)  # partition 0: 3 records to replay
    consumer.high[0] = 5  # two more appended meanwhile: the first fetch response shows them
    consumer.queued = [Message(0, 0), Message(0, 1)]
    clock.now = 1000.5
    assert received(tail.poll(timeout=0)) == []  # (still replaying: nothing handed over yet)
    consumer.high[0] = 6
    consumer.queued = [Message(0, 2), Message(0, 3), Message(0, 4), Message(0, 5)]
    clock.now = 1004.0  # the replay's last delivery, 3.5 s later
    assert received(tail.poll(timeout=0)) == [
        (0, [0, 1, 2], True, 1_004_000),
        (0, [3, 4], False, 1_000_500),  # readable since the first delivery
        (0, [5], False, 1_004_000),  # shown by this delivery's own fetch response
    ]
    consumer.queued = [Message(0, 6)]
    clock.now = 1005.0
    assert received(tail.poll(timeout=0)) == [(0, [6], False, 1_005_000)]


def test_the_leaders_watermarks_asked_during_the_replay_are_marks():
    # The replay's own fetch responses refresh a partition's watermark only every 120-140 ms: here
    # the cached one still shows the history alone, while the leader answers two records more.
    tail, consumer, clock = tail_replaying(3)
    consumer.get_watermark_offsets = lambda tp, timeout=None, cached=False: (0, 3)
    consumer.high[0] = 5
    consumer.queued = [Message(0, 0)]
    clock.now = 1000.5
    assert received(tail.poll(timeout=0)) == []  # asks the leader, on the errands' thread
    deadline = time.monotonic() + 10
    while not tail._fetch._answered and time.monotonic() < deadline:  # (the answer, not yet taken)
        time.sleep(0.01)
    consumer.queued = [Message(0, 1), Message(0, 2), Message(0, 3), Message(0, 4)]
    clock.now = 1004.0
    assert received(tail.poll(timeout=0)) == [
        (0, [0, 1, 2], True, 1_004_000),
        (0, [3, 4], False, 1_000_500),  # readable when the leader answered
    ]

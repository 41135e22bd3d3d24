"""exporter.contracts.lifecycle: the transaction rules, without Spark."""

from exporter.contracts.lifecycle import (
    ABORT,
    CAUSE_CLIENT,
    CAUSE_FENCED,
    CAUSE_TIMEOUT,
    COMMIT,
    COMPLETE_ABORT,
    COMPLETE_COMMIT,
    EMPTY,
    ONGOING,
    PREPARE_ABORT,
    PREPARE_COMMIT,
    TOMBSTONE,
    LifecycleTracker,
    Transition,
    lifecycles,
    pending_at,
    pending_intervals,
)


def run(*ts):
    return list(lifecycles("tx", 3, ts))


def T(offset, ts, state, epoch=0, pid=7, timeout=1000, parts=("t-0",), start=-1, ctv=0):
    return Transition(offset, ts, state, pid, epoch, timeout, parts, start, ctv)


def test_commit_lifecycle_fields():
    (lc,) = run(
        T(0, 5, EMPTY),
        T(1, 100, ONGOING, start=98),
        T(2, 120, ONGOING, parts=("u-1",), start=98),
        T(3, 150, PREPARE_COMMIT),
        T(4, 170, COMPLETE_COMMIT, parts=()),
    )
    assert (lc.result, lc.abort_cause, lc.timed_out) == (COMMIT, None, False)
    assert (lc.begin_ms, lc.prepare_ms, lc.complete_ms) == (98, 150, 170)
    assert (lc.duration_ms, lc.ongoing_ms, lc.markers_ms) == (72, 52, 20)
    assert lc.partitions == {"t-0", "u-1"} and (lc.first_offset, lc.last_offset, lc.records) == (1, 4, 4)
    assert lc.coordinator_partition == 3 and lc.producer_id == 7


def test_client_abort_keeps_the_epoch_and_is_not_a_timeout_even_past_the_deadline():
    (lc,) = run(T(0, 100, ONGOING, start=100), T(1, 5000, PREPARE_ABORT), T(2, 5001, COMPLETE_ABORT))
    assert (lc.result, lc.abort_cause, lc.timed_out) == (ABORT, CAUSE_CLIENT, False)


def test_coordinator_abort_bumps_the_epoch_by_one_past_the_deadline():
    (lc,) = run(
        T(0, 100, ONGOING, epoch=4, start=100),
        T(1, 1101, PREPARE_ABORT, epoch=5, ctv=2),
        T(2, 1105, COMPLETE_ABORT, epoch=5),
    )
    assert (lc.result, lc.abort_cause, lc.timed_out) == (ABORT, CAUSE_TIMEOUT, True)
    assert lc.producer_epoch == 4  # the client's


def test_epoch_fence_before_the_deadline_is_fenced_not_timed_out():
    (lc,) = run(
        T(0, 100, ONGOING, epoch=4, start=100), T(1, 500, PREPARE_ABORT, epoch=5), T(2, 510, COMPLETE_ABORT, epoch=5)
    )
    assert (lc.abort_cause, lc.timed_out) == (CAUSE_FENCED, False)


def test_epoch_bumped_by_two_or_other_producer_is_a_client_abort():
    assert (
        run(T(0, 100, ONGOING, epoch=4, start=100), T(1, 1200, PREPARE_ABORT, epoch=6), T(2, 1201, COMPLETE_ABORT))[
            0
        ].abort_cause
        == CAUSE_CLIENT
    )
    assert (
        run(
            T(0, 100, ONGOING, epoch=4, start=100),
            T(1, 1200, PREPARE_ABORT, epoch=5, pid=8),
            T(2, 1201, COMPLETE_ABORT),
        )[0].abort_cause
        == CAUSE_CLIENT
    )


def test_tv2_client_bumps_on_every_end_txn_so_only_the_deadline_tells():
    client = run(
        T(0, 100, ONGOING, epoch=4, start=100, ctv=2),
        T(1, 300, PREPARE_ABORT, epoch=5, ctv=2),
        T(2, 301, COMPLETE_ABORT, epoch=5, ctv=2),
    )
    timeout = run(
        T(0, 100, ONGOING, epoch=4, start=100, ctv=2),
        T(1, 1101, PREPARE_ABORT, epoch=5, ctv=2),
        T(2, 1101, COMPLETE_ABORT, epoch=5, ctv=2),
    )
    assert client[0].abort_cause == CAUSE_CLIENT and timeout[0].timed_out


def test_open_transactions_come_last_with_no_result():
    done, still = run(
        T(0, 1, ONGOING, start=1),
        T(1, 2, PREPARE_COMMIT),
        T(2, 3, COMPLETE_COMMIT),
        T(3, 10, ONGOING, start=10),
        T(4, 20, PREPARE_COMMIT),
    )
    assert done.result == COMMIT and still.result is None and still.state == PREPARE_COMMIT
    assert still.first_offset == 3 and still.prepare_ms == 20


def test_tombstone_and_orphan_complete_open_nothing():
    assert run(T(0, 1, COMPLETE_COMMIT), T(1, 2, TOMBSTONE), T(2, 3, EMPTY)) == []


def test_replaying_the_open_records_gives_the_same_lifecycle():
    """What the streaming state relies on: an open transaction's records since `open_since`."""
    records = [T(0, 1, EMPTY), T(1, 10, ONGOING, start=10), T(2, 1100, PREPARE_ABORT, epoch=1)]
    tracker = LifecycleTracker("tx", 3)
    for r in records:
        tracker.apply(r)
    since = tracker.open_since
    resumed = LifecycleTracker("tx", 3)
    for r in [r for r in records if r.offset >= since] + [T(3, 1102, COMPLETE_ABORT, epoch=1)]:
        done = resumed.apply(r)
    assert done.timed_out and done.first_offset == 1


def test_pending_at_counts_prepared_not_completed():
    items = run(
        T(0, 0, ONGOING, start=0),
        T(1, 10, PREPARE_COMMIT),
        T(2, 20, COMPLETE_COMMIT),
        T(3, 30, ONGOING, start=30),
        T(4, 40, PREPARE_COMMIT),
    )
    intervals = list(pending_intervals(items))
    assert [pending_at(intervals, t) for t in (9, 10, 19, 20, 39, 40, 10**9)] == [0, 1, 1, 0, 0, 1, 1]


def test_abort_exactly_at_the_deadline_is_not_a_timeout():
    """The coordinator aborts when start + timeout < now: strictly later (as the live model's rule)."""
    (lc,) = run(T(0, 100, ONGOING, epoch=4, start=100), T(1, 1100, PREPARE_ABORT, epoch=5), T(2, 1101, COMPLETE_ABORT))
    assert lc.abort_cause == CAUSE_FENCED and not lc.timed_out

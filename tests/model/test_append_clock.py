"""The coordinator's clock in the model (exporter.model.append_clock): records and their `succeeded`
lines matched in either order, the untimed and the unmatched counted, the switch to the fetch clock
and back, each transition timed at most once."""

from __future__ import annotations

from exporter.contracts.events import (
    CoordinatorChanged,
    CoordinatorLogAtDebug,
    PartitionAssigned,
    PartitionDraining,
    PartitionReplayed,
    TransactionLogAppendFailed,
    TransitionAppended,
)
from exporter.model import CoordinatorModel, ObservationSinks
from exporter.model.append_clock import FIRST_LINE_HOLD_MS, HOLD_MS, LINE_HOLD_MS, AppendClock
from tests.model.builders import S, log_event, snapshot
from tests.model.test_coordinator import ListSink


def clocked_model(here: bool = True, all_partitions: bool = False) -> tuple[CoordinatorModel, list[ListSink]]:
    append = [ListSink() for _ in range(6)]
    model = CoordinatorModel(
        ObservationSinks(append, ListSink(), ListSink()), coordinator_log=True, all_partitions=all_partitions
    )
    model.apply(PartitionAssigned(0, here))
    model.apply(PartitionReplayed(0))
    return model, append


def line(tid: str, state: S, timestamp_ms: int, appended_ms: int, seen_ms: int | None = None) -> TransitionAppended:
    """The `succeeded` line of log_event(tid, state, timestamp_ms=...)'s record (its last update is its
    timestamp there), written at `appended_ms`."""
    return TransitionAppended(
        tid, state, 4000, 2, timestamp_ms, appended_ms, appended_ms + 100 if seen_ms is None else seen_ms
    )


def clock(model: CoordinatorModel):
    return snapshot(model).append_clock


def test_without_lines_the_fetch_clock_times_every_record_at_receipt() -> None:
    """A broker log read: the coordinator's clock is presumed from the start, so a record waits for its
    line; when none comes within the first line's hold (the logger at INFO: a fresh coordinator's first
    line comes within ms), it is timed by the fetch as received, and the fetch clock times the next
    ones at receipt. Meanwhile the tail fetches at its resolution (no line read: not confirmed)."""
    model, append = clocked_model()
    assert clock(model).clock == "coordinator" and not model.coordinator_clock()
    model.apply(log_event("a", S.ONGOING, timestamp_ms=1000, received_ms=1030))
    assert append[S.ONGOING].values == []
    model.apply_batch([], now_ms=1030 + FIRST_LINE_HOLD_MS + 1)
    assert append[S.ONGOING].values == [30] and clock(model).untimed[S.ONGOING] == 0
    assert clock(model).clock == "fetch"
    model.apply(log_event("b", S.ONGOING, timestamp_ms=20_000, received_ms=20_020))
    assert append[S.ONGOING].values == [30, 20]


def test_a_line_brings_the_coordinators_clock_and_times_its_record_in_either_order() -> None:
    model, append = clocked_model()
    model.apply(line("a", S.ONGOING, 1000, 1001))  # the line first
    model.apply(log_event("a", S.ONGOING, timestamp_ms=1000, received_ms=1400))
    model.apply(log_event("a", S.PREPARE_COMMIT, timestamp_ms=2000, received_ms=2400))  # the record first
    assert append[S.PREPARE_COMMIT].values == []  # waiting for its line
    model.apply(line("a", S.PREPARE_COMMIT, 2000, 2002))
    assert append[S.ONGOING].values == [1] and append[S.PREPARE_COMMIT].values == [2]
    row = clock(model)
    assert (
        row.clock == "coordinator"
        and row.coordinator_timed[S.ONGOING] == 1
        and row.coordinator_timed[S.PREPARE_COMMIT] == 1
    )


def test_a_record_whose_line_never_comes_is_counted_untimed_and_a_lone_line_dropped() -> None:
    model, append = clocked_model()
    model.apply(line("x", S.ONGOING, 500, 501))
    model.apply(log_event("a", S.ONGOING, timestamp_ms=1000, received_ms=1010))
    model.apply_batch([line("b", S.ONGOING, 1100, 1101, seen_ms=HOLD_MS + 1500)], now_ms=1010 + HOLD_MS + 1)
    row = clock(model)
    assert append[S.ONGOING].values == []
    assert row.untimed[S.ONGOING] == 1 and row.unmatched[("record", "expired")] == 1
    assert row.clock == "coordinator"  # a line came within the hold: the lines have not stopped
    # A line waits longer for its record (one read in a takeover's replay or a drain comes late).
    assert row.unmatched[("line", "expired")] == 0
    model.apply_batch([], now_ms=601 + LINE_HOLD_MS + 1)
    assert clock(model).unmatched[("line", "expired")] == 1  # x's; b's still waits


def test_when_lines_stop_the_fetch_clock_is_back_and_the_coordinators_returns_with_them(caplog) -> None:
    model, append = clocked_model()
    model.apply(line("a", S.ONGOING, 1000, 1001, seen_ms=1100))
    model.apply(log_event("a", S.ONGOING, timestamp_ms=1000, received_ms=1200))
    model.apply(log_event("b", S.ONGOING, timestamp_ms=2000, received_ms=2200))  # its line never comes
    model.apply_batch([], now_ms=2200 + HOLD_MS + 1)  # timed by the fetch, as received
    assert clock(model).clock == "fetch" and "no `succeeded` line" in caplog.text
    model.apply(log_event("c", S.ONGOING, timestamp_ms=20_000, received_ms=20_010))  # timed at receipt
    model.apply(line("c", S.ONGOING, 20_000, 20_001))  # its line after it: not timed again
    model.apply(line("d", S.ONGOING, 21_000, 21_002))
    model.apply(log_event("d", S.ONGOING, timestamp_ms=21_000, received_ms=21_300))
    row = clock(model)
    assert append[S.ONGOING].values == [1, 200, 10, 2]
    assert row.clock == "coordinator" and row.unmatched[("line", "already_timed")] == 1
    assert row.coordinator_timed[S.ONGOING] == 2 and row.untimed[S.ONGOING] == 0


def test_partitions_another_broker_leads_keep_the_fetch_clock_until_this_one_is_elected() -> None:
    """Following every partition (--all-partitions), the log's elected lines say whose lines it holds."""
    model, append = clocked_model(here=False, all_partitions=True)
    model.apply(line("x", S.ONGOING, 10, 11))
    model.apply(log_event("a", S.ONGOING, timestamp_ms=1000, received_ms=1030))
    assert append[S.ONGOING].values == [30]
    model.apply(CoordinatorChanged(0, elected=True))
    model.apply(log_event("b", S.ONGOING, timestamp_ms=2000, received_ms=2030))
    model.apply(line("b", S.ONGOING, 2000, 2004))
    assert append[S.ONGOING].values == [30, 4]


def test_replayed_records_take_their_lines_without_being_timed_or_counting_them_missing() -> None:
    model, append = clocked_model()
    model.apply(line("a", S.ONGOING, 1000, 1001))
    model.apply(log_event("a", S.ONGOING, timestamp_ms=1000, received_ms=5000, replay=True))
    model.apply_batch([], now_ms=1101 + HOLD_MS + 1)
    row = clock(model)
    assert append[S.ONGOING].values == [] and row.unmatched[("line", "expired")] == 0


def test_a_negative_latency_is_recorded_as_0_and_counted() -> None:
    model, append = clocked_model()
    model.apply(line("a", S.ONGOING, 1000, 998))
    model.apply(log_event("a", S.ONGOING, timestamp_ms=1000, received_ms=1010))
    assert append[S.ONGOING].values == [0] and clock(model).negative == 1


def test_waiting_is_bounded_and_evictions_counted() -> None:
    sinks = [ListSink() for _ in range(6)]
    bounded = AppendClock([sink.record for sink in sinks], max_waiting=3)
    bounded.line(line("z", S.ONGOING, 1, 2))
    for n in range(5):
        bounded.record(("r" + str(n), S.ONGOING, 4000, 2, 1000 + n), 1000 + n, 1100 + n, 4000)
    for n in range(6):
        bounded.line(line(f"l{n}", S.ONGOING, 2000 + n, 2001 + n))
    assert bounded.unmatched[("record", "evicted")] == 2 and bounded.untimed[S.ONGOING] == 2
    assert bounded.unmatched[("line", "evicted")] == 4  # z and l0..l2
    assert bounded.waiting == (3, 3)
    bounded.record(("r4", S.ONGOING, 4000, 2, 1004), 1004, 1104, 4000)  # a repeat: the older counted
    assert bounded.unmatched[("record", "evicted")] == 3 and bounded.waiting == (3, 3)


def test_the_records_count_is_the_timed_and_the_untimed() -> None:
    """As the collector renders it: kafka_transaction_state_log_records_total per target state is the
    histogram's count plus the untimed."""
    model, append = clocked_model()
    model.apply(line("x", S.ONGOING, 1, 2))
    model.apply(log_event("a", S.ONGOING, timestamp_ms=1000, received_ms=1010))
    model.apply(log_event("b", S.ONGOING, timestamp_ms=1001, received_ms=1011))
    model.apply(line("a", S.ONGOING, 1000, 1003))
    model.apply_batch([], now_ms=1011 + HOLD_MS + 1)
    row = clock(model)
    assert len(append[S.ONGOING].values) + row.untimed[S.ONGOING] == 2


def test_lines_a_buffered_appender_holds_back_still_time_their_records_within_the_hold() -> None:
    """An appender that writes lines only when its buffer fills delays them by seconds: the records
    wait for them (up to the hold), and are timed by the line's own time, not its late arrival."""
    model, append = clocked_model()
    model.apply(line("w", S.ONGOING, 10, 11))
    for n in range(5):
        model.apply(log_event(f"b{n}", S.ONGOING, timestamp_ms=1000 + n, received_ms=1010 + n))
    model.apply_batch([], now_ms=1010 + HOLD_MS - 500)  # nothing expires yet
    model.apply_batch(
        [line(f"b{n}", S.ONGOING, 1000 + n, 1002 + n, seen_ms=1010 + HOLD_MS - 100) for n in range(5)],
        now_ms=1010 + HOLD_MS - 100,
    )
    row = clock(model)
    assert append[S.ONGOING].values == [2] * 5 and row.untimed[S.ONGOING] == 0


def test_leadership_moving_mid_transaction_loses_no_count() -> None:
    """The broker resigns a partition while a record waits for its line: the record is counted when
    its wait ends (untimed), and the partition's next records are timed by the fetch (following every
    partition: the records of the partition's next leader are counted here too)."""
    model, append = clocked_model(all_partitions=True)
    model.apply(line("w", S.ONGOING, 10, 11))
    model.apply(log_event("a", S.ONGOING, timestamp_ms=1000, received_ms=1010))
    model.apply(CoordinatorChanged(0, elected=False))
    model.apply(log_event("a", S.PREPARE_COMMIT, timestamp_ms=1100, received_ms=1130))
    model.apply_batch([line("x", S.ONGOING, 2000, 2001, seen_ms=2100)], now_ms=1010 + HOLD_MS + 1)
    row = clock(model)
    assert append[S.PREPARE_COMMIT].values == [30] and row.untimed[S.ONGOING] == 1
    assert len(append[S.ONGOING].values) + row.untimed[S.ONGOING] == 1


def test_lines_in_the_log_before_the_start_bring_the_coordinators_clock_until_records_wait_in_vain() -> None:
    """CoordinatorLogAtDebug (the log held `succeeded` lines when the exporter started): the coordinator's
    clock from the start, so an idle exporter fetches for freshness; records that then wait out the hold
    with no line bring the fetch clock back, timed by it as received."""
    model, append = clocked_model()
    model.apply(CoordinatorLogAtDebug(seen_ms=500))
    assert model.coordinator_clock() and clock(model).clock == "coordinator"
    model.apply(log_event("a", S.ONGOING, timestamp_ms=1000, received_ms=1030))
    assert append[S.ONGOING].values == []  # waits for its line
    model.apply_batch([], now_ms=1030 + HOLD_MS + 1)
    assert not model.coordinator_clock() and append[S.ONGOING].values == [30]
    assert clock(model).untimed[S.ONGOING] == 0 and clock(model).unmatched["record", "expired"] == 0


def test_a_drained_partitions_records_are_timed_by_this_brokers_lines_and_those_without_one_say_why() -> None:
    """Beside its own broker only (no --all-partitions), every record counted is its broker's append:
    a resignation changes no timing, a drain's records take their lines, and a record with no line is
    untimed for a reason: the coordinator logged its append as failed, or its broker lost the partition."""
    model, append = clocked_model()
    model.apply(line("w", S.ONGOING, 10, 11))
    model.apply(CoordinatorChanged(0, elected=False, epoch=3))
    model.apply(PartitionDraining(0))
    assert snapshot(model).transactions_by_state == (0,) * 6  # the new leader's exporter shows it
    model.apply(log_event("a", S.ONGOING, timestamp_ms=1000, received_ms=1010))
    model.apply(line("a", S.ONGOING, 1000, 1002))
    model.apply(log_event("b", S.PREPARE_COMMIT, timestamp_ms=1100, received_ms=1130))
    model.apply(TransactionLogAppendFailed(S.PREPARE_COMMIT, "NOT_LEADER_OR_FOLLOWER", "b", seen_ms=1120))
    model.apply(log_event("c", S.ONGOING, timestamp_ms=1200, received_ms=1230))
    model.apply_batch([], now_ms=1230 + HOLD_MS + 1)
    row = clock(model)
    assert append[S.ONGOING].values == [2] and row.clock == "coordinator"  # (no reason to fall back)
    assert row.untimed[S.PREPARE_COMMIT] == 1 and row.untimed[S.ONGOING] == 1
    assert row.unmatched[("record", "append_failed")] == 1
    assert row.unmatched[("record", "leadership_lost")] == 1
    assert row.unmatched[("record", "expired")] == 0


def test_a_record_waiting_when_its_broker_loses_the_partition_is_untimed_for_that_and_keeps_the_clock() -> None:
    """The broker killed with the record's line in its log's buffer: the record was read while the
    partition was still its broker's, and the drain began as it waited (a dead broker is fenced after
    the controller's session timeout, within the hold)."""
    model, append = clocked_model()
    model.apply(log_event("a", S.ONGOING, timestamp_ms=1000, received_ms=1010))
    model.apply(PartitionDraining(0))
    model.apply_batch([], now_ms=1010 + HOLD_MS + 1)
    row = clock(model)
    assert append[S.ONGOING].values == [] and row.untimed[S.ONGOING] == 1
    assert row.unmatched[("record", "leadership_lost")] == 1 and row.clock == "coordinator"

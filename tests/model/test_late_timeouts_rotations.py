"""Coordinator view of KIP-664/588/890: late ONGOING transactions, timeout aborts, producer-id
rotations, transaction durations."""

from __future__ import annotations

import pytest

from exporter.codec import TransactionLogValue, decode_record, encode_key, encode_value
from exporter.contracts.events import PartitionAssigned, PartitionReplayed, TransactionLogRecords
from exporter.model import CoordinatorModel, ObservationSinks, TrackedId
from tests.model.builders import S, snapshot
from tests.model.test_coordinator import ListSink, live_partition

TIMEOUT_MS = 10_000


def event(
    tid: str,
    state: S,
    *,
    pid: int = 4000,
    epoch: int = 2,
    start_ms: int = 1_000_000,
    at_ms: int = 1_000_000,
    timeout_ms: int = TIMEOUT_MS,
    tv: int = 0,
    replay: bool = False,
) -> TransactionLogRecords:
    partitions = {"orders": [0]} if state in (S.ONGOING, S.PREPARE_COMMIT, S.PREPARE_ABORT) else {}
    value = TransactionLogValue(
        version=1,
        producer_id=pid,
        producer_epoch=epoch,
        transaction_timeout_ms=timeout_ms,
        state=state,
        partitions=partitions,
        last_update_timestamp_ms=at_ms,
        start_timestamp_ms=start_ms if partitions else -1,
        client_transaction_version=tv,
    )
    record = decode_record(encode_key(tid), encode_value(value), 0, at_ms)
    return TransactionLogRecords(0, [record], at_ms + 2, replay)


def new_model() -> tuple[CoordinatorModel, list[ListSink]]:
    durations = [ListSink() for _ in range(3)]  # commit, abort, timeout
    model = CoordinatorModel(ObservationSinks([ListSink() for _ in range(6)], ListSink(), ListSink(), durations))
    live_partition(model)
    return model, durations


def test_packing_round_trips_negative_ids_and_unsigned_epochs():
    """The record path packs each id's state, producer id and epoch into one int; what it packs is
    what the model's query reads back (the epoch as the unsigned 16 bits written)."""
    model, _ = new_model()
    cases = (
        (S.EMPTY, 0, 0),
        (S.COMPLETE_ABORT, -1, -1),
        (S.ONGOING, 2**53, 32767),
        (S.PREPARE_COMMIT, 123456789, -32768),
    )
    for n, (state, pid, epoch) in enumerate(cases):
        model.apply(event(f"t{n}", state, pid=pid, epoch=epoch))
        assert model.tracked_id(f"t{n}") == TrackedId(state, pid, epoch & 0xFFFF)
    assert model.tracked_id("never") is None


def test_late_is_ongoing_past_its_own_timeout_plus_padding():
    model, _ = new_model()
    model.apply(event("short", S.ONGOING, start_ms=1_000_000, timeout_ms=10_000))
    model.apply(event("long", S.ONGOING, start_ms=1_000_000, timeout_ms=60_000))
    padding = 5_000
    assert snapshot(model, 1_015_000, padding).late_transactions == 0  # deadline + padding, not past it
    assert snapshot(model, 1_015_001, padding).late_transactions == 1
    assert snapshot(model, 1_065_001, padding).late_transactions == 2
    # Adding partitions (ONGOING again) keeps the start; prepare or tombstone ends lateness.
    model.apply(event("long", S.ONGOING, start_ms=1_000_000, at_ms=1_001_000, timeout_ms=60_000))
    assert snapshot(model, 1_065_001, padding).late_transactions == 2
    model.apply(event("short", S.PREPARE_COMMIT, at_ms=1_020_000))
    assert snapshot(model, 1_065_001, padding).late_transactions == 1


def test_late_gauge_waits_for_the_replay_to_finish():
    model = CoordinatorModel(ObservationSinks([ListSink() for _ in range(6)], ListSink(), ListSink()))
    model.apply(PartitionAssigned(0))
    model.apply(event("a", S.ONGOING, replay=True))
    assert snapshot(model, 10**9, 0).late_transactions == 0
    model.apply(PartitionReplayed(0))
    assert snapshot(model, 10**9, 0).late_transactions == 1


@pytest.mark.parametrize("tv", [0, 2])
def test_coordinator_timeout_abort_is_counted_and_timed_as_timeout(tv):
    model, durations = new_model()
    model.apply(event("t", S.ONGOING, epoch=1, tv=tv))
    # The sweep found start + timeout < now: PREPARE_ABORT with the epoch bumped once.
    model.apply(event("t", S.PREPARE_ABORT, epoch=2, at_ms=1_000_000 + TIMEOUT_MS + 400, tv=tv))
    model.apply(event("t", S.COMPLETE_ABORT, epoch=2, at_ms=1_000_000 + TIMEOUT_MS + 410, tv=tv))
    assert snapshot(model).timeouts == 1
    assert [d.values for d in durations] == [[], [], [TIMEOUT_MS + 400]]


def test_tv0_client_abort_keeps_the_epoch_and_is_not_a_timeout_even_late():
    model, durations = new_model()
    model.apply(event("c", S.ONGOING, epoch=1))
    model.apply(event("c", S.PREPARE_ABORT, epoch=1, at_ms=1_000_000 + TIMEOUT_MS + 400))
    assert snapshot(model).timeouts == 0
    assert [len(d.values) for d in durations] == [0, 1, 0]


def test_tv2_client_abort_bumps_the_epoch_but_comes_before_the_deadline():
    model, durations = new_model()
    model.apply(event("c", S.ONGOING, epoch=1, tv=2))
    model.apply(event("c", S.PREPARE_ABORT, epoch=2, at_ms=1_000_000 + 300, tv=2))
    assert snapshot(model).timeouts == 0
    assert durations[1].values == [300]


def test_fence_before_the_deadline_is_not_a_timeout():
    model, _ = new_model()
    model.apply(event("f", S.ONGOING, epoch=1))
    model.apply(event("f", S.PREPARE_ABORT, epoch=2, at_ms=1_000_500))  # a new instance's InitProducerId
    assert snapshot(model).timeouts == 0


def test_replayed_timeouts_and_rotations_are_not_counted():
    model = CoordinatorModel(ObservationSinks([ListSink() for _ in range(6)], ListSink(), ListSink()))
    model.apply(PartitionAssigned(0))
    model.apply(event("t", S.ONGOING, epoch=1, replay=True))
    model.apply(event("t", S.PREPARE_ABORT, epoch=2, at_ms=1_000_000 + TIMEOUT_MS + 1, replay=True))
    model.apply(event("t", S.EMPTY, pid=5000, epoch=0, replay=True))
    assert (snapshot(model).timeouts, snapshot(model).producer_id_rotations) == (0, 0)


def test_producer_id_change_is_a_rotation_but_a_new_or_expired_id_is_not():
    model, _ = new_model()
    model.apply(event("r", S.EMPTY, pid=10, epoch=32766))
    model.apply(event("r", S.EMPTY, pid=10, epoch=32767))  # epoch bump: same producer id
    assert snapshot(model).producer_id_rotations == 0
    model.apply(event("r", S.EMPTY, pid=11, epoch=0))  # epoch exhausted: new producer id
    assert snapshot(model).producer_id_rotations == 1
    tombstone = decode_record(encode_key("r"), None, 0, 1_000_000)
    model.apply(TransactionLogRecords(0, [tombstone], 1_000_002, False))
    model.apply(event("r", S.EMPTY, pid=99, epoch=0))  # expired, then reused: not a rotation
    assert snapshot(model).producer_id_rotations == 1


def test_commit_duration_is_start_to_prepare():
    model, durations = new_model()
    model.apply(event("d", S.ONGOING, start_ms=1_000_000, at_ms=1_000_000))
    model.apply(event("d", S.ONGOING, start_ms=1_000_000, at_ms=1_000_100))
    model.apply(event("d", S.PREPARE_COMMIT, start_ms=1_000_000, at_ms=1_000_750))
    model.apply(event("d", S.COMPLETE_COMMIT, start_ms=1_000_000, at_ms=1_000_760))
    assert [d.values for d in durations] == [[750], [], []]


def test_observations_carry_the_transaction_and_a_completion_the_prepares_producer_id():
    """Exemplars name the transaction behind an observation. KIP-890 TV2 rotates the producer id at
    an EndTxn: the COMPLETE_* record carries the next id, while the markers were written under the
    prepare's, which the marker completion keeps."""
    append = [ListSink() for _ in range(6)]
    commit, durations = ListSink(), [ListSink() for _ in range(3)]
    model = CoordinatorModel(ObservationSinks(append, commit, ListSink(), durations))
    live_partition(model)
    model.apply(event("x", S.ONGOING, pid=4000, epoch=32766, tv=2))
    model.apply(event("x", S.PREPARE_COMMIT, pid=4000, epoch=32767, at_ms=1_000_100, tv=2))
    model.apply(event("x", S.COMPLETE_COMMIT, pid=4001, epoch=0, at_ms=1_000_130, tv=2))
    assert append[S.ONGOING].transactions == [("x", 4000)]
    assert append[S.PREPARE_COMMIT].transactions == [("x", 4000)]
    assert append[S.COMPLETE_COMMIT].transactions == [("x", 4001)]
    assert (commit.values, commit.transactions) == ([30], [("x", 4000)])
    assert durations[0].transactions == [("x", 4000)]

"""The coordinator's own health in the model: its `__transaction_state` loads (from its log lines) and
the producer epochs' headroom (from the records)."""

from __future__ import annotations

from exporter.contracts.bug_facts import CoordinatorLog
from exporter.contracts.events import (
    CoordinatorChanged,
    CoordinatorLoadFinished,
    CoordinatorLoadStarted,
    CoordinatorStarting,
    PartitionAssigned,
    PartitionReplayed,
    PartitionRevoked,
)
from exporter.model.coordinator_loads import LOAD_BUCKETS_MS
from tests.model.builders import S, log_event, snapshot
from tests.model.test_late_timeouts_rotations import event, new_model


def loads(model):
    return snapshot(model).coordinator_loads


def test_a_partition_loads_from_its_loading_line_to_its_finished_line():
    model, _ = new_model()
    model.apply(CoordinatorLoadStarted(3, epoch=0, seen_ms=1_000))
    model.apply(CoordinatorLoadStarted(4, epoch=0, seen_ms=1_500))
    taken = loads(model)
    assert (taken.loading, taken.oldest_load_started_ms) == (2, 1_000)
    model.apply(CoordinatorLoadFinished(3, transactions=5, duration_ms=40, scheduler_ms=2))
    taken = loads(model)
    assert (taken.loading, taken.oldest_load_started_ms) == (1, 1_500)
    model.apply(CoordinatorLoadFinished(4, transactions=0, duration_ms=400_000, scheduler_ms=0))
    taken = loads(model)
    assert (taken.loading, taken.oldest_load_started_ms) == (0, None)
    # 40 ms in the bucket up to 50, 400 s above the last bound; cumulative, the last is every load.
    assert taken.duration_buckets[LOAD_BUCKETS_MS.index(25)] == 0
    assert taken.duration_buckets[LOAD_BUCKETS_MS.index(50)] == 1
    assert taken.duration_buckets[-2:] == (1, 2)
    assert taken.duration_sum_ms == 400_040


def test_a_load_never_finished_stays_loading_across_resignation_until_a_restart():
    """Kafka ends every read with its Finished line (a resignation stops the read early): only a broker
    restart ends a load without one, and then nothing is loading any more."""
    model, _ = new_model()
    model.apply(CoordinatorLoadStarted(3, epoch=0, seen_ms=1_000))
    model.apply(CoordinatorChanged(3, elected=False, epoch=0))
    assert loads(model).loading == 1
    model.apply(CoordinatorStarting())
    assert (loads(model).loading, loads(model).oldest_load_started_ms) == (0, None)


def test_a_reload_while_loading_keeps_the_first_start():
    model, _ = new_model()
    model.apply(CoordinatorLoadStarted(3, epoch=0, seen_ms=1_000))
    model.apply(CoordinatorLoadStarted(3, epoch=0, seen_ms=2_000))
    assert (loads(model).loading, loads(model).oldest_load_started_ms) == (1, 1_000)


def test_only_a_load_at_the_same_epoch_without_a_resignation_is_without_a_leader_change():
    model, _ = new_model()

    def load(partition: int, epoch: int) -> None:
        model.apply(CoordinatorLoadStarted(partition, epoch))
        model.apply(CoordinatorLoadFinished(partition, 0, 1, 0))

    load(3, 0)  # the first load seen: nothing to compare with
    load(3, 0)  # KAFKA-15468: the same leader epoch, no resignation
    load(3, 0)
    assert loads(model).reloads_without_leader_change == 2
    load(3, 1)  # a leader epoch bumped while this broker stayed leader: a leadership change, normal
    model.apply(CoordinatorChanged(3, elected=False, epoch=1))
    load(3, 1)  # elected again after resigning (in practice at a higher epoch)
    load(4, 1)  # another partition at the same epoch
    model.apply(CoordinatorStarting())
    load(4, 1)  # the first load after a restart
    assert loads(model).reloads_without_leader_change == 2


def test_epochs_near_the_top_are_counted_by_transaction_version():
    model, _ = new_model()
    model.apply(event("tv2-near", S.ONGOING, epoch=31_767, tv=2))
    model.apply(event("tv2-far", S.ONGOING, epoch=31_766, tv=2))
    model.apply(event("tv0-near", S.EMPTY, epoch=32_766, tv=0))
    taken = snapshot(model)
    assert taken.ids_near_epoch_exhaustion == {"2": 1, "0": 1}
    assert taken.highest_producer_epoch == {"2": 31_767, "0": 32_766}

    # A TV2 producer id rotated at the top starts again at epoch 0: no longer near, the high mark stays.
    model.apply(event("tv2-near", S.COMPLETE_COMMIT, pid=4001, epoch=0, tv=2))
    model.apply(log_event("tv0-near", None))  # expired: a tombstone
    taken = snapshot(model)
    assert taken.ids_near_epoch_exhaustion == {"2": 0, "0": 0}
    assert taken.highest_producer_epoch == {"2": 31_767, "0": 32_766}


def test_epoch_headroom_is_of_the_live_partitions():
    model, _ = new_model()
    model.apply(PartitionAssigned(1))  # replaying: its state is not reported yet
    replayed = event("replayed", S.ONGOING, epoch=32_000, tv=2, replay=True)
    replayed.partition = 1
    model.apply(replayed)
    assert snapshot(model).ids_near_epoch_exhaustion == {}
    model.apply(PartitionReplayed(1))
    assert snapshot(model).ids_near_epoch_exhaustion == {"2": 1}
    model.apply(PartitionRevoked(1))
    assert (snapshot(model).ids_near_epoch_exhaustion, snapshot(model).highest_producer_epoch) == ({}, {})


def test_the_known_bug_check_gets_each_partitions_loads():
    """What the coordinator's log showed of each partition, as the known-bug predicates read it
    (exporter.contracts.bug_facts.CoordinatorLog): its load under way, its latest load and reload."""
    model, _ = new_model()
    model.apply(CoordinatorLoadStarted(3, epoch=0, seen_ms=1_000))
    model.apply(CoordinatorLoadFinished(3, 0, 5, 0, seen_ms=1_005))
    model.apply(CoordinatorLoadStarted(3, epoch=0, seen_ms=2_000))  # again at its epoch: a reload
    model.apply(CoordinatorLoadStarted(4, epoch=1, seen_ms=3_000))  # never finished
    assert model.coordinator_logs() == {
        3: CoordinatorLog(loading_since_ms=2_000, last_load_ms=2_000, last_same_epoch_reload_ms=2_000),
        4: CoordinatorLog(loading_since_ms=3_000, last_load_ms=3_000, last_same_epoch_reload_ms=None),
    }

"""CoordinatorLoads: the coordinator's loads of its `__transaction_state` partitions, from its log.

A broker elected coordinator of a partition reads the partition into its cache before it serves the
partition's transactional ids (they get COORDINATOR_LOAD_IN_PROGRESS meanwhile). Its
TransactionStateManager logs `Loading ... at epoch <e>` when the scheduled load starts to read and
`Finished loading ... in <ms> milliseconds` when the read ends (exporter.broker_log.lines). From them:

- Loading now: a partition from its `Loading` line to its `Finished loading` line. A load that never
  finishes (KAFKA-17941: a segment ending in an empty batch looped the read forever before 3.9.2 and
  4.0.0) stays loading, and its age grows. Kafka ends every read with the `Finished` line, even when the
  partition moves away meanwhile (the read stops early), so a resignation does not end a load here; a
  broker restart does (CoordinatorStarting: a load under way when a broker died never finishes).
- Each load's duration: the `Finished` line's own figure, the time Kafka records in its
  partition-load-time-max/avg (from the load's scheduling, at the election, to the end of the read).
- Loads without a leadership change: a load at the epoch of the partition's previous load here, with
  no resignation between (KAFKA-15468: before 3.8.0 a KRaft broker reloaded a partition it already
  led on every change of its ISR, at the same leader epoch). A load at a new epoch is a leadership
  change, normal even when this broker led before (a leader epoch bumped while it stayed leader
  still reloads once the bug is fixed). The first load the exporter sees of a partition has nothing to
  compare with.
"""

from __future__ import annotations

from exporter.contracts.bug_facts import CoordinatorLog
from exporter.contracts.events import CoordinatorLoadFinished, CoordinatorLoadStarted
from exporter.model.reading import CoordinatorLoadsRow

# Bucket bounds of the load durations (ms): from a few ms (an empty partition) to the 5 minutes
# after which a load is taken as stuck (KAFKA-17941); a big partition takes seconds to minutes.
LOAD_BUCKETS_MS: tuple[int, ...] = (5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000, 60000, 120000, 300000)


class CoordinatorLoads:
    """Not thread-safe: the model applies its events and reads its row under its own lock."""

    def __init__(self) -> None:
        # Partition -> when its load's `Loading` line was read (ms), while it loads.
        self._loading: dict[int, int] = {}
        # Partition -> the epoch of its last load here, until it resigns (the reload rule above).
        self._epochs: dict[int, int] = {}
        # Partition -> when its latest load, and its latest reload without a leadership change, started
        # (ms): the facts of the known bugs a load leaves (exporter.contracts.known_bugs).
        self._last_load_ms: dict[int, int] = {}
        self._last_reload_ms: dict[int, int] = {}
        # Finished loads by bucket (not cumulative; the last: above the last bound), and their sum.
        self._buckets = [0] * (len(LOAD_BUCKETS_MS) + 1)
        self._sum_ms = 0
        self._reloads = 0

    def started(self, event: CoordinatorLoadStarted) -> None:
        partition = event.partition
        if self._epochs.get(partition) == event.epoch:
            self._reloads += 1
            self._last_reload_ms[partition] = event.seen_ms
        self._epochs[partition] = event.epoch
        self._last_load_ms[partition] = event.seen_ms
        # A second load scheduled while one runs (a reload) keeps the first one's start: the partition
        # has not been served since.
        self._loading.setdefault(partition, event.seen_ms)

    def finished(self, event: CoordinatorLoadFinished) -> None:
        self._loading.pop(event.partition, None)
        duration_ms = max(event.duration_ms, 0)  # the broker's wall clock stepped back mid-load
        bucket = 0
        while bucket < len(LOAD_BUCKETS_MS) and duration_ms > LOAD_BUCKETS_MS[bucket]:
            bucket += 1
        self._buckets[bucket] += 1
        self._sum_ms += duration_ms

    def resigned(self, partition: int) -> None:
        self._epochs.pop(partition, None)

    def restarted(self) -> None:
        self._loading.clear()
        self._epochs.clear()

    def logs(self) -> dict[int, CoordinatorLog]:
        """What the log showed of each partition it loaded, for the known-bug check."""
        return {
            partition: CoordinatorLog(
                loading_since_ms=self._loading.get(partition),
                last_load_ms=last_load_ms,
                last_same_epoch_reload_ms=self._last_reload_ms.get(partition),
            )
            for partition, last_load_ms in self._last_load_ms.items()
        }

    def row(self) -> CoordinatorLoadsRow:
        cumulative = []
        running = 0
        for count in self._buckets:
            running += count
            cumulative.append(running)
        return CoordinatorLoadsRow(
            loading=len(self._loading),
            oldest_load_started_ms=min(self._loading.values(), default=None),
            duration_buckets=tuple(cumulative),
            duration_sum_ms=self._sum_ms,
            reloads_without_leader_change=self._reloads,
        )

"""Replay: a newly followed partition's history, kept as each transactional id's last record in a
bounded window and handed to the model decoded, in offset order.

A newly assigned partition is read from its first offset up to the high watermark seen at assignment
with `replay=True`, which rebuilds state without observing latency; `PartitionReplayed` marks the
switch to live records. (A record this exporter counts, of a takeover's own epoch, is not put in the
window: the tail hands the window over first and the record on as counted, counting.py.) Only each transactional id's last record of a replay window is decoded (see
Replay.hand_over): a replayed record matters only as the state it leaves, which a later record of the
same id overwrites, as the broker's own load of the partition keeps the last."""

from __future__ import annotations

import gc
import time
from collections.abc import Callable
from operator import attrgetter

from exporter.codec import DecodeError, decode_record
from exporter.contracts.events import PartitionReplayed, TopicEvent, TransactionLogRecords, UndecodableRecord
from exporter.sources.topic_tail.topic import Fetched

_BY_OFFSET = attrgetter("offset")
# A replaying partition's window of last records is decoded and handed to the model once it holds
# this many transactional ids, so a replay of millions of ids keeps a bounded number of messages
# (about 600 bytes each with their key and value: 10 MiB a window). Ids with more records than
# that between two of theirs are decoded more than once, which costs time, never correctness.
WINDOW_IDS = 16_384


class Replay:
    """The replaying partitions' windows: the tail's loop puts each record in its partition's window
    by key (`windows`; a later record of the key replaces it undecoded), and hands the window over
    once it holds `window_ids` ids, and when the replay ends."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self.window_ids = WINDOW_IDS
        # Replaying partitions -> their records not yet decoded: the last message of each key.
        self.windows: dict[int, dict[bytes, Fetched]] = {}

    def start(self, partition: int) -> None:
        self.windows[partition] = {}

    def drop(self, partition: int) -> None:
        """`partition` is followed no more: its window goes undecoded."""
        self.windows.pop(partition, None)

    def hand_over(self, partition: int, events: list[TopicEvent]) -> None:
        """Decodes the replay window's last records and hands them to the model as one replay run,
        in offset order; the window starts again empty."""
        window = self.windows[partition]
        if not window:
            return
        self.windows[partition] = {}
        records = []
        # Paused for the loop: every record made here outlives it, cycle-free, so the cyclic collector
        # would walk the growing list for nothing, about 40% of the hand-over's time
        # (docs/benchmarks.md#replay-against-the-brokers-own-load).
        collecting = gc.isenabled()
        gc.disable()
        try:
            for key, message in window.items():
                offset = message.offset()
                try:
                    records.append(decode_record(key, message.value(), offset, message.timestamp()[1], False))
                except DecodeError as e:
                    events.append(UndecodableRecord(partition, offset, e))
        finally:
            if collecting:
                gc.enable()
        if records:
            records.sort(key=_BY_OFFSET)
            events.append(TransactionLogRecords(partition, records, int(self._clock() * 1000), True))

    def end(self, partition: int, events: list[TopicEvent], takeover_replay_ms: int | None = None) -> None:
        """`partition`'s replay is done: its window handed over, then PartitionReplayed."""
        self.hand_over(partition, events)
        del self.windows[partition]
        events.append(PartitionReplayed(partition, takeover_replay_ms))

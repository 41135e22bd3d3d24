"""CatchUp: when the records appended during a partition's replay were known to be readable.

A partition's replay reads up to the high watermark seen at assignment; what the coordinator appends
meanwhile comes after it, live, once the replay is done. Stamped with the delivery that brought it,
such a record's append-latency bound would be the replay's length (p99 1-11 s the minute after each
start at 200 transactions/s a broker: docs/benchmarks.md#the-exporters-start-under-load). So while a
partition replays, its leader is asked for its high watermark every resolution, and each delivery
notes those answers and the watermark its partition's last fetch response carried, with when: every
record below it had been appended by then. A live record is stamped with the earliest such moment
above its offset, never later than its own delivery; the bound stays an upper bound (the watermark
is read before the clock), as tight as the leaders' answers come (every resolution) and no tighter
than MARK_EVERY_MS.
"""

from __future__ import annotations

from collections import deque

# Marks are kept at most this often (the default resolution: the leaders are asked for the
# watermarks every resolution during a replay), and at most this many a partition (then every other
# one is dropped): a replay under load sees its partitions' watermarks move with every append batch,
# and a replay of an hour's history at 1,500 transactions/s (about 70 s) would otherwise keep
# thousands of them. Dropping a mark only stamps the records below it with the next, later one: still
# an upper bound, at most MARK_EVERY_MS later until a partition's marks span more than MAX_MARKS of it.
MARK_EVERY_MS = 10
MAX_MARKS = 1024


class CatchUp:
    def __init__(self) -> None:
        # Partition -> (high watermark, when it was seen, ms), both ascending: the marks above the
        # offsets taken so far. Marks below them are dropped as the offsets pass them, and a partition
        # with none left is dropped: the live path asks only `partition in marks`.
        self.marks: dict[int, deque[tuple[int, int]]] = {}

    def seen(self, partition: int, high: int, at_ms: int) -> None:
        """`partition`'s high watermark was `high` (a fetch response's or its leader's answer, read
        before the clock gave `at_ms`)."""
        if high < 0:
            return  # no fetch response for it yet
        marks = self.marks.get(partition)
        if marks is None:
            self.marks[partition] = deque([(high, at_ms)])
            return
        # A leader's answer is taken after the deliveries that came while it was asked (it comes from
        # another thread): it replaces the marks noted since with no higher watermark.
        dominated = False
        while marks and marks[-1][1] >= at_ms and marks[-1][0] <= high:
            marks.pop()
            dominated = True
        if dominated or (high > marks[-1][0] and at_ms >= marks[-1][1] + MARK_EVERY_MS):
            if len(marks) >= MAX_MARKS:
                marks = self.marks[partition] = deque(list(marks)[1::2])  # the newest one stays
            marks.append((high, at_ms))

    def readable_at(self, partition: int, offset: int, received_ms: int) -> int:
        """When the record at `offset` of a partition with marks was known readable: the earliest mark
        above it, or `received_ms` if none is (or it is later). Offsets are asked in ascending order."""
        marks = self.marks[partition]
        while marks[0][0] <= offset:
            marks.popleft()
            if not marks:
                del self.marks[partition]
                return received_ms
        return min(marks[0][1], received_ms)

    def drop(self, partition: int) -> None:
        """`partition` is followed no more (or afresh: its replay starts again)."""
        self.marks.pop(partition, None)

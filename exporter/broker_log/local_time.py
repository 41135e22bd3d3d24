"""The broker log's times on the UTC clock, learned from its own lines.

Kafka's default layout writes `[%d]`, the JVM's local time (`yyyy-MM-dd HH:mm:ss,SSS`, no zone), and
the sidecar's own zone need not be the broker's. Every `succeeded` line also names its transition's
TransactionLastUpdateTimestampMs, UTC epoch ms set by the same coordinator a few ms before the append:
the line's local time minus it is the zone's offset plus that short wait. Offsets are whole quarter
hours (UTC+05:45 included), so rounding that difference to the nearest quarter hour gives the offset
exactly while the wait is under 7.5 minutes.

The offset in force is kept, not taken from each line alone: a line whose own difference rounds to
another offset is either the zone changing its offset (a DST change) or an append that took over
7.5 minutes. The time the exporter read the line tells them apart (a line is read within seconds of
being written, so the local time minus the read time rounds to the offset in force when it was
written): the offset is re-learned only when both witnesses agree.

`log4j2`'s `%d{UNIX_MILLIS}` (13 digits) is UTC already and needs no offset.
"""

from __future__ import annotations

from datetime import date

QUARTER_HOUR_MS = 15 * 60 * 1000
_HALF_QUARTER_HOUR_MS = QUARTER_HOUR_MS // 2
_DAY_MS = 86_400_000
_EPOCH_ORDINAL = date(1970, 1, 1).toordinal()
# `yyyy-MM-dd HH:mm:ss,` of recent lines -> its ms as if UTC; small (a second's lines share one entry).
_SECONDS_KEPT = 64


class LocalTimes:
    """Reads a frame's time and places it in UTC (`place`), keeping the offset in force."""

    def __init__(self) -> None:
        self.offset_ms: int | None = None  # local time minus UTC, once learned
        self._seconds: dict[bytes, int] = {}

    def place(self, text: bytes, witness_utc_ms: int, read_ms: int) -> int | None:
        """UTC epoch ms of the frame's time `text` (as read: bytes), or None if it is not a time this
        reads. `witness_utc_ms`: a UTC time the line names, a little before it was written (its
        transition's last update); `read_ms`: when the exporter read the line (UTC)."""
        second = self._seconds.get(text[:20])
        if second is not None and len(text) == 23 and text[20:].isdigit():
            local_ms = second + int(text[20:])  # (the usual: a second of the lines before)
        elif len(text) == 13 and text.isdigit():  # (bytes' isdigit: ASCII digits only)
            return int(text)
        else:
            naive_ms = self.naive_ms(text)
            if naive_ms is None:
                return None
            local_ms = naive_ms
        # (_rounded, written out: a busy coordinator writes thousands of lines a second)
        estimate = (local_ms - witness_utc_ms + _HALF_QUARTER_HOUR_MS) // QUARTER_HOUR_MS * QUARTER_HOUR_MS
        offset_ms = self.offset_ms
        # Learned from the first line; re-learned when both witnesses agree on another offset.
        if offset_ms is None or (estimate != offset_ms and _rounded(local_ms - read_ms) == estimate):
            offset_ms = self.offset_ms = estimate
        return local_ms - offset_ms

    def naive_ms(self, text: bytes) -> int | None:
        """`yyyy-MM-dd HH:mm:ss,SSS` (or `.SSS`, or a `T` between date and time) as epoch ms, read as
        if it were UTC; None for anything else."""
        if len(text) != 23 or not text.isascii():
            return None
        head, millis = text[:20], text[20:]
        second = self._seconds.get(head)
        if second is None:
            second = _second_ms(head.decode())
            if second is None:
                return None
            if len(self._seconds) >= _SECONDS_KEPT:
                self._seconds.clear()
            self._seconds[head] = second
        if not millis.isdigit():
            return None
        return second + int(millis)


def _second_ms(head: str) -> int | None:
    """`yyyy-MM-dd HH:mm:ss,` (or `.`, or a `T` between date and time) as epoch ms, read as if UTC."""
    if head[10] not in " T" or head[19] not in ",." or head[13] != ":" or head[16] != ":":
        return None
    if head[4] != "-" or head[7] != "-" or not head.isascii():
        return None
    try:
        day = date(int(head[:4]), int(head[5:7]), int(head[8:10])).toordinal() - _EPOCH_ORDINAL
        hour, mins = int(head[11:13]), int(head[14:16])
    except ValueError:
        return None
    seconds = head[17:19]
    if not (0 <= hour < 24 and 0 <= mins < 60 and seconds.isdigit()) or int(seconds) > 60:
        return None
    return day * _DAY_MS + (hour * 60 + mins) * 60_000 + int(seconds) * 1000


def _rounded(difference_ms: int) -> int:
    """The nearest whole quarter hour."""
    return (difference_ms + _HALF_QUARTER_HOUR_MS) // QUARTER_HOUR_MS * QUARTER_HOUR_MS

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
_DAY_MS = 86_400_000
_EPOCH_ORDINAL = date(1970, 1, 1).toordinal()
# `yyyy-MM-dd HH:mm` of recent lines -> its ms as if UTC; small (a minute's lines share one entry).
_MINUTES_KEPT = 64


class LocalTimes:
    """Reads a frame's time and places it in UTC (`place`), keeping the offset in force."""

    def __init__(self) -> None:
        self.offset_ms: int | None = None  # local time minus UTC, once learned
        self._minutes: dict[str, int] = {}

    def place(self, text: str, witness_utc_ms: int, read_ms: int) -> int | None:
        """UTC epoch ms of the frame's time `text`, or None if it is not a time this reads.
        `witness_utc_ms`: a UTC time the line names, a little before it was written (its transition's
        last update); `read_ms`: when the exporter read the line (UTC)."""
        if len(text) == 13 and text.isascii() and text.isdigit():
            return int(text)
        local_ms = self.naive_ms(text)
        if local_ms is None:
            return None
        estimate = _rounded(local_ms - witness_utc_ms)
        # Learned from the first line; re-learned when both witnesses agree on another offset.
        if self.offset_ms is None or (estimate != self.offset_ms and _rounded(local_ms - read_ms) == estimate):
            self.offset_ms = estimate
        return local_ms - self.offset_ms

    def naive_ms(self, text: str) -> int | None:
        """`yyyy-MM-dd HH:mm:ss,SSS` (or `.SSS`, or a `T` between date and time) as epoch ms, read as
        if it were UTC; None for anything else."""
        if len(text) != 23 or text[10] not in " T" or text[19] not in ",." or text[13] != ":" or text[16] != ":":
            return None
        minute = text[:16]
        base = self._minutes.get(minute)
        if base is None:
            try:
                day = date(int(text[:4]), int(text[5:7]), int(text[8:10])).toordinal() - _EPOCH_ORDINAL
                hour, mins = int(text[11:13]), int(text[14:16])
            except ValueError:
                return None
            if text[4] != "-" or text[7] != "-" or not (0 <= hour < 24 and 0 <= mins < 60):
                return None
            if len(self._minutes) >= _MINUTES_KEPT:
                self._minutes.clear()
            base = self._minutes[minute] = day * _DAY_MS + (hour * 60 + mins) * 60_000
        seconds, millis = text[17:19], text[20:23]
        if not (text.isascii() and seconds.isdigit() and millis.isdigit()) or int(seconds) > 60:
            return None
        return base + int(seconds) * 1000 + int(millis)


def _rounded(difference_ms: int) -> int:
    """The nearest whole quarter hour."""
    return (difference_ms + QUARTER_HOUR_MS // 2) // QUARTER_HOUR_MS * QUARTER_HOUR_MS

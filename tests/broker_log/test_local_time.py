"""The broker log's local times placed in UTC without being told its zone
(exporter.broker_log.local_time): any offset in quarter hours, and across both DST changes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from exporter.broker_log.local_time import LocalTimes


def local_text(utc_ms: int, zone: str) -> str:
    """How Kafka's `[%d]` writes `utc_ms` in a JVM whose zone is `zone`."""
    at = datetime.fromtimestamp(utc_ms / 1000, UTC).astimezone(ZoneInfo(zone))
    return at.strftime("%Y-%m-%d %H:%M:%S,") + f"{at.microsecond // 1000:03d}"


def ms(text: str) -> int:
    return int(datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp() * 1000)


@pytest.mark.parametrize(
    ("zone", "offset_minutes"),
    [
        ("Asia/Kolkata", 330),
        ("Asia/Kathmandu", 345),
        ("America/St_Johns", -150),
        ("UTC", 0),
        ("Pacific/Kiritimati", 840),
    ],
)
def test_any_quarter_hour_offset_is_learned_from_the_first_line(zone: str, offset_minutes: int) -> None:
    times = LocalTimes()
    utc_ms = ms("2026-06-01T12:00:00.457")
    # The line written 3 ms after its transition's last update, read 200 ms later.
    assert times.place(local_text(utc_ms, zone).encode(), utc_ms - 3, utc_ms + 200) == utc_ms
    assert times.offset_ms == offset_minutes * 60_000


@pytest.mark.parametrize(
    ("zone", "start"),
    [
        ("Europe/Berlin", "2026-03-29T00:30:00"),
        ("Europe/Berlin", "2026-10-25T00:30:00"),
        ("Australia/Lord_Howe", "2026-04-04T14:30:00"),
    ],
    ids=["spring forward", "fall back", "half an hour back"],
)
def test_every_line_across_a_dst_change_is_placed_right(zone: str, start: str) -> None:
    """Lines every 7 s for two hours across the change, each written 0-40 ms after its last update
    and read within a second: every one is placed at its true UTC time."""
    times = LocalTimes()
    first = ms(start)
    offsets = set()
    for n in range(0, 7200, 7):
        utc_ms = first + n * 1000 + n % 41
        assert times.place(local_text(utc_ms, zone).encode(), utc_ms - n % 41, utc_ms + 900) == utc_ms, n
        offsets.add(times.offset_ms)
    assert len(offsets) == 2  # re-learned once


def test_a_slow_append_does_not_move_the_offset() -> None:
    """A line 10 minutes after its last update (an append that waited that long) read at once: its
    two witnesses disagree, so the offset in force places it (10 minutes late, as it was)."""
    times = LocalTimes()
    utc_ms = ms("2026-06-01T12:00:00")
    times.place(local_text(utc_ms, "Asia/Kolkata").encode(), utc_ms - 2, utc_ms + 100)
    slow = utc_ms + 60_000
    assert times.place(local_text(slow, "Asia/Kolkata").encode(), slow - 600_000, slow + 100) == slow
    assert times.offset_ms == 330 * 60_000


@pytest.mark.parametrize(
    "text",
    [
        "2026-13-01 00:00:00,000",
        "2026-02-30 00:00:00,000",
        "2026-01-01 24:00:00,000",
        "2026-01-01 00:00:0x,000",
        "",
        "12345",
        "2026-01-01 00:00:00",
    ],
)
def test_what_is_not_a_time_is_not_placed(text: str) -> None:
    assert LocalTimes().place(text.encode(), 0, 0) is None


def test_the_times_layouts_read() -> None:
    times = LocalTimes()
    expected = ms("2026-06-01T12:00:00.457")
    for text in ("2026-06-01 12:00:00,457", "2026-06-01 12:00:00.457", "2026-06-01T12:00:00,457"):
        assert times.naive_ms(text.encode()) == expected
    assert times.place(str(expected).encode(), 0, 0) == expected
    assert timedelta(milliseconds=expected) > timedelta(0)


@pytest.mark.parametrize("millis", ["45x", "4 5", "+45", "٣45", "4567", "45"])
def test_a_known_seconds_line_with_other_millis_is_not_placed(millis: str) -> None:
    """Once a second is known, its later lines are read from the cache: what follows it must still be
    three ASCII digits."""
    times = LocalTimes()
    assert times.place(b"2026-06-01 12:00:00,457", ms("2026-06-01T12:00:00.457"), 0) is not None
    assert times.place(f"2026-06-01 12:00:00,{millis}".encode(), ms("2026-06-01T12:00:00.457"), 0) is None

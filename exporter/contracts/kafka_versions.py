"""Kafka versions as the exporter learns a broker's, and the version ranges of the known-bug table;
pure, no I/O.

A broker's version (BrokerVersion) is learned two ways, and says which (`source`):
- LOG: the broker's startup line `Kafka version: 3.7.1` (AppInfoParser), exact. A string that is not
  an Apache Kafka release (`7.7.1-ccs`, Confluent's own numbering; `3.9.0-SNAPSHOT`, a build between
  releases) is kept as written and reads as unknown: no bug is claimed on it.
- API_VERSIONS: the broker's ApiVersions answer compared with the pinned brokers' answers
  (exporter.contracts.api_fingerprints): a range, as the patches of a minor (and sometimes two minors)
  answer alike, e.g. `3.9.x` or `4.3.x-4.4.x`; unknown when it matches none.

A range of the known-bug table is written as the half-open interval it is: `<3.8.0` (every release
before 3.8.0) or `>=4.0.0,<4.3.0`; `parse_range` rejects anything else with a ValueError naming it.
`coverage` tells whether a broker's version lies wholly in a row's ranges (the bug is matched),
partly (its patch is unknown and some of the patches it may be have the fix: possible) or not at all.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

Release = tuple[int, int, int]
# The patch of a range whose patch is unknown (`3.9.x`): above every real patch number.
ANY_PATCH: Final = 1 << 30
LOG: Final = "log"
API_VERSIONS: Final = "api_versions"
UNKNOWN: Final = "unknown"

_RELEASE = re.compile(r"(0|[1-9][0-9]{0,3})\.(0|[1-9][0-9]{0,3})\.(0|[1-9][0-9]{0,3})", re.ASCII)
_BOUND = re.compile(r"(>=|<)(\S+)", re.ASCII)
MAX_SHOWN = 64  # characters of a version string kept as the broker wrote it (the log is untrusted)


def parse_release(text: str) -> Release | None:
    """`3.7.1` as (3, 7, 1); None for anything but three plain numbers (a vendor's or a snapshot's string)."""
    match = _RELEASE.fullmatch(text)
    return None if match is None else (int(match[1]), int(match[2]), int(match[3]))


def release_text(release: Release) -> str:
    return f"{release[0]}.{release[1]}.x" if release[2] == ANY_PATCH else ".".join(map(str, release))


@dataclass(frozen=True, slots=True)
class BrokerVersion:
    """What the exporter knows of one broker's Kafka version: the releases it can be, `low` to `high`
    inclusive (None: unknown), how it was learned, and its text as shown (`3.7.1`, `3.9.x`,
    `4.3.x-4.4.x`, or an unknown version's own string)."""

    text: str
    source: str  # LOG or API_VERSIONS
    low: Release | None = None
    high: Release | None = None

    @property
    def known(self) -> bool:
        return self.low is not None and self.high is not None

    @property
    def exact(self) -> bool:
        return self.known and self.low == self.high


def from_log(text: str) -> BrokerVersion:
    """The version a startup line's `Kafka version: <text>` gives: exact for a release, else unknown
    with the text as written (cut to MAX_SHOWN characters)."""
    text = text.strip()
    release = parse_release(text)
    if release is None:
        return BrokerVersion(text[:MAX_SHOWN] or UNKNOWN, LOG)
    return BrokerVersion(text, LOG, release, release)


def between(low: Release, high: Release, source: str) -> BrokerVersion:
    """A range of releases; `3.9.x` when it spans one minor's patches, `4.3.x-4.4.x` across minors."""
    whole_minors = low[2] == 0 and high[2] == ANY_PATCH  # every patch of the minors from low's to high's
    if low == high:
        text = release_text(low)
    elif whole_minors and low[:2] == high[:2]:
        text = release_text(high)
    elif whole_minors:
        text = f"{low[0]}.{low[1]}.x-{release_text(high)}"
    else:
        text = f"{release_text(low)}-{release_text(high)}"
    return BrokerVersion(text, source, low, high)


def unknown(why: str, source: str) -> BrokerVersion:
    return BrokerVersion(why, source)


# --- the known-bug table's ranges ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Interval:
    """Releases from `low` (inclusive; None: from the first) to `high` (exclusive; None: no end)."""

    low: Release | None
    high: Release | None

    def holds(self, release: Release) -> bool:
        return (self.low is None or self.low <= release) and (self.high is None or release < self.high)

    def __str__(self) -> str:
        bounds = ([f">={release_text(self.low)}"] if self.low else []) + (
            [f"<{release_text(self.high)}"] if self.high else []
        )
        return ",".join(bounds)


def parse_range(text: str) -> Interval:
    """`<3.8.0` or `>=4.0.0,<4.3.0` (or `>=4.0.0`, no end yet) as an Interval; ValueError naming the
    range otherwise (an unknown operator, a release that is not three numbers, a bound given twice, an
    empty interval)."""
    low: Release | None = None
    high: Release | None = None
    for part in text.split(","):
        match = _BOUND.fullmatch(part.strip())
        release = None if match is None else parse_release(match[2])
        if match is None or release is None:
            raise ValueError(f"version range {text!r}: {part.strip()!r} is not >=X.Y.Z or <X.Y.Z")
        if match[1] == ">=":
            if low is not None:
                raise ValueError(f"version range {text!r}: two lower bounds")
            low = release
        else:
            if high is not None:
                raise ValueError(f"version range {text!r}: two upper bounds")
            high = release
    if low is None and high is None:
        raise ValueError(f"version range {text!r}: no bound")
    if low is not None and high is not None and not low < high:
        raise ValueError(f"version range {text!r}: empty (its lower bound is not below its upper bound)")
    return Interval(low, high)


WHOLLY: Final = "wholly"
PARTLY: Final = "partly"
NOT: Final = "not"


def coverage(version: BrokerVersion, intervals: Iterable[Interval]) -> str:
    """WHOLLY when every release `version` can be lies in one of `intervals`, PARTLY when some do,
    NOT when none does (an unknown version: NOT; the caller says it is unknown)."""
    low, high = version.low, version.high
    if low is None or high is None:
        return NOT
    partly = False
    for interval in intervals:
        starts_before = interval.low is None or interval.low <= low
        ends_after = interval.high is None or high < interval.high
        if starts_before and ends_after:
            return WHOLLY
        if (interval.low is None or interval.low <= high) and (interval.high is None or low < interval.high):
            partly = True
    return PARTLY if partly else NOT

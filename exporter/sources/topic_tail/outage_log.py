"""The tail's log of Kafka's connection failures while they last: each kind once, then at a slowing rate."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from exporter.sources.topic_tail.topic import log

_OUTAGE_FIRST_REPORT_SECONDS = 10.0
_OUTAGE_MAX_REPORT_SECONDS = 600.0


class OutageLog:
    """While Kafka does not answer, each kind of connection failure (a metadata read, a client error
    by name) is logged once, then at a slowing rate: after _OUTAGE_FIRST_REPORT_SECONDS, twice that,
    and so on up to _OUTAGE_MAX_REPORT_SECONDS, each line counting the failures it stands for; over()
    (the source up again) starts afresh."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._kinds: dict[str, _Reported] = {}

    def warning(self, kind: str, message: str) -> None:
        now = self._clock()
        reported = self._kinds.get(kind)
        if reported is None:
            reported = self._kinds[kind] = _Reported(now)
        elif now < reported.at + reported.interval:
            reported.unlogged += 1
            return
        else:
            message += f" ({reported.unlogged} more failures in the last {now - reported.at:.0f} s)"
            reported.at, reported.unlogged = now, 0
            reported.interval = min(reported.interval * 2, _OUTAGE_MAX_REPORT_SECONDS)
        log.warning("%s (while it lasts, the next report in %.0f s)", message, reported.interval)

    def over(self) -> None:
        self._kinds.clear()


@dataclass(slots=True)
class _Reported:
    """One kind of failure: when it was last logged, the wait before the next line, failures since."""

    at: float
    interval: float = _OUTAGE_FIRST_REPORT_SECONDS
    unlogged: int = 0

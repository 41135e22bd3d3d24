"""The tail's log of Kafka's connection failures while they last: each kind once, then at a slowing
rate, each in plain words naming the broker (in_plain_words)."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass

from exporter.sources.topic_tail.topic import log

_OUTAGE_FIRST_REPORT_SECONDS = 10.0
_OUTAGE_MAX_REPORT_SECONDS = 600.0
# librdkafka's connection errors: "HOST:PORT/NODE: WHAT", NODE a broker id or "bootstrap", WHAT e.g.
# "Connect to ipv4#HOST:PORT failed: Connection refused (after 0ms in state CONNECT)".
_BROKER = re.compile(r"^(?:\w+://)?(?P<address>\S+?)/(?P<node>\w+): (?P<what>.+)$")
_CONNECT = re.compile(r"^Connect to (?:ipv[46]#)?\S+ failed: (?P<why>.+)$")
_RESOLVE = re.compile(r"^Failed to resolve '[^']*': (?P<why>.+)$")
_AFTER = re.compile(r" \(after \d+ms in state \w+\)")
_ALL_DOWN = re.compile(r"^(?P<down>\d+)/(?P<all>\d+) brokers are down$")


def in_plain_words(error: str) -> str:
    """A connection error of the Kafka client (librdkafka's text) as the log says it: which broker,
    what failed, in a few words and without the client's error codes (a demo user or an operator reads
    it; the codes are in the client's DEBUG lines)."""
    error = _AFTER.sub("", error).strip()
    down = _ALL_DOWN.match(error)
    if down:
        return f"no Kafka broker answers ({down['down']} of {down['all']} down)"
    match = _BROKER.match(error)
    if match is None:
        return f"Kafka client: {_lower(error.removeprefix('Local: '))}"
    node, address, what = match["node"], match["address"], match["what"]
    broker = f"Kafka broker {node} at {address}" if node.isdigit() else f"the Kafka bootstrap server {address}"
    if connect := _CONNECT.match(what):
        return f"cannot connect to {broker}: {_lower(connect['why'])}"
    if resolve := _RESOLVE.match(what):
        return f"cannot find {broker}: {_lower(resolve['why'])}"
    if what.startswith("Disconnected"):
        return f"lost the connection to {broker}"
    return f"{broker}: {_lower(what)}"


def _lower(text: str) -> str:
    return text[:1].lower() + text[1:]


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
            if reported.unlogged:
                message += f" ({reported.unlogged} more in the last {now - reported.at:.0f} s)"
            reported.at, reported.unlogged = now, 0
            reported.interval = min(reported.interval * 2, _OUTAGE_MAX_REPORT_SECONDS)
        log.warning("%s; while it lasts, said again in %.0f s", message, reported.interval)

    def over(self) -> None:
        self._kinds.clear()


@dataclass(slots=True)
class _Reported:
    """One kind of failure: when it was last logged, the wait before the next line, failures since."""

    at: float
    interval: float = _OUTAGE_FIRST_REPORT_SECONDS
    unlogged: int = 0

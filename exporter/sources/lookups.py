"""What the view's lookups of Kafka share (exporter.sources.cluster_state, exporter.sources.consumer_groups):
a cached answer with the refresh under way, and daemon threads running kafka-python's blocking
calls as futures."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from exporter.broker_log.errors import ERRORS
from exporter.contracts.cluster import Fact


class CachedEntry:
    """A cached value: the last answer (value or problem, and when) and the refresh under way."""

    __slots__ = ("as_of_ms", "asked", "fetched", "pending", "pick", "problem", "value")

    def __init__(self) -> None:
        self.value: Any = None
        self.problem: str | None = None
        self.as_of_ms: int | None = None
        self.fetched: float | None = None  # monotonic time of the last answer
        self.pending: Future | None = None
        # From the pending future's result to (value, problem): a request may answer for several.
        self.pick: Callable[[Any], tuple[Any, str | None]] = whole
        self.asked = 0.0  # monotonic time a view last asked for it (entries long unasked are dropped)

    def fact(self, waited: float) -> Fact:
        if self.fetched is not None:
            return Fact(self.value, self.as_of_ms, self.problem)
        if self.pending is not None:
            return Fact(None, problem=f"no answer within {waited:g} s")
        return Fact(None, problem=self.problem or "not looked up")


def whole(result: Any) -> tuple[Any, str | None]:
    """A request's result as the one entry's (value, problem): what CachedEntry.pick is by default."""
    return result, None


class Workers:
    """Daemon threads running blocking calls (kafka-python) as futures: a call that hangs never
    holds up a view or the process's exit."""

    def __init__(self, count: int, name: str) -> None:
        self._queue: queue.SimpleQueue[tuple[Callable[[], Any], Future] | None] = queue.SimpleQueue()
        self._threads = [threading.Thread(target=self._run, name=f"{name}-{n}", daemon=True) for n in range(count)]
        for thread in self._threads:
            thread.start()

    def submit(self, call: Callable[[], Any]) -> Future:
        future: Future = Future()
        self._queue.put((call, future))
        return future

    def _run(self) -> None:
        while (work := self._queue.get()) is not None:
            call, future = work
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(call())
            except BaseException as e:  # handed to the waiting side
                future.set_exception(e)

    def stop(self) -> None:
        for _ in self._threads:
            self._queue.put(None)


def known_error_name(code: int) -> str | None:
    """A Kafka error code's name as Kafka 4.x spells it, None for a code it does not name."""
    for number, name, _ in ERRORS:
        if code == number:
            return name
    return None


def error_name(code: int) -> str:
    """A Kafka error code's name ("error N" for one Kafka does not name)."""
    return known_error_name(code) or f"error {code}"

"""What the view's lookups of Kafka share (exporter.sources.cluster_state, exporter.sources.consumer_groups):
a cached answer with the refresh under way, daemon threads running kafka-python's blocking calls as
futures, and CachedLookups, the frame of a source made of them (its client, its workers, when an
entry is due, how an answer settles, what is forgotten, a close that never waits)."""

from __future__ import annotations

import abc
import logging
import queue
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future
from typing import Any, TypedDict

from exporter.contracts.cluster import Fact
from exporter.sources.kafka_admin import import_kafka_python
from exporter.sources.kafka_python_adapter import error_name, known_error_name

# An answer is cached this long; a view waits this long at most for a first look; a request runs on
# this long at most in the background.
CACHE_SECONDS = 5.0
WAIT_SECONDS = 0.5
REQUEST_TIMEOUT_SECONDS = 5.0
# A lookup that failed (an error, no answer in time) is tried again this soon, not after CACHE_SECONDS:
# a request sent to a broker that hangs fails, and the next one likely goes to another broker.
RETRY_SECONDS = 1.0
# Cached answers no view asked for in this long are dropped (checked once a minute): topics come and go.
FORGET_SECONDS = 600.0
_FORGET_CHECK_SECONDS = 60.0


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


def exception_name(exc: BaseException) -> str:
    """A failed request's Kafka error name as Kafka 4.x spells it (kafka-python's errors carry the
    code, and some older names: NOT_LEADER_FOR_PARTITION), else the exception's class and text."""
    code = getattr(exc, "errno", None)
    if isinstance(code, int) and (name := known_error_name(code)) is not None:
        return name
    message = getattr(exc, "message", None)
    if isinstance(message, str) and message.isupper():
        return message
    if isinstance(code, int):
        return error_name(code)
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


class LookupOptions(TypedDict, total=False):
    """The keyword arguments every CachedLookups source takes (their defaults: CachedLookups.__init__)."""

    cache_seconds: float
    wait_seconds: float
    request_timeout_seconds: float
    monotonic: Callable[[], float]
    clock: Callable[[], float]
    own_broker: Callable[[], int | None]


class CachedLookups(abc.ABC):
    """The frame of a source of cached lookups: its kafka-python admin, made by the first worker that
    needs it; its daemon workers; its entries (in the dicts `_caches` returns), refreshed when due,
    settled as their futures complete (`_watch`), dropped when long unasked. Thread-safe: `_lock`
    guards the entries, held for dict work only; reentrant, as a future that is already done runs
    its callback at once, in the thread that adds it."""

    what = "lookups"  # the source's name in its log lines, its logger's and its threads'
    worker_threads = 1

    def __init__(
        self,
        bootstrap_servers: str,
        kafka_settings: Mapping[str, str] | None = None,
        *,
        cache_seconds: float = CACHE_SECONDS,
        wait_seconds: float = WAIT_SECONDS,
        request_timeout_seconds: float = REQUEST_TIMEOUT_SECONDS,
        monotonic: Callable[[], float] = time.monotonic,
        clock: Callable[[], float] = time.time,
        own_broker: Callable[[], int | None] = lambda: None,
        admin: Callable[[], Any] | None = None,
    ) -> None:
        """`own_broker`: the broker the exporter runs beside, asked first (exporter.sources.kafka_admin);
        `admin`: makes the client (default: `_kafka_python_admin`)."""
        self.cache_seconds = cache_seconds
        self.wait_seconds = wait_seconds
        self.request_timeout_seconds = request_timeout_seconds
        self._bootstrap_servers = bootstrap_servers
        self._kafka_settings = dict(kafka_settings or {})
        self._monotonic = monotonic
        self._clock = clock
        self._own_broker = own_broker
        self._admin_factory = admin or self._kafka_python_admin
        self._log = logging.getLogger("txn_exporter." + self.what.replace(" ", "_"))
        self._admin: Any = None
        self._admin_lock = threading.Lock()
        self._creating = threading.Lock()
        self._workers: Workers | None = None
        self._lock = threading.RLock()
        self._forgot = 0.0
        self._closed = False

    @abc.abstractmethod
    def _kafka_python_admin(self) -> Any:
        """Makes the source's client (kafka_admin.admin_client, with its own client id and bounds)."""

    @abc.abstractmethod
    def _caches(self) -> Iterable[dict[Any, CachedEntry]]:
        """The dicts holding the source's entries (those `_forget` drops from)."""

    # --- the client and the workers ---

    def _client(self) -> Any:
        """The client, created by the first worker that needs it (it connects, and may block for the
        client's own timeouts: under `_creating`, which close() never waits for)."""
        with self._creating:
            with self._admin_lock:
                if self._admin is not None:
                    return self._admin
                if self._closed:
                    raise RuntimeError("closed")
            admin = self._admin_factory()
            with self._admin_lock:
                if not self._closed:
                    self._admin = admin
                    return admin
            admin.close()  # closed while it connected
            raise RuntimeError("closed")

    def _submit(self, call: Callable[[], Any]) -> Future:
        """Holding self._lock: `call` on a worker."""
        if self._workers is None:
            # kafka-python imported here first, not by two workers at once (see import_kafka_python).
            import_kafka_python()
            self._workers = Workers(self.worker_threads, self.what.replace(" ", "-"))
        return self._workers.submit(call)

    def close(self) -> None:
        """Never waits for a request or a client still connecting (the workers are daemons)."""
        with self._admin_lock:
            self._closed = True
            admin, self._admin = self._admin, None
        with self._lock:
            if self._workers is not None:
                self._workers.stop()
        if admin is not None:
            try:
                admin.close()
            except Exception:  # closing on the way out
                pass

    # --- the entries (holding self._lock) ---

    def _due(self, entry: CachedEntry, now: float) -> bool:
        if self._closed or entry.pending is not None:
            return False
        if entry.fetched is None:
            return True
        period = self.cache_seconds if entry.problem is None else min(self.cache_seconds, RETRY_SECONDS)
        return now - entry.fetched >= period

    def _forget(self, now: float) -> None:
        """Once a minute, drops the answers no view asked for in FORGET_SECONDS."""
        if now - self._forgot < _FORGET_CHECK_SECONDS:
            return
        self._forgot = now
        for cache in self._caches():
            for key in [k for k, e in cache.items() if e.pending is None and now - e.asked > FORGET_SECONDS]:
                del cache[key]

    @staticmethod
    def _first_looks(entries: Iterable[CachedEntry]) -> list[Future]:
        """The refreshes of entries that never had an answer: a view waits for those only."""
        return [e.pending for e in entries if e.fetched is None and e.pending is not None]

    def _watch(self, entry: CachedEntry, future: Future, pick: Callable[[Any], tuple[Any, str | None]] = whole) -> None:
        """Holding self._lock: `future` is the entry's refresh, settled as it completes (`pick`: the
        entry's part of its answer), whether a view reads the entry again or not."""
        entry.pending, entry.pick = future, pick

        def done(f: Future) -> None:
            with self._lock:
                self._settle(entry, f)

        future.add_done_callback(done)

    def _fact(self, entry: CachedEntry) -> Fact:
        # A future that completed while its callback has not run yet (waiters wake first) counts.
        if entry.pending is not None and entry.pending.done():
            self._settle(entry, entry.pending)
        return entry.fact(self.wait_seconds)

    def _settle(self, entry: CachedEntry, future: Future) -> None:
        """The answer of `future`, once, if it is still the entry's refresh."""
        if entry.pending is not future:
            return
        entry.pending = None
        try:
            value, problem = entry.pick(future.result())
        except Exception as e:  # the entry says why it is unknown
            value, problem = None, exception_name(e)
        entry.fetched = self._monotonic()
        if problem is not None:
            self._log.debug("%s: %s", self.what, problem)
            if entry.value is not None:  # keep showing the last value, with its time; retried later
                entry.problem = problem
                return
        entry.value, entry.problem = value, problem
        entry.as_of_ms = int(self._clock() * 1000)

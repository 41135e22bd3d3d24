"""The broker-log thread's loop (--broker-log): reads the broker's log files when they change,
applies their events to the model, and passes on the coordinator elected/resigned lines."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence

from exporter.contracts.events import BrokerLogStats, CoordinatorChanged, CoordinatorStarting, TransitionAppended
from exporter.model import CoordinatorModel
from exporter.sources.broker_log_tail import BrokerLogFollower
from exporter.sources.file_watch import FileWatch

log = logging.getLogger("txn_exporter")
# The broker log is read when its file changes (exporter.sources.file_watch; unwatched, after each
# wait; watched, at least every BROKER_LOG_WATCHED_POLL_SECONDS; while reads find lines, by the clock
# alone, the watch removed): at most every BROKER_LOG_POLL_SECONDS
# after a read that brought an event (a failed append, a marker retry, a coordinator change), else
# after a wait doubling up to BROKER_LOG_QUIET_POLL_SECONDS, so an event counts up to a second late.
# Growth alone is no event: at DEBUG the coordinator logs each append, and reading 10 times a second cost
# 3.0 ms of CPU a second at 200 transactions/s (docs/benchmarks.md#the-broker-logs-reads).
BROKER_LOG_POLL_SECONDS = 0.1
BROKER_LOG_QUIET_POLL_SECONDS = 1.0
BROKER_LOG_WATCHED_POLL_SECONDS = 5.0


def follow_broker_logs(
    stop: threading.Event,
    watch: FileWatch,
    followers: Sequence[BrokerLogFollower],
    model: CoordinatorModel,
    coordinator_lines: Callable[[list[CoordinatorChanged | CoordinatorStarting], int | None], None],
    freshness_seconds: float,
) -> None:
    """Reads the broker log files when they change, at most every BROKER_LOG_POLL_SECONDS, less
    often while they bring no event (up to BROKER_LOG_QUIET_POLL_SECONDS), until `stop` is set;
    hands `coordinator_lines` the coordinator's elected, resigned and starting lines of each read,
    with the wall clock (ms) before it, when every file could be read: every line written before then
    has been read."""
    failing: set[int] = set()  # followers whose last poll failed, so an error is logged once
    wait = BROKER_LOG_POLL_SECONDS
    # Read at least twice within the freshness: a `succeeded` line times its record no later.
    quiet = min(BROKER_LOG_QUIET_POLL_SECONDS, freshness_seconds / 2)
    while True:
        events = []
        read_ms = int(time.time() * 1000)
        for n, follower in enumerate(followers):
            try:
                events += follower.poll()
            except OSError as e:
                if n not in failing:
                    log.warning("cannot read broker log %s: %s", follower.path, e)
                failing.add(n)
            else:
                failing.discard(n)
        if events:  # (any line read makes one: the lines' count)
            watch.read_found_lines()
            # The files grow: the next read comes by the clock, and a watch would only cost the broker
            # (FileWatch.unwatch); watched again once a read finds nothing.
            watch.unwatch()
            model.apply_batch(events, int(time.time() * 1000))
        lines = [event for event in events if type(event) in _COORDINATOR_LINES]
        coordinator_lines(lines, None if failing else read_ms)  # type: ignore[arg-type]  # because filtered by type
        wait = next_broker_log_wait(wait, events, quiet)
        if stop.wait(wait):
            return
        if not events and watch.watching():
            watch.wait(BROKER_LOG_WATCHED_POLL_SECONDS)


def next_broker_log_wait(wait: float, events: Sequence[object], quiet: float = BROKER_LOG_QUIET_POLL_SECONDS) -> float:
    """The wait before the broker log's next read, after a read that brought `events` (see
    BROKER_LOG_POLL_SECONDS): the shortest after an event, else twice the last, at most `quiet`. The
    `succeeded` lines of appends, which a busy coordinator writes all the time, do not hasten it."""
    if any(type(event) not in _ROUTINE for event in events):
        return BROKER_LOG_POLL_SECONDS
    return min(wait * 2, quiet)


_ROUTINE = (BrokerLogStats, TransitionAppended)
_COORDINATOR_LINES = (CoordinatorChanged, CoordinatorStarting)

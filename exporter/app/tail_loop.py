"""The sources thread's loop: polls the `__transaction_state` tail and applies its events to the
model, holding the model's lock once per polled batch."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from exporter.model import CoordinatorModel
from exporter.sources.topic_tail import TransactionLogTail


def follow_tail(
    stop: threading.Event,
    tail: TransactionLogTail,
    model: CoordinatorModel,
    broker_log: bool,
    kafka_answered: Callable[[], None],
) -> None:
    """Polls until `stop` is set. With the broker's log read (`broker_log`), the tail fetches for
    freshness alone while the model says the coordinator's own clock times the appends. Calls
    `kafka_answered` once, when Kafka has first answered the tail."""
    answered = False
    next_tick = 0.0
    while not stop.is_set():
        events = tail.poll()
        now = time.time()
        if events or now >= next_tick:  # (a tick counts the records and lines that waited in vain)
            next_tick = now + 1.0
            model.apply_batch(events, int(now * 1000))
        if broker_log:
            tail.fetch_for_freshness(model.coordinator_clock())
        if not answered and tail.not_ready is None:
            answered = True
            kafka_answered()

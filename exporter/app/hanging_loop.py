"""The hanging-scan thread's loop (a hanging-scan interval above 0): every interval, one bounded
round of exporter.sources.hanging_scan over the data partitions this broker leads (all of them with
--all-partitions), its events applied to the model."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from exporter import config
from exporter.contracts.events import HangingScanCompleted
from exporter.model import CoordinatorModel

log = logging.getLogger("txn_exporter")


def scan_hanging(
    stop: threading.Event,
    settings: config.Settings,
    model: CoordinatorModel,
    broker_id: Callable[[], int | None],
    ready: Callable[[], bool],
) -> None:
    """Scans every hanging_scan_interval_seconds until `stop` is set; `broker_id` is the exporter's
    broker, None until the tail has discovered it."""
    # kafka-python (the scan's client) is imported only when a scan is configured.
    from exporter.sources.hanging_scan import HangingScanner

    # The first round waits for the replay, at most one interval: a round holds the GIL too,
    # and readiness waits on the replay alone.
    deadline = time.monotonic() + settings.hanging_scan_interval_seconds
    while not ready() and time.monotonic() < deadline:
        if stop.wait(0.1):
            return
    scanner = None
    failing = False
    while not stop.is_set():
        try:
            if scanner is None:
                own = None if settings.all_partitions else broker_id()
                if own is None and not settings.all_partitions:
                    # The topic source has not discovered the broker id yet.
                    if stop.wait(1.0):
                        break
                    continue
                scanner = HangingScanner(
                    settings.bootstrap_servers,
                    own,
                    int(settings.hanging_max_transaction_timeout_seconds * 1000),
                    int(settings.late_transaction_padding_seconds * 1000),
                    settings.hanging_scan_max_partitions,
                    settings.kafka,
                )
            model.apply_batch(scanner.scan().events)
            failing = False
        except Exception as e:  # a failed round is counted; the next one tries again
            if not failing:
                log.warning("hanging-transaction scan failed: %s", e)
            failing = True
            model.apply_batch([HangingScanCompleted(0, 0, 0, ok=False)])
        if stop.wait(settings.hanging_scan_interval_seconds):
            break
    if scanner is not None:
        scanner.close()

"""The known-bug thread's loop: the broker's own version learned, and the transactions matching each
known Kafka bug counted into the model (kafka_transactions_matching_known_bug, txn_exporter_broker_info).

- The version: with --broker-log, the last startup line of the log files (and their rotated ones),
  looked for once as the thread starts; the lines of later starts come with the log as it is followed.
  Until the log has said it, the broker's ApiVersions answer, asked every COUNT_SECONDS (cached by
  the source), gives a range.
- The count: every COUNT_SECONDS, the exporter's own view of every in-flight and hanging transaction,
  diagnosed as `/transactions` does it (its cluster lookups bounded and cached), the rows naming each
  bug counted. A view that fails (Kafka unreachable) keeps the last counts.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable

from exporter.contracts.bug_facts import BugContext
from exporter.contracts.events import BrokerVersionAnswered, KnownBugsCounted
from exporter.contracts.kafka_versions import LOG
from exporter.model import CoordinatorModel
from exporter.sources.broker_versions import BrokerVersionsSource, startup_version
from exporter.view.diagnosis import known_bugs
from exporter.view.document import Document
from exporter.view.query import MAX_LIMIT, Query

log = logging.getLogger("txn_exporter")

COUNT_SECONDS = 30.0


def bug_context(
    model: CoordinatorModel,
    versions: BrokerVersionsSource,
    own_broker: int | None,
    broker_log: bool,
    brokers: Iterable[int],
) -> BugContext:
    """What the known-bug check of a view draws on: the versions of `brokers` (the exporter's own
    broker's as its model learned it, the others' from their ApiVersions answers), and, with a broker
    log, what it showed of the coordinator's partitions."""
    own = model.broker_version()
    asked = {b for b in brokers if b != own_broker or own is None}
    found = {b: fact.value for b, fact in versions.lookup(asked).items() if fact.value is not None}
    if own_broker is not None and own is not None:
        found[own_broker] = own
    return BugContext(found, model.coordinator_logs() if broker_log else None, own_broker)


def count_known_bugs(
    stop: threading.Event,
    model: CoordinatorModel,
    versions: BrokerVersionsSource,
    broker_logs: Iterable[str],
    own_broker: Callable[[], int | None],
    own_view: Callable[[Query], Document],
) -> None:
    """Learns the version, then counts every COUNT_SECONDS until `stop` is set (see the module docstring)."""
    for path in broker_logs:
        found = startup_version(path)
        if found is not None:
            model.apply(found)
            log.info("broker log %s: the broker's Kafka version is %s (its startup line)", path, found.version)
            break
    failing = False
    while not stop.wait(COUNT_SECONDS):
        try:
            broker = own_broker()
            learned = model.broker_version()
            if broker is not None and (learned is None or learned.source != LOG):
                fact = versions.lookup({broker})[broker]
                if fact.value is not None:
                    model.apply(BrokerVersionAnswered(fact.value))
            model.apply(KnownBugsCounted(known_bugs.counts(own_view(Query(limit=MAX_LIMIT)))))
            failing = False
        except Exception as e:  # counted again next time; the gauge keeps its last counts meanwhile
            if not failing:
                log.warning("known-bug count failed: %s", e)
            failing = True

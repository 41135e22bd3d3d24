"""A commit whose markers are held back, as the exporter must report it: pending 1 with the oldest
pending age growing while held, 0 and age 0 once the markers are written."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

from tests.integration.exporter_process import ExporterProcess
from txn_workshop.harness.broker import KafkaBroker
from txn_workshop.harness.workload import held_commit

PENDING = "kafka_transactions_with_pending_markers"
OLDEST = "kafka_transaction_pending_markers_oldest_age_seconds"


@contextmanager
def pending_while_held(
    process: ExporterProcess, coordinator: KafkaBroker, follower: KafkaBroker, topic: str, tid: str
) -> Iterator[None]:
    """`held_commit` of `tid` on `topic`: the body runs once the exporter shows it pending; then the
    oldest age must have grown and the count stayed 1, and after the release both go to 0."""
    with held_commit(coordinator.bootstrap_servers, follower, topic, tid):
        process.wait_for(lambda: process.value(PENDING) == 1, 60, "a pending transaction")
        age = process.value(OLDEST)
        yield
        time.sleep(2)
        assert process.value(OLDEST) >= age + 1.5  # the oldest pending one keeps ageing
        assert process.value(PENDING) == 1
    process.wait_for(lambda: process.value(PENDING) == 0, 60, "markers written after the release")
    assert process.value(OLDEST) == 0

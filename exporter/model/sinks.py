"""Where the model sends the observations it makes while applying live records.

The model only knows that an observation is a duration in ms at a wall-clock time, of one
transaction (its transactional id and producer id); what becomes of it (histogram buckets,
sliding-window quantiles, exemplars) is the metrics package's business. The ids are references the
model already holds: passing them allocates nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol


class DurationSink(Protocol):
    def record(self, value_ms: int, now_ms: int, transactional_id: str, producer_id: int) -> None:
        """Records one duration `value_ms`, observed at wall-clock `now_ms`, of the transaction of
        `transactional_id` under `producer_id`."""


@dataclass(frozen=True, slots=True)
class ObservationSinks:
    # Indexed by target state id, EMPTY (0) to COMPLETE_ABORT (5).
    append_latency: Sequence[DurationSink]
    marker_completion_commit: DurationSink
    marker_completion_abort: DurationSink
    # Transaction start to its PREPARE_* record, indexed by contracts.lifecycle.TRANSACTION_RESULTS
    # (commit, abort, timeout); empty: not recorded.
    transaction_duration: Sequence[DurationSink] = ()

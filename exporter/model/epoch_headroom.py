"""The producer epochs' headroom over the followed partitions, as the snapshot reports it.

The record path (exporter.model.coordinator) keeps, per partition, the ids whose last producer epoch is
within EPOCH_HEADROOM of the top and the highest epoch read, by the records' ClientTransactionVersion
(exporter.model.partition.PartitionState); these add them up over the live partitions, by version as
the metrics label it ("0", "1", "2").
"""

from __future__ import annotations

from collections.abc import Iterable

from exporter.model.partition import PartitionState


def ids_near_exhaustion(partitions: Iterable[PartitionState]) -> dict[str, int]:
    """Tracked ids near the top, by version: 0 for a version whose records were read and none is near
    (its series there from the start)."""
    counts: dict[str, int] = {}
    for part in partitions:
        if part.live:
            for version in part.epoch_highs:
                counts.setdefault(str(version), 0)
            for version in part.near_exhaustion.values():
                counts[str(version)] = counts.get(str(version), 0) + 1
    return counts


def highest_epochs(partitions: Iterable[PartitionState]) -> dict[str, int]:
    """The highest producer epoch read, by version."""
    highs: dict[str, int] = {}
    for part in partitions:
        if part.live:
            for version, epoch in part.epoch_highs.items():
                highs[str(version)] = max(highs.get(str(version), epoch), epoch)
    return highs

"""The consumer groups of a row's `__consumer_offsets-N` partitions: which partitions the view looks
up, the rows' `consumer_groups` from the lookup's answers, and the groups whose committed offsets
wait behind a diagnosed transaction."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from exporter.contracts.cluster import Fact
from exporter.contracts.groups import CONSUMER_OFFSETS_TOPIC, OffsetsPartitionGroups
from exporter.view.diagnosis.selection import split_partition
from exporter.view.document import Document, GroupWait, OffsetsGroups, TransactionRow

# `__consumer_offsets` partitions whose consumer groups a view looks up, at most (of the rows shown).
MAX_OFFSETS_PARTITIONS = 50


def offsets_partitions(rows: Iterable[TransactionRow]) -> list[int]:
    """The `__consumer_offsets` partitions (by number) of the rows shown, in order, at most
    MAX_OFFSETS_PARTITIONS: whose consumer groups the view looks up."""
    found: dict[int, None] = {}
    for row in rows:
        for n in _offsets_partitions(row):
            found.setdefault(n)
    return list(found)[:MAX_OFFSETS_PARTITIONS]


def _offsets_partitions(row: TransactionRow) -> list[int]:
    parsed = (split_partition(p) for p in row.get("partitions") or ())
    return [p[1] for p in parsed if p is not None and p[0] == CONSUMER_OFFSETS_TOPIC]


def attach_groups(doc: Document, groups: Mapping[int, Fact[OffsetsPartitionGroups]]) -> None:
    """Adds `consumer_groups` to each row with a `__consumer_offsets-N` partition that was looked up:
    per such partition, the groups whose transactional offsets are pending there (or why unknown)."""
    for row in doc["transactions"]:
        entries = [offsets_groups(n, groups[n]) for n in _offsets_partitions(row) if n in groups]
        if entries:
            row["consumer_groups"] = entries


def offsets_groups(partition: int, fact: Fact[OffsetsPartitionGroups]) -> OffsetsGroups:
    name = f"{CONSUMER_OFFSETS_TOPIC}-{partition}"
    found = fact.value
    if found is None:
        return {
            "partition": name,
            "pending_groups": None,
            "groups_checked": None,
            "groups_not_checked": None,
            "unknown_groups": {},
            "as_of_ms": fact.as_of_ms,
            "unknown": fact.problem or "not looked up",
        }
    return {
        "partition": name,
        "pending_groups": [{"group_id": g.group_id, "coordinator": g.coordinator} for g in found.pending],
        "groups_checked": found.checked,
        "groups_not_checked": found.not_checked,
        "unknown_groups": dict(found.unknown),
        "as_of_ms": fact.as_of_ms,
        # A stale answer is shown with why its refresh failed.
        "unknown": fact.problem,
    }


def group_waits(row: TransactionRow) -> list[GroupWait]:
    """The groups whose committed offsets wait behind this transaction (its `consumer_groups`)."""
    waits: list[GroupWait] = []
    for entry in row.get("consumer_groups") or ():
        for g in entry.get("pending_groups") or ():
            coordinator = "an unknown broker" if g["coordinator"] is None else f"broker {g['coordinator']}"
            waits.append(
                {
                    "group_id": g["group_id"],
                    "coordinator": g["coordinator"],
                    "partition": entry["partition"],
                    "cause": f"consumer group {g['group_id']}'s committed offsets wait behind this transaction: its "
                    f"offsets sent to it stay pending on {entry['partition']} until the transaction's marker is written "
                    "there, and a consumer of the group that fetches its offsets with require_stable (Kafka's Java "
                    "client does under read_committed) after a restart or rebalance is answered "
                    f"UNSTABLE_OFFSET_COMMIT and waits; {coordinator} coordinates the group",
                }
            )
    return waits


def waits_line(waits: Sequence[GroupWait]) -> str:
    names = ", ".join(
        f"{w['group_id']} (coordinator: {'?' if w['coordinator'] is None else 'broker ' + str(w['coordinator'])})"
        for w in waits
    )
    return f"the committed offsets of consumer group{'s' if len(waits) > 1 else ''} {names} wait behind it"

"""One view for the cluster: several exporters' transactions views, merged.

With one exporter beside each broker, each follows the `__transaction_state` partitions its broker
leads, so the cluster's in-flight transactions are the union of their views. The views are fetched
elsewhere (exporter.sources.peer_exporters: one Answer per exporter asked, exporter.contracts.peers);
`merge` makes one document of the answers, shaped like one exporter's (so the terminal table and the
page render it; they escape what it holds: an exporter's error text is whatever it sent) plus:

- each row (in-flight and hanging) carries every field its exporter sent, untouched, and
  `"exporter": {"name", "broker_id"}`: which exporter reported it and that exporter's broker id
  (from the exporter's top-level `broker`; null when unknown, e.g. with --all-partitions);
- `"sources"`: one entry per exporter asked, `{"name", "url", "ok", "error", "broker",
  "in_flight_matching", "hanging_scan", "seconds"}` (an exporter that did not answer has `ok`
  false and its one-line `error`), plus what the caller added (Prometheus's view of the target);
- `"duplicates"`: rows dropped because two exporters reported the same transaction.

Rows are ordered as each exporter orders its own (by when the transaction entered its state, then
transactional id, then coordinator partition), so the oldest `limit` of the union are among the
oldest `limit` of each exporter: asking each for `limit` rows is enough. While a `__transaction_state`
partition moves to another broker, the exporters beside the old and the new leader may both list
its transactions for a moment: a transactional id has one current transaction, so a row is kept
once per transactional id, the newer one (higher producer id, then epoch, then PREPARE_* over
ONGOING, then the later state change, then more partitions). Hanging rows (a data partition's scan
finding) are kept once per (topic, partition, producer id, epoch, start offset).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from typing import cast

from exporter.codec.states import PREPARE_STATES
from exporter.contracts.peers import Answer
from exporter.view.document import Document, ExporterRef, HangingRow, QueryEcho, SourceEntry, TransactionRow

_PREPARES = tuple(state.name for state in PREPARE_STATES)  # the rows' states, by name


def _order(row: TransactionRow) -> tuple[int, str, int]:
    # Each exporter's own order (exporter.model.reading.select_in_flight).
    return (row.get("state_entered_ms", 0), str(row.get("transactional_id", "")), row.get("coordinator_partition", 0))


def _recency(row: TransactionRow) -> tuple[int, int, bool, int, int]:
    partitions = row.get("partitions")
    return (
        row.get("producer_id", -1),
        row.get("producer_epoch", -1),
        row.get("state") in _PREPARES,
        row.get("state_entered_ms", 0),
        len(partitions) if isinstance(partitions, list) else 0,
    )


def _hanging_key(row: HangingRow) -> tuple[str, ...]:
    return (
        str(row.get("topic")),
        str(row.get("partition")),
        str(row.get("producer_id")),
        str(row.get("epoch")),
        str(row.get("start_offset")),
    )


def _broker_id(document: Mapping[str, object]) -> int | None:
    broker = document.get("broker")
    value = broker.get("id") if isinstance(broker, Mapping) else None
    return value if isinstance(value, int) else None


def merge(answers: Sequence[Answer], limit: int, query: QueryEcho | None = None) -> Document:
    """One document of the answers (see the module's doc); `query` is used when none answered. The
    answers are JSON other exporters sent: their rows are taken as they came (the renderers escape
    them), the document around them is rebuilt."""
    answered = [a.document for a in answers if a.document is not None]
    transactions: dict[str, TransactionRow] = {}
    hanging: dict[tuple[str, ...], HangingRow] = {}
    duplicates = hanging_duplicates = 0
    for answer in answers:
        document = answer.document
        if document is None:
            continue
        exporter: ExporterRef = {"name": answer.source.name, "broker_id": _broker_id(document)}
        for row in _rows(document.get("transactions")):
            tid = str(row.get("transactional_id"))
            kept = transactions.get(tid)
            if kept is not None:
                duplicates += 1
                if _recency(cast(TransactionRow, row)) <= _recency(kept):
                    continue
            transactions[tid] = cast(TransactionRow, {**row, "exporter": exporter})
        for row in _rows(document.get("hanging")):
            key = _hanging_key(cast(HangingRow, row))
            if key in hanging:
                hanging_duplicates += 1
            else:
                hanging[key] = cast(HangingRow, {**row, "exporter": exporter})
    first = answered[0] if answered else {}
    return {
        "now_ms": max((_int(d, "now_ms") for d in answered), default=int(time.time() * 1000)),
        "query": cast(QueryEcho, first.get("query", dict(query or {}))),
        "late_padding_seconds": cast(float, first.get("late_padding_seconds", 0)),
        "broker_log": bool(answered) and all(d.get("broker_log") for d in answered),
        # Each exporter's count, less the transactions two of them listed (counted once).
        "in_flight_matching": sum(_int(d, "in_flight_matching") for d in answered) - duplicates,
        "transactions": sorted(transactions.values(), key=_order)[:limit],
        "hanging_scan": any(d.get("hanging_scan") for d in answered),
        # The oldest of the exporters' last scans: every one has scanned since (None: none says when).
        "hanging_scan_ms": min(
            (scan_ms for d in answered if isinstance(scan_ms := d.get("hanging_scan_ms"), int)), default=None
        ),
        "hanging_matching": sum(_int(d, "hanging_matching") for d in answered) - hanging_duplicates,
        "hanging": sorted(hanging.values(), key=lambda r: (r.get("last_timestamp_ms", 0), _hanging_key(r)))[:limit],
        "sources": [_source_entry(a) for a in answers],
        "duplicates": duplicates + hanging_duplicates,
    }


def _rows(value: object) -> Iterable[dict[str, object]]:
    return (row for row in value if isinstance(row, dict)) if isinstance(value, list) else ()


def _int(document: Mapping[str, object] | None, key: str) -> int:
    value = (document or {}).get(key)
    return value if isinstance(value, int) else 0


def _source_entry(answer: Answer) -> SourceEntry:
    document = answer.document
    entry: dict[str, object] = {
        "name": answer.source.name,
        "url": answer.source.url.partition("?")[0],
        "ok": document is not None,
        "error": answer.error,
        "broker": document.get("broker") if document is not None else None,
        "in_flight_matching": document.get("in_flight_matching") if document is not None else None,
        "hanging_scan": document.get("hanging_scan") if document is not None else None,
        "hanging_scan_ms": document.get("hanging_scan_ms") if document is not None else None,
        "seconds": answer.seconds,
    }
    entry.update(answer.source.extra)
    return cast(SourceEntry, entry)  # what the exporter sent of itself, as it sent it

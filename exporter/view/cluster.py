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
from typing import Any

from exporter.contracts.peers import Answer

_PREPARES = ("PREPARE_COMMIT", "PREPARE_ABORT")


def _order(row: Mapping[str, Any]) -> tuple[Any, ...]:
    # Each exporter's own order (exporter.model.reading.select_in_flight).
    return (row.get("state_entered_ms", 0), str(row.get("transactional_id", "")), row.get("coordinator_partition", 0))


def _recency(row: Mapping[str, Any]) -> tuple[Any, ...]:
    partitions = row.get("partitions")
    return (
        row.get("producer_id", -1),
        row.get("producer_epoch", -1),
        row.get("state") in _PREPARES,
        row.get("state_entered_ms", 0),
        len(partitions) if isinstance(partitions, list) else 0,
    )


def _hanging_key(row: Mapping[str, Any]) -> tuple[Any, ...]:
    return tuple(str(row.get(k)) for k in ("topic", "partition", "producer_id", "epoch", "start_offset"))


def _broker_id(document: Mapping[str, Any]) -> int | None:
    broker = document.get("broker")
    value = broker.get("id") if isinstance(broker, Mapping) else None
    return value if isinstance(value, int) else None


def merge(answers: Sequence[Answer], limit: int, query: Mapping[str, object] | None = None) -> dict[str, object]:
    """One document of the answers (see the module's doc); `query` is used when none answered."""
    answered = [a.document for a in answers if a.document is not None]
    transactions: dict[str, dict[str, Any]] = {}
    hanging: dict[tuple[Any, ...], dict[str, Any]] = {}
    duplicates = hanging_duplicates = 0
    for answer in answers:
        document = answer.document
        if document is None:
            continue
        exporter = {"name": answer.source.name, "broker_id": _broker_id(document)}
        for row in _rows(document.get("transactions")):
            tid = str(row.get("transactional_id"))
            kept = transactions.get(tid)
            if kept is not None:
                duplicates += 1
                if _recency(row) <= _recency(kept):
                    continue
            transactions[tid] = {**row, "exporter": exporter}
        for row in _rows(document.get("hanging")):
            key = _hanging_key(row)
            if key in hanging:
                hanging_duplicates += 1
            else:
                hanging[key] = {**row, "exporter": exporter}
    first = answered[0] if answered else {}
    return {
        "now_ms": max((_int(d, "now_ms") for d in answered), default=int(time.time() * 1000)),
        "query": first.get("query", dict(query or {})),
        "late_padding_seconds": first.get("late_padding_seconds", 0),
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


def _rows(value: object) -> Iterable[dict[str, Any]]:
    return (row for row in value if isinstance(row, dict)) if isinstance(value, list) else ()


def _int(document: Mapping[str, Any] | None, key: str) -> int:
    value = (document or {}).get(key)
    return value if isinstance(value, int) else 0


def _source_entry(answer: Answer) -> dict[str, object]:
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
    return entry


# -- how the table and the page name a row's broker and an exporter --------------------------------


def is_merged(document: Mapping[str, Any]) -> bool:
    return isinstance(document.get("sources"), list)


def broker_of(row: Mapping[str, Any]) -> str:
    """A merged row's broker: the coordinator broker if the row names it, else its exporter's broker
    id, else its exporter's name."""
    coordinator = row.get("coordinator_broker")
    if isinstance(coordinator, int):
        return str(coordinator)
    exporter = row.get("exporter")
    if not isinstance(exporter, Mapping):
        return "?"
    broker_id = exporter.get("broker_id")
    return str(broker_id) if isinstance(broker_id, int) else str(exporter.get("name", "?"))


def describe_source(source: Mapping[str, Any]) -> str:
    """An exporter in one phrase: 'broker 1 (host:port)', or its name alone when its broker is unknown."""
    broker = source.get("broker")
    broker_id = broker.get("id") if isinstance(broker, Mapping) else None
    name = str(source.get("name", "?"))
    return f"broker {broker_id} ({name})" if isinstance(broker_id, int) else name


def source_lines(document: Mapping[str, Any]) -> list[str]:
    """What a merged document says of its exporters: how many answered, then one line per exporter
    that did not (with why), then those without a hanging scan yet. Plain text, not yet escaped."""
    sources = [s for s in document.get("sources", []) if isinstance(s, Mapping)]
    failed = [s for s in sources if not s.get("ok")]
    lines = [f"{len(sources) - len(failed)} of {len(sources)} exporters answered."]
    for s in failed:
        line = f"NOT ANSWERING: {s.get('name', '?')} ({s.get('url', '?')}): {s.get('error')}"
        target = s.get("prometheus")
        if isinstance(target, Mapping) and target.get("health") not in (None, "up"):
            line += f" (Prometheus: {target.get('health')}, {target.get('last_error') or 'no error given'})"
        lines.append(line)
    answered = [s for s in sources if s.get("ok")]
    no_scan = [describe_source(s) for s in answered if not s.get("hanging_scan")]
    if answered and len(no_scan) == len(answered):
        lines.append("No hanging-transaction scan has completed on these exporters.")
    elif no_scan:
        lines.append(f"No hanging-transaction scan has completed yet on: {', '.join(no_scan)}.")
    return lines

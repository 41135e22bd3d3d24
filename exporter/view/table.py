"""The transactions view's JSON document as plain-text tables, for a terminal.

Transactional ids and topics are untrusted: characters that are not printable (terminal escape
sequences among them) are shown as Python escapes, never written as they are.
"""

from __future__ import annotations

import time
from typing import Any

from exporter.view import page

COLUMNS = (
    "TRANSACTIONAL_ID",
    "STATE",
    "PRODUCER_ID",
    "EPOCH",
    "AGE",
    "TIMEOUT",
    "LATE",
    "TXN_PARTITION",
    "PARTITIONS",
    "MARKER_ERRORS",
)
ABORT_INTRO = "To abort a hanging transaction, after checking it (kafka-transactions.sh describe-producers):"
HANGING_COLUMNS = ("PARTITION", "PRODUCER_ID", "EPOCH", "START_OFFSET", "TRANSACTIONAL_ID", "AGE", "REASON")


safe = page.printable


def age(seconds: float) -> str:
    return page.age(seconds).replace(" ", "")  # one word per column


def aligned(columns: tuple[str, ...], rows: list[list[str]]) -> list[str]:
    """The header and rows in left-aligned columns (also `txn-exporter hanging`'s table)."""
    widths = [max([len(c), *(len(r[i]) for r in rows)]) for i, c in enumerate(columns)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(columns, widths)).rstrip()]
    lines += ["  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip() for r in rows]
    return lines


def _marker_error(error: dict[str, Any], now_ms: int) -> str:
    last = age(max(0, now_ms - error["last_seen_ms"]) / 1000)
    return f"{error['partition']}:{error['error']}(x{error['count']},last:{last}ago)"


def render(doc: dict[str, Any]) -> str:
    now_ms = doc["now_ms"]
    rows = [
        [
            safe(r["transactional_id"]),
            r["state"],
            str(r["producer_id"]),
            str(r["producer_epoch"]),
            age(r["age_seconds"]),
            f"{r['transaction_timeout_ms'] / 1000:g}s",
            "LATE" if r["late"] else "-",
            str(r["coordinator_partition"]),
            safe(",".join(r["partitions"]) or "-"),
            safe(",".join(_marker_error(e, now_ms) for e in r["marker_errors"]) or "-"),
        ]
        for r in doc["transactions"]
    ]
    when = time.strftime("%H:%M:%S", time.gmtime(now_ms / 1000))
    lines = aligned(COLUMNS, rows) if rows else ["No in-flight transaction matches."]
    lines.append(f"\n{doc['in_flight_matching']} in flight match, {len(rows)} shown, oldest first (at {when} UTC).")
    if doc["hanging"]:
        hanging = [
            [
                safe(f"{h['topic']}-{h['partition']}"),
                str(h["producer_id"]),
                str(h["epoch"]),
                str(h["start_offset"]),
                safe(h["transactional_id"] or "-"),
                age(h["age_seconds"]),
                safe(h["reason"]),
            ]
            for h in doc["hanging"]
        ]
        lines += ["\nHanging transactions (last scan):", *aligned(HANGING_COLUMNS, hanging)]
        lines.append("\n" + ABORT_INTRO)
        lines += ["  " + safe(h["abort_command"]) for h in doc["hanging"]]
    elif not doc["hanging_scan"]:
        lines.append("No hanging-transaction scan has completed on this exporter.")
    return "\n".join(lines) + "\n"

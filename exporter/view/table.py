"""The transactions view's JSON document as plain-text tables, for a terminal.

Transactional ids and topics are untrusted: characters that are not printable (terminal escape
sequences among them) are shown as Python escapes, never written as they are.
"""

from __future__ import annotations

import time

from exporter.view import wording
from exporter.view.document import Diagnosis, Document, KnownBugs, TransactionRow, is_merged

COLUMNS = (
    "TRANSACTIONAL_ID",
    "STATE",
    "FLAG",
    "IN_STATE",
    "DURATION",
    "TIMEOUT",
    "PRODUCER_ID",
    "EPOCH",
    "TV",
    "COORDINATOR",
    "TXN_PARTITION",
    "PARTITIONS",
    "MARKER_ERRORS",
)
ABORT_INTRO = "To abort a hanging transaction, after checking it (kafka-transactions.sh describe-producers):"
HANGING_COLUMNS = (
    "PARTITION",
    "PRODUCER_ID",
    "EPOCH",
    "START_OFFSET",
    "TRANSACTIONAL_ID",
    "COORDINATOR",
    "AGE",
    "REASON",
)
BROKER_COLUMN = "BROKER"  # a merged view's (exporter.view.cluster): which broker each row is from


safe = wording.printable


def age(seconds: float) -> str:
    return wording.age(seconds).replace(" ", "")  # one word per column


def aligned(columns: tuple[str, ...], rows: list[list[str]]) -> list[str]:
    """The header and rows in left-aligned columns (also `txn-exporter hanging`'s table)."""
    widths = [max([len(c), *(len(r[i]) for r in rows)]) for i, c in enumerate(columns)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(columns, widths)).rstrip()]
    lines += ["  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip() for r in rows]
    return lines


def render(doc: Document) -> str:
    now_ms = doc["now_ms"]
    rows = [
        [
            safe(r["transactional_id"]),
            r["state"],
            wording.flag(r).upper() or "-",
            age(r["age_seconds"]),
            "?" if r.get("duration_seconds") is None else age(r["duration_seconds"]),
            f"{r['transaction_timeout_ms'] / 1000:g}s",
            str(r["producer_id"]),
            str(r["producer_epoch"]),
            wording.transaction_version(r),
            "?" if r.get("coordinator_broker") is None else str(r["coordinator_broker"]),
            str(r["coordinator_partition"]),
            safe(",".join(r["partitions"]) or "-"),
            # The last column: its spaces need no care.
            safe("; ".join(wording.marker_error(e, now_ms) for e in r["marker_errors"]) or "-"),
        ]
        for r in doc["transactions"]
    ]
    merged = is_merged(doc)
    columns = (BROKER_COLUMN, *COLUMNS) if merged else COLUMNS
    if merged:
        rows = [[safe(wording.broker_of(r)), *row] for r, row in zip(doc["transactions"], rows)]
    when = time.strftime("%H:%M:%S", time.gmtime(now_ms / 1000))
    lines = aligned(columns, rows) if rows else [wording.NO_IN_FLIGHT]
    padding = f"{doc['late_padding_seconds']:g}s"
    lines.append(
        f"\n{doc['in_flight_matching']} in flight match, {len(rows)} shown, oldest first (at {when} UTC)."
        f" LATE: ONGOING past its timeout + {padding}; STUCK: PREPARE_* in that state longer than its timeout +"
        f" {padding}. IN_STATE: since it entered its state; DURATION: since the transaction began."
    )
    grouped = [(r, g) for r in doc["transactions"] for g in r.get("consumer_groups") or ()]
    if grouped:
        lines.append("\nConsumer groups of the offsets sent to the transactions:")
        lines += [
            f"  {safe(r['transactional_id'])}: {safe(g['partition'])}: {safe(wording.offsets_groups(g))}"
            for r, g in grouped
        ]
    diagnosed = [(r, d) for r in doc["transactions"] if (d := r.get("diagnosis"))]
    if diagnosed:
        lines.append("\nDiagnosis:")
        if versions := wording.kafka_versions(doc):
            lines.append(f"Kafka versions the known bugs are held against: {safe(versions)}.")
        for r, d in diagnosed:
            lines += diagnosis_lines(r, d, now_ms)
    if doc["hanging"]:
        hanging = [
            [
                safe(f"{h['topic']}-{h['partition']}"),
                str(h["producer_id"]),
                str(h["epoch"]),
                str(h["start_offset"]),
                safe(h["transactional_id"] or "-"),
                "?" if h.get("coordinator_broker") is None else str(h["coordinator_broker"]),
                age(h["age_seconds"]),
                safe(h["reason"]),
            ]
            for h in doc["hanging"]
        ]
        hanging_columns = (BROKER_COLUMN, *HANGING_COLUMNS) if merged else HANGING_COLUMNS
        if merged:
            hanging = [[safe(wording.broker_of(h)), *row] for h, row in zip(doc["hanging"], hanging)]
        when = wording.last_scan(doc)
        lines += [
            f"\nHanging transactions (last scan{' ' + when if when else ''}):",
            *aligned(hanging_columns, hanging),
        ]
        runbook = doc["hanging"][0].get("runbook")
        if runbook:
            lines.append(f"Runbook: {runbook['url']}")
        lines.append("\n" + ABORT_INTRO)
        lines += ["  " + safe(h["abort_command"]) for h in doc["hanging"]]
        for h in doc["hanging"]:
            if (bugs := h.get("known_bugs")) and (found := known_bug_lines(bugs, "  ")):
                lines += [f"Known bugs of {safe(h['topic'])}-{h['partition']} (producer {h['producer_id']}):", *found]
    elif doc["hanging_scan"]:
        when = wording.last_scan(doc)
        lines.append(f"No hanging transaction in the last scan{f' ({when})' if when else ''}.")
    elif not merged:
        lines.append(f"{wording.NO_SCAN} on this exporter.")
    if merged:
        lines += ["", *(safe(line) for line in wording.source_lines(doc))]
    return "\n".join(lines) + "\n"


def known_bug_lines(bugs: KnownBugs, indent: str) -> list[str]:
    """The known bugs a row matches (JIRA id, how sure, the workaround, the link) and those not checked."""
    lines = [f"{indent}known bug: {m['jira']} {safe(wording.known_bug(m))} {m['link']}" for m in bugs["matches"]]
    if unchecked := wording.bugs_not_checked(bugs):
        lines.append(f"{indent}known bugs not checked: {safe(unchecked)}")
    return lines


def diagnosis_lines(row: TransactionRow, d: Diagnosis, now_ms: int) -> list[str]:
    """One diagnosed transaction (`d`: its diagnosis), indented under its id."""
    flagged = wording.flag(row)
    head = f"{row['state']}{', ' + flagged if flagged else ''}, coordinator {wording.coordinator(row)}"
    lines = [f"\n{safe(row['transactional_id'])} ({head}):", f"  why: {safe(d['summary'])}"]
    if bugs := d.get("known_bugs"):
        lines += known_bug_lines(bugs, "  ")
    said: set[str] = set()
    for p in d["partitions"]:
        lines.append(f"  {safe(p['partition'])}: {safe(wording.facts(p))}")
        for e in p["errors"]:
            cause = wording.SAME_CAUSE if e["cause"] in said else safe(e["cause"])
            said.add(e["cause"])
            lines.append(
                f"    {e['error']} x{e['count']}, last {wording.since(e['last_seen_ms'], now_ms)} ago: {cause}"
            )
        if p["cause"] and not p["errors"]:
            lines.append(f"    {safe(p['cause'])}")
        if "producer" in p:
            lines.append(f"    {safe(wording.producer(p['producer']))}")
    if d.get("partitions_not_shown"):
        lines.append(f"  and {d['partitions_not_shown']} more partitions")
    lines += [f"  {safe(w['partition'])}: {safe(w['cause'])}" for w in d.get("consumer_groups") or ()]
    c = d["coordinator"]
    if c["append_errors"] or c["cause"]:
        lines.append(f"  coordinator {c['partition']}: {safe(wording.facts(c))}")
        lines += [
            f"    {e['error']} x{e['count']} ({e.get('target_state', '?')}), last"
            f" {wording.since(e['last_seen_ms'], now_ms)} ago: {safe(e['cause'])}"
            for e in c["append_errors"]
        ]
        if c["cause"] and not c["append_errors"]:
            lines.append(f"    {safe(c['cause'])}")
    lines.append(f"  runbook: {d['runbook']['section']} {d['runbook']['url']}")
    lines += [f"  {c['purpose']}: {safe(c['command'])}" for c in d["commands"]]
    if not d["abort"]["allowed"]:
        lines.append(f"  do not abort it: {d['abort']['why']}.")
    return lines

"""The transactions view as one server-rendered HTML page: readable on a phone (the table turns
into one card per transaction on a narrow screen), refreshes itself, no script at all.

Every stuck, late or erroring transaction gets its diagnosis (exporter.view.diagnosis) in a row of
its own under it: the cause, each troubled data partition's leader, replicas, ISR and
min.insync.replicas, the runbook section and Kafka's commands. While one is shown the page
refreshes every STUCK_REFRESH_SECONDS instead of REFRESH_SECONDS (a meta refresh: still no script),
so a hold of a few seconds is seen as it happens.

Every value is escaped: transactional ids and topic names are whatever clients sent, so characters
that are not printable are shown as escapes (\\x1b, \\u200b) and the rest is HTML-escaped.
"""

from __future__ import annotations

import html

from exporter.view.document import Command, Diagnosis, Document, HangingRow, KnownBugs, TransactionRow, is_merged
from exporter.view.query import HANGING_STATE, STATES, Query
from exporter.view.wording import (
    NO_IN_FLIGHT,
    NO_SCAN,
    NOT_ANSWERING,
    SAME_CAUSE,
    age,
    broker_of,
    bugs_not_checked,
    coordinator,
    facts,
    flag,
    kafka_versions,
    known_bug,
    last_scan,
    offsets_groups,
    printable,
    producer,
    since,
    source_lines,
    transaction_version,
    utc,
)

REFRESH_SECONDS = 10
STUCK_REFRESH_SECONDS = 2
# The page needs nothing but its own inline style: no script, no request elsewhere.
CONTENT_SECURITY_POLICY = "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; base-uri 'none'"

_STYLE = """
body{font:15px/1.4 system-ui,sans-serif;margin:0 auto;padding:.6em;max-width:90em;color:#111;background:#fff}
h1{font-size:1.3em;margin:.2em 0}h2{font-size:1.1em;margin:1.2em 0 .3em}
p.meta{color:#555;margin:.2em 0 .6em}
form{display:flex;flex-wrap:wrap;gap:.4em .8em;align-items:end;margin:.4em 0 .8em}
label{display:flex;flex-direction:column;font-size:.85em;color:#444}
input,select,button{font:inherit;padding:.2em .3em}input{width:7em}
table{border-collapse:collapse;width:100%}
th,td{text-align:left;vertical-align:top;padding:.3em .5em;border-bottom:1px solid #ddd;overflow-wrap:anywhere}
th{background:#f3f3f3;font-weight:600}
td.id,code{font-family:ui-monospace,monospace;word-break:break-all}td.n{white-space:nowrap}
@media (min-width:48em){span.n{white-space:nowrap}}
.late,.error{color:#b00020;font-weight:600}.none{color:#777}
tr.diagnosis td{background:#fff8f0;border-bottom:2px solid #e0c8b0;padding:.4em .8em .6em}
.diagnosis p{margin:.2em 0}.diagnosis ul,.diagnosis ol{margin:.2em 0 .3em;padding-left:1.4em}
.diagnosis li{margin:.15em 0}.purpose{font-size:.8em;text-transform:uppercase;color:#555;margin-right:.3em}
.fix{color:#0b6b2b}.resort{color:#9a5b00}.why{color:#555}
@media (max-width:48em){
 table,thead,tbody,tr,td{display:block}thead{display:none}
 tr{border:1px solid #ccc;border-radius:6px;margin:0 0 .7em;padding:.3em}
 td{border:0;padding:.15em .3em}
 td::before{content:attr(data-label) ": ";font-weight:600;color:#444}
}
"""


def text(value: object) -> str:
    """Shown as text: non-printable characters escaped, then HTML-escaped."""
    return html.escape(printable(value), quote=True)


def refresh_seconds(doc: Document) -> int:
    """How often the page reloads itself: faster while a transaction with a diagnosis is shown."""
    return STUCK_REFRESH_SECONDS if any(r.get("diagnosis") for r in doc["transactions"]) else REFRESH_SECONDS


def render(doc: Document, query: Query) -> str:
    now_ms = doc["now_ms"]
    rows = doc["transactions"]
    refresh = refresh_seconds(doc)
    padding = f"{doc['late_padding_seconds']:g} s"
    every = (
        f"every {refresh} s while something is stuck (else {REFRESH_SECONDS} s)"
        if refresh != REFRESH_SECONDS
        else f"every {refresh} s"
    )
    merged = is_merged(doc)  # exporter.view.cluster's merge (scope=cluster): rows name their broker
    scope = "&amp;scope=cluster" if merged else ""
    parts = [
        '<!doctype html><html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f'<meta http-equiv="refresh" content="{refresh}">',
        "<title>In-flight transactions - kafka-txn-exporter</title>",
        f"<style>{_STYLE}</style></head><body>",
        "<h1>In-flight transactions</h1>" if not merged else "<h1>In-flight transactions of the cluster</h1>",
        f'<p class="meta">{doc["in_flight_matching"]} in flight match, {len(rows)} shown, oldest first.'
        f" Updated {utc(now_ms)} UTC, {every}."
        f" <b>Late</b>: ONGOING past its own timeout + {padding}. <b>Stuck</b>: PREPARE_* in that state longer"
        f" than its own timeout + {padding} (the coordinator retries its markers without end)."
        " <b>In state</b>: since it entered its state; <b>duration</b>: since the transaction began"
        " (kafka-transactions.sh describe's)."
        f"{'' if doc['broker_log'] else ' Marker errors need --broker-log.'}"
        f' <a href="?{text(query.parameters(format="json"))}{scope}">JSON</a>{_scope_link(doc, query)}</p>',
        f'<p class="meta">Kafka versions the known bugs are held against: {text(versions)}.</p>'
        if (versions := kafka_versions(doc))
        else "",
        _sources(doc) if merged else "",
        _form(query).replace("</form>", '<input type="hidden" name="scope" value="cluster"></form>')
        if merged
        else _form(query),
        _with_broker(_transactions(rows, now_ms, merged), rows) if merged else _transactions(rows, now_ms),
        _with_broker(_hanging(doc), doc["hanging"]) if merged else _hanging(doc),
        "</body></html>\n",
    ]
    return "".join(parts)


def _form(query: Query) -> str:
    chosen = "" if query.states is None and query.hanging else _single_state(query)
    options = "".join(
        f'<option value="{n}"{" selected" if n == chosen else ""}>{n or "all"}</option>'
        for n in ["", *STATES, HANGING_STATE]
    )
    min_age = f"{query.min_age_ms / 1000:g}" if query.min_age_ms else ""
    return (
        '<form method="get">'
        f'<label>State<select name="state">{options}</select></label>'
        f'<label>Min age (s)<input name="min_age" inputmode="decimal" value="{text(min_age)}"></label>'
        f'<label>Limit<input name="limit" inputmode="numeric" value="{query.limit}"></label>'
        '<button type="submit">Filter</button></form>'
    )


def _single_state(query: Query) -> str:
    names = query.state_names()
    return names[0] if len(names) == 1 else ""


_COLUMNS = (
    "Transactional id",
    "State",
    "Late / stuck",
    "In state (since, UTC)",
    "Duration",
    "Timeout",
    "Producer id / epoch",
    "Coordinator",
    "Data partitions",
    "Marker errors",
)


def _transactions(rows: list[TransactionRow], now_ms: int, broker_column: bool = False) -> str:
    """The table; `broker_column`: a merged view's, to which _with_broker adds a first column."""
    if not rows:
        return f'<p class="none">{NO_IN_FLIGHT}</p>'
    head = "".join(f"<th>{c}</th>" for c in _COLUMNS)
    body = []
    for r in rows:
        errors = (
            "<br>".join(
                f'{text(e["partition"])}: <span class="error">{_breakable(e["error"])}</span>'
                f" x{e['count']}, last {since(e['last_seen_ms'], now_ms)} ago"
                for e in r["marker_errors"]
            )
            or '<span class="none">-</span>'
        )
        groups = {g["partition"]: g for g in r.get("consumer_groups") or ()}
        partitions = (
            ", ".join(
                f'<span class="n">{text(p)}</span>'
                + (f' <span class="groups">({text(offsets_groups(groups[p]))})</span>' if p in groups else "")
                for p in r["partitions"]
            )
            or '<span class="none">-</span>'
        )
        flagged = flag(r)
        cells = (
            (f'<td class="id">{text(r["transactional_id"])}</td>'),
            f"<td>{r['state']}</td>",
            f'<td class="late">{flagged}</td>' if flagged else '<td><span class="none">-</span></td>',
            f'<td class="n">{age(r["age_seconds"])}<br><span class="none">{utc(r["state_entered_ms"], now_ms)}</span></td>',
            f'<td class="n">{"?" if r.get("duration_seconds") is None else age(r["duration_seconds"])}</td>',
            f'<td class="n">{r["transaction_timeout_ms"] / 1000:g} s</td>',
            f"<td>{r['producer_id']} / {r['producer_epoch']}<br>"
            f'<span class="none">{transaction_version(r)}</span></td>',
            f"<td>{text(coordinator(r))}</td>",
            f"<td>{partitions}</td>",
            f"<td>{errors}</td>",
        )
        body.append("<tr>" + "".join(_labelled(cell, label) for cell, label in zip(cells, _COLUMNS)) + "</tr>")
        if d := r.get("diagnosis"):
            body.append(
                f'<tr class="diagnosis"><td colspan="{len(_COLUMNS) + broker_column}" data-label="Diagnosis">'
                f"{_diagnosis(d, now_ms)}</td></tr>"
            )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _breakable(name: str) -> str:
    """A Kafka error name (NOT_ENOUGH_REPLICAS_AFTER_APPEND) that may wrap after each underscore:
    in a column beside nine others, or on a phone, the name is wider than its cell."""
    return text(name).replace("_", "_<wbr>")


def _diagnosis(d: Diagnosis, now_ms: int) -> str:
    parts = [f"<p><b>Why:</b> {text(d['summary'])}</p>"]
    if bugs := d.get("known_bugs"):
        parts.append(_known_bugs(bugs))
    items = []
    said: set[str] = set()  # causes already shown: a topic's partitions often share one
    for p in d["partitions"]:
        lines = [f"<code>{text(p['partition'])}</code>: {text(facts(p))}"]
        lines += [
            f'<br><span class="error">{text(e["error"])}</span> x{e["count"]}, last '
            f"{since(e['last_seen_ms'], now_ms)} ago: {_once(e['cause'], said)}"
            for e in p["errors"]
        ]
        if p["cause"] and not p["errors"]:
            lines.append(f"<br>{text(p['cause'])}")
        if "producer" in p:
            lines.append(f"<br>{text(producer(p['producer']))}")
        items.append("<li>" + "".join(lines) + "</li>")
    items += [
        f"<li><code>{text(w['partition'])}</code>: {text(w['cause'])}</li>" for w in d.get("consumer_groups") or ()
    ]
    c = d["coordinator"]
    if c["append_errors"] or c["cause"]:
        lines = [f"Coordinator broker {'?' if c['broker'] is None else c['broker']}, <code>{c['partition']}</code>: "]
        lines.append(text(facts(c)))
        lines += [
            f'<br><span class="error">{text(e["error"])}</span> x{e["count"]} ({e.get("target_state", "?")}), last '
            f"{since(e['last_seen_ms'], now_ms)} ago: {text(e['cause'])}"
            for e in c["append_errors"]
        ]
        if c["cause"] and not c["append_errors"]:
            lines.append(f"<br>{text(c['cause'])}")
        items.append("<li>" + "".join(lines) + "</li>")
    if d.get("partitions_not_shown"):
        items.append(f'<li class="none">and {d["partitions_not_shown"]} more partitions (JSON: limited too)</li>')
    if items:
        parts.append("<ul>" + "".join(items) + "</ul>")
    runbook = d["runbook"]
    parts.append(f'<p><b>Runbook:</b> <a href="{text(runbook["url"])}">{text(runbook["section"])}</a></p>')
    parts.append(_commands(d["commands"]))
    if not d["abort"]["allowed"]:
        parts.append(f'<p class="why"><b>Do not abort it:</b> {text(d["abort"]["why"])}.</p>')
    return "".join(parts)


def _known_bugs(bugs: KnownBugs) -> str:
    """The known Kafka bugs a row matches (each linked to its JIRA), and those it could not be held
    against, with why."""
    parts = [
        f'<p class="bug"><b>Known Kafka bug:</b> <a href="{text(m["link"])}">{text(m["jira"])}</a>'
        f" {text(known_bug(m))}</p>"
        for m in bugs["matches"]
    ]
    if unchecked := bugs_not_checked(bugs):
        parts.append(f'<p class="none">Known bugs not checked: {text(unchecked)}.</p>')
    return "".join(parts)


def _once(cause: str, said: set[str]) -> str:
    if cause in said:
        return f'<span class="none">{SAME_CAUSE}</span>'
    said.add(cause)
    return text(cause)


_PURPOSE_CLASS = {"confirm": "purpose", "fix": "purpose fix", "last resort": "purpose resort"}


def _commands(commands: list[Command]) -> str:
    items = "".join(
        f'<li><span class="{_PURPOSE_CLASS.get(c["purpose"], "purpose")}">{text(c["purpose"])}</span>'
        f'<code>{text(c["command"])}</code> <span class="why">{text(c["why"])}</span></li>'
        for c in commands
    )
    return f"<p><b>Commands</b> (Kafka's own tools):</p><ol>{items}</ol>"


def _labelled(cell: str, label: str) -> str:
    # data-label feeds the narrow-screen layout, where each cell says what it is.
    return cell.replace("<td", f'<td data-label="{label}"', 1)


_HANGING_COLUMNS = (
    "Partition",
    "Producer id / epoch",
    "Start offset",
    "Transactional id",
    "Coordinator",
    "Age",
    "Reason",
    "Abort command (after checking it)",
)


def _hanging(doc: Document) -> str:
    title = "<h2>Hanging transactions (data partitions)</h2>"
    if not doc["hanging_scan"]:
        return title + f'<p class="none">{NO_SCAN} yet.</p>'
    rows = doc["hanging"]
    when = last_scan(doc)
    if not rows:
        at = f"{when}; " if when else ""
        return title + f'<p class="none">None in the last scan ({at}{doc["hanging_matching"]} match).</p>'
    runbook = rows[0].get("runbook")
    link = f' Runbook: <a href="{text(runbook["url"])}">{text(runbook["section"])}</a>.' if runbook else ""
    title += f'<p class="meta">Last scan {when or "time unknown"}.{link}</p>'
    head = "".join(f"<th>{c}</th>" for c in _HANGING_COLUMNS)
    body = []
    for r in rows:
        cells = (
            f"<td>{text(r['topic'])}-{r['partition']}</td>",
            f"<td>{r['producer_id']} / {r['epoch']}</td>",
            f"<td>{r['start_offset']}</td>",
            f'<td class="id">{text(r["transactional_id"] or "-")}</td>',
            f"<td>{'?' if r.get('coordinator_broker') is None else 'broker ' + str(r['coordinator_broker'])}</td>",
            f'<td class="n">{age(r["age_seconds"])}</td>',
            f"<td>{text(r['reason'])}{_known_bugs(r['known_bugs']) if r.get('known_bugs') else ''}</td>",
            f"<td><code>{text(r['abort_command'])}</code></td>",
        )
        body.append("<tr>" + "".join(_labelled(c, label) for c, label in zip(cells, _HANGING_COLUMNS)) + "</tr>")
    return f"{title}<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


# -- the cluster view (scope=cluster): which broker each row is from, and the exporters asked --------


def _scope_link(doc: Document, query: Query) -> str:
    if is_merged(doc):
        return f' <a href="?{text(query.parameters())}">This exporter only</a>'
    if doc.get("peers"):
        return f' <a href="?{text(query.parameters(scope="cluster"))}">Whole cluster ({doc["peers"] + 1} exporters)</a>'
    return ""


def _sources(doc: Document) -> str:
    # Which exporters have no hanging scan yet: the hanging section says so for all of them.
    lines = [line for line in source_lines(doc) if not line.startswith(NO_SCAN)]
    if doc.get("peers") == 0:
        lines.append("This exporter has no peers (--peer): its own view only.")
    return "".join(
        f'<p class="{"error" if line.startswith(NOT_ANSWERING) else "meta"}">{text(line)}</p>' for line in lines
    )


def _with_broker(table: str, rows: list[TransactionRow] | list[HangingRow]) -> str:
    """`table` (the <table> of `rows`) with a first column naming each row's broker. A row is found by
    its first cell's label (the first column's), so rows of another kind in the table are left be."""
    head, found, body = table.partition("<tbody>")
    if not found:
        return table  # no table: "none match"
    first = head.partition("<tr><th>")[2].partition("</th>")[0]
    head = head.replace("<tr><th>", "<tr><th>Broker</th><th>", 1)
    marker = f'<tr><td data-label="{first}"'
    pieces = body.split(marker)
    out = [pieces[0]]
    for n, piece in enumerate(pieces[1:]):
        broker = broker_of(rows[n]) if n < len(rows) else "?"
        out.append(f'<tr><td data-label="Broker">{text(broker)}</td><td data-label="{first}"{piece}')
    return head + "<tbody>" + "".join(out)

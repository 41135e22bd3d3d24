"""The transactions view as one server-rendered HTML page: readable on a phone (the table turns
into one card per transaction on a narrow screen), refreshes itself, no script at all.

Every value is escaped: transactional ids and topic names are whatever clients sent, so characters
that are not printable are shown as escapes (\\x1b, \\u200b) and the rest is HTML-escaped.
"""

from __future__ import annotations

import html
import time
from typing import Any

from exporter.view.query import HANGING_STATE, STATES, Query

REFRESH_SECONDS = 10
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
th,td{text-align:left;vertical-align:top;padding:.3em .5em;border-bottom:1px solid #ddd}
th{background:#f3f3f3;font-weight:600}
td.id,code{font-family:ui-monospace,monospace;word-break:break-all}td.n{white-space:nowrap}
@media (min-width:48em){span.n{white-space:nowrap}}
.late,.error{color:#b00020;font-weight:600}.none{color:#777}
@media (max-width:48em){
 table,thead,tbody,tr,td{display:block}thead{display:none}
 tr{border:1px solid #ccc;border-radius:6px;margin:0 0 .7em;padding:.3em}
 td{border:0;padding:.15em .3em}
 td::before{content:attr(data-label) ": ";font-weight:600;color:#444}
}
"""


def printable(value: object) -> str:
    """`value` with its non-printable characters as Python escapes (also the terminal table's)."""
    s = str(value)
    return (
        s
        if s.isprintable()
        else "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in s)
    )


def text(value: object) -> str:
    """Shown as text: non-printable characters escaped, then HTML-escaped."""
    return html.escape(printable(value), quote=True)


def age(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, s = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {s:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


def utc(ms: int, now_ms: int | None = None) -> str:
    """Date and time (UTC) to the millisecond; the time alone when it is the day of `now_ms`."""
    day = time.gmtime(ms / 1000)[:3]
    layout = "%H:%M:%S" if now_ms is not None and time.gmtime(now_ms / 1000)[:3] == day else "%Y-%m-%d %H:%M:%S"
    return time.strftime(layout, time.gmtime(ms / 1000)) + f".{ms % 1000:03d}"


def render(doc: dict[str, Any], query: Query) -> str:
    now_ms = doc["now_ms"]
    rows = doc["transactions"]
    parts = [
        '<!doctype html><html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f'<meta http-equiv="refresh" content="{REFRESH_SECONDS}">',
        "<title>In-flight transactions - kafka-txn-exporter</title>",
        f"<style>{_STYLE}</style></head><body>",
        "<h1>In-flight transactions</h1>",
        f'<p class="meta">{doc["in_flight_matching"]} in flight match, {len(rows)} shown, oldest first.'
        f" Updated {utc(now_ms)} UTC, every {REFRESH_SECONDS} s."
        f" Late: ONGOING past its timeout + {doc['late_padding_seconds']:g} s."
        f"{'' if doc['broker_log'] else ' Marker errors need --broker-log.'}"
        f' <a href="?{text(query.parameters(format="json"))}">JSON</a></p>',
        _form(query),
        _transactions(rows, now_ms),
        _hanging(doc),
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
    "Producer id / epoch",
    "Age",
    "Entered state (UTC)",
    "Timeout",
    "Late",
    "__transaction_state partition",
    "Data partitions",
    "Marker errors",
)


def _transactions(rows: list[dict[str, Any]], now_ms: int) -> str:
    if not rows:
        return '<p class="none">No in-flight transaction matches.</p>'
    head = "".join(f"<th>{c}</th>" for c in _COLUMNS)
    body = []
    for r in rows:
        errors = (
            "<br>".join(
                f'<span class="n">{text(e["partition"])}: <span class="error">{text(e["error"])}</span></span>'
                f" x{e['count']}, last {age(max(0, now_ms - e['last_seen_ms']) / 1000)} ago"
                for e in r["marker_errors"]
            )
            or '<span class="none">-</span>'
        )
        partitions = (
            ", ".join(f'<span class="n">{text(p)}</span>' for p in r["partitions"]) or '<span class="none">-</span>'
        )
        cells = (
            (f'<td class="id">{text(r["transactional_id"])}</td>'),
            f"<td>{r['state']}</td>",
            f"<td>{r['producer_id']} / {r['producer_epoch']}</td>",
            f'<td class="n">{age(r["age_seconds"])}</td>',
            f'<td class="n">{utc(r["state_entered_ms"], now_ms)}</td>',
            f'<td class="n">{r["transaction_timeout_ms"] / 1000:g} s</td>',
            '<td class="late">late</td>' if r["late"] else "<td>no</td>",
            f"<td>{r['coordinator_partition']}</td>",
            f"<td>{partitions}</td>",
            f"<td>{errors}</td>",
        )
        body.append("<tr>" + "".join(_labelled(cell, label) for cell, label in zip(cells, _COLUMNS)) + "</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _labelled(cell: str, label: str) -> str:
    # data-label feeds the narrow-screen layout, where each cell says what it is.
    return cell.replace("<td", f'<td data-label="{label}"', 1)


_HANGING_COLUMNS = (
    "Partition",
    "Producer id / epoch",
    "Start offset",
    "Transactional id",
    "Age",
    "Reason",
    "Abort command (after checking it)",
)


def _hanging(doc: dict[str, Any]) -> str:
    title = "<h2>Hanging transactions (data partitions)</h2>"
    if not doc["hanging_scan"]:
        return title + '<p class="none">No hanging-transaction scan has completed yet.</p>'
    rows = doc["hanging"]
    if not rows:
        return title + f'<p class="none">None in the last scan ({doc["hanging_matching"]} match).</p>'
    head = "".join(f"<th>{c}</th>" for c in _HANGING_COLUMNS)
    body = []
    for r in rows:
        cells = (
            f"<td>{text(r['topic'])}-{r['partition']}</td>",
            f"<td>{r['producer_id']} / {r['epoch']}</td>",
            f"<td>{r['start_offset']}</td>",
            f'<td class="id">{text(r["transactional_id"] or "-")}</td>',
            f'<td class="n">{age(r["age_seconds"])}</td>',
            f"<td>{text(r['reason'])}</td>",
            f"<td><code>{text(r['abort_command'])}</code></td>",
        )
        body.append("<tr>" + "".join(_labelled(c, label) for c, label in zip(cells, _HANGING_COLUMNS)) + "</tr>")
    return f"{title}<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"

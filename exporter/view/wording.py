"""What the view says to an operator, in words both renderers show: the page (exporter.view.page,
HTML) and the terminal table (exporter.view.table) take their phrases from here, so they say the
same thing the same way; each only lays them out (and escapes them: the page as HTML).

Ages (`4.2 s`, `3 min 05 s`, `2 h 01 min`), times (UTC), a row's flag and coordinator, a marker
error, a partition's facts, a producer's state, the last hanging scan, and what a merged view says of
its exporters. Plain text, not yet escaped: transactional ids, topics and an exporter's error text
are whatever clients and peers sent (`printable` shows their control characters as escapes).
"""

from __future__ import annotations

import time
from collections.abc import Mapping

from exporter.view.document import (
    CoordinatorPart,
    DiagnosedPartition,
    Document,
    HangingRow,
    KnownBugMatch,
    KnownBugs,
    MarkerError,
    OffsetsGroups,
    Producer,
    SourceEntry,
    TransactionRow,
)

NO_IN_FLIGHT = "No in-flight transaction matches."
SAME_CAUSE = "the same cause as above"  # a cause already shown for another partition of the transaction
NO_SCAN = "No hanging-transaction scan has completed"  # how every line saying so begins
NOT_ANSWERING = "NOT ANSWERING"  # a merged view's exporter that did not answer


def printable(value: object) -> str:
    """`value` with its non-printable characters as Python escapes."""
    s = str(value)
    return (
        s
        if s.isprintable()
        else "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in s)
    )


def age(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, s = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {s:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


def since(ms: int, now_ms: int) -> str:
    """How long ago `ms` was, as an age (never negative)."""
    return age(max(0, now_ms - ms) / 1000)


def utc(ms: int, now_ms: int | None = None) -> str:
    """Date and time (UTC) to the millisecond; the time alone when it is the day of `now_ms`."""
    day = time.gmtime(ms / 1000)[:3]
    layout = "%H:%M:%S" if now_ms is not None and time.gmtime(now_ms / 1000)[:3] == day else "%Y-%m-%d %H:%M:%S"
    return time.strftime(layout, time.gmtime(ms / 1000)) + f".{ms % 1000:03d}"


def flag(row: TransactionRow) -> str:
    """ "late" (ONGOING), "stuck" (PREPARE_*) or "" (neither); the other state's flag never applies."""
    return "late" if row.get("late") else "stuck" if row.get("stuck") else ""


def coordinator(row: TransactionRow) -> str:
    broker = row.get("coordinator_broker")  # (a merged view's row from an older exporter has none)
    return f"broker {'?' if broker is None else broker}, __transaction_state-{row['coordinator_partition']}"


def marker_error(error: MarkerError, now_ms: int) -> str:
    """One marker error as text: `held-0: NOT_ENOUGH_REPLICAS x21234, last 0.1 s ago`."""
    return f"{error['partition']}: {error['error']} x{error['count']}, last {since(error['last_seen_ms'], now_ms)} ago"


def _ids(ids: list[int] | None) -> str:
    return "?" if ids is None else "[" + ", ".join(map(str, ids)) + "]"


def facts(p: DiagnosedPartition | CoordinatorPart) -> str:
    """A partition's leader, replicas, ISR and min.insync.replicas, or why they are unknown."""
    if not p["exists"]:
        return "does not exist"
    if p["replicas"] is None:
        return f"leader, replicas and ISR unknown ({p['unknown']})"
    leader = "none" if p["leader"] is None else p["leader"]
    out = f" (out: {_ids(p['out_of_isr'])})" if p["out_of_isr"] else ""
    down = f", down: {_ids(p['brokers_down'])}" if p["brokers_down"] else ""
    min_isr = (
        f"min.insync.replicas {p['min_insync_replicas']} ({p['min_insync_replicas_source']})"
        if p["min_insync_replicas"] is not None
        else "min.insync.replicas unknown"
    )
    return f"leader {leader}, replicas {_ids(p['replicas'])}, ISR {_ids(p['isr'])}{out}{down}, {min_isr}"


def offsets_groups(entry: OffsetsGroups) -> str:
    """The consumer groups whose transactional offsets are pending on one of a row's
    `__consumer_offsets-N` partitions: `group g (coordinator: broker 1)`, none, or why unknown."""
    pending = entry.get("pending_groups")
    if pending is None:
        return f"consumer groups unknown ({entry.get('unknown')})"
    if pending:
        text = "offsets pending for consumer group" + ("s " if len(pending) > 1 else " ")
        text += ", ".join(
            f"{g['group_id']} (coordinator: {'?' if g.get('coordinator') is None else 'broker ' + str(g['coordinator'])})"
            for g in pending
        )
    else:
        text = f"no consumer group's offsets pending ({entry.get('groups_checked')} groups checked)"
    if entry.get("groups_not_checked"):
        text += f"; {entry['groups_not_checked']} more groups not checked"
    unknown = entry.get("unknown_groups") or {}
    if unknown:
        text += "; unknown: " + ", ".join(f"{g} ({e})" for g, e in unknown.items())
    if entry.get("unknown"):
        text += f" (the last answer; its refresh failed: {entry['unknown']})"
    return text


def producer(p: Producer) -> str:
    """What DescribeProducers says of a late transaction's producer on one partition."""
    if "unknown" in p:
        return f"producer state unknown ({p['unknown']})"
    if not p["found"]:
        return "no state of this producer here (DescribeProducers)"
    open_ = (
        f"open transaction from offset {p['transaction_start_offset']}"
        if p["transaction_start_offset"] >= 0
        else "no open transaction"
    )
    return (
        f"DescribeProducers: last write {age(p['last_write_seconds_ago'])} ago, epoch"
        f" {p['producer_epoch']}, coordinator epoch {p['coordinator_epoch']}, {open_}"
    )


def known_bug(match: KnownBugMatch) -> str:
    """A known bug the row matches, beyond its line (the summary) and its JIRA id and link: how sure,
    on which version, how it was told from the ordinary cause, the workaround."""
    sure = "matches" if match["certain"] else "possibly (the broker's patch is unknown)"
    source = "its log" if match["version_source"] == "log" else "its ApiVersions"
    return (
        f"{sure}, on Kafka {match['version']} (from {source}); told apart by: {match['signal']}."
        f" Workaround: {match['workaround']}"
    )


def bugs_not_checked(bugs: KnownBugs) -> str:
    """The known bugs a row could not be held against, grouped by why: "" when none."""
    by_why: dict[str, list[str]] = {}
    for n in bugs["not_checked"]:
        by_why.setdefault(n["why"], []).append(n["jira"])
    return "; ".join(f"{', '.join(jiras)}: {why}" for why, jiras in by_why.items())


def kafka_versions(doc: Document) -> str:
    """The Kafka versions of the brokers the rows name, as learned: "" when the document has none."""
    versions = doc.get("kafka_versions") or {}
    return ", ".join(
        f"broker {broker}: {v['version']} ({'its log' if v['source'] == 'log' else 'its ApiVersions'})"
        for broker, v in versions.items()
    )


def transaction_version(row: TransactionRow) -> str:
    """`TV2`, `TV1` or `TV0`, as the records say (a coordinator before 4.0 writes none: TV0); "?" for
    an older exporter's row."""
    tv = row.get("transaction_version")
    return "?" if tv is None else f"TV{tv}"


def last_scan(doc: Document) -> str:
    """When the last hanging-transaction scan completed: `at 12:00:01 UTC, 4.2 s ago`; "" when the
    document does not say (a merged view of exporters that do not)."""
    scan_ms = doc.get("hanging_scan_ms")
    if not scan_ms:
        return ""
    now_ms = doc["now_ms"]
    return f"at {utc(scan_ms, now_ms)} UTC, {since(scan_ms, now_ms)} ago"


# -- a merged view (exporter.view.cluster): a row's broker, the exporters asked ------------------------


def broker_of(row: TransactionRow | HangingRow) -> str:
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


def describe_source(source: SourceEntry) -> str:
    """An exporter in one phrase: 'broker 1 (host:port)', or its name alone when its broker is unknown."""
    broker = source.get("broker")
    broker_id = broker.get("id") if isinstance(broker, Mapping) else None
    name = str(source.get("name", "?"))
    return f"broker {broker_id} ({name})" if isinstance(broker_id, int) else name


def source_lines(document: Document) -> list[str]:
    """What a merged document says of its exporters: how many answered, then one line per exporter
    that did not (with why), then those without a hanging scan yet. Plain text, not yet escaped."""
    sources = [s for s in document.get("sources", []) if isinstance(s, Mapping)]
    failed = [s for s in sources if not s.get("ok")]
    lines = [f"{len(sources) - len(failed)} of {len(sources)} exporters answered."]
    for s in failed:
        line = f"{NOT_ANSWERING}: {s.get('name', '?')} ({s.get('url', '?')}): {s.get('error')}"
        target = s.get("prometheus")
        if isinstance(target, Mapping) and target.get("health") not in (None, "up"):
            line += f" (Prometheus: {target.get('health')}, {target.get('last_error') or 'no error given'})"
        lines.append(line)
    answered = [s for s in sources if s.get("ok")]
    no_scan = [describe_source(s) for s in answered if not s.get("hanging_scan")]
    if answered and len(no_scan) == len(answered):
        lines.append(f"{NO_SCAN} on these exporters.")
    elif no_scan:
        lines.append(f"{NO_SCAN} yet on: {', '.join(no_scan)}.")
    return lines

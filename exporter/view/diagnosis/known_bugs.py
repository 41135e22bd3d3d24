"""The known Kafka bugs behind a diagnosed row (exporter.contracts.known_bugs), in its diagnosis.

A stuck or late row's facts (its state, epoch and transaction version, the coordinator's log of its
`__transaction_state` partition, its coordinator's version) and a hanging row's (its partition
leader's version) are held against the table (exporter.contracts.bug_matching.check). The ordinary
cause comes first: what the diagnosis found of the partitions (no leader, a leader down, the ISR
below min.insync.replicas) and of the coordinator's partition explains the row, and no bug is
claimed. A match becomes the diagnosis's summary, with the known-bug alert's runbook section.
"""

from __future__ import annotations

from exporter.contracts.bug_facts import COORDINATOR, HANGING, LATE, PARTITION_LEADER, STUCK, BugContext, BugFacts
from exporter.contracts.bug_matching import BugCheck, check
from exporter.contracts.cluster import ClusterSnapshot
from exporter.contracts.kafka_versions import BrokerVersion
from exporter.contracts.known_bugs import KNOWN_BUGS
from exporter.contracts.runbooks import KNOWN_BUG
from exporter.view.diagnosis.commands import runbook_link
from exporter.view.diagnosis.selection import coordinator_broker, diagnosed_rows
from exporter.view.document import (
    CoordinatorPart,
    DiagnosedPartition,
    Diagnosis,
    Document,
    HangingRow,
    KafkaVersionSeen,
    KnownBugs,
    TransactionRow,
)


def attach_to_diagnosis(diagnosis: Diagnosis, row: TransactionRow, context: BugContext, now_ms: int) -> None:
    """The row's known bugs in its diagnosis; a match is its summary, with the known-bug runbook. A row
    neither stuck nor late (diagnosed for its errors alone) is one no bug of the table explains."""
    if not (row.get("stuck") or row.get("late")):
        return
    partition, coordinator = row["coordinator_partition"], row.get("coordinator_broker")
    log, missing = context.coordinator_log(partition, coordinator)
    errors = [e["last_seen_ms"] for e in row.get("marker_errors") or ()]
    facts = BugFacts(
        kind=STUCK if row.get("stuck") else LATE,
        state=row["state"],
        now_ms=now_ms,
        state_entered_ms=row["state_entered_ms"],
        producer_epoch=row["producer_epoch"],
        transaction_version=row.get("transaction_version"),
        versions=_versions({COORDINATOR: coordinator}, context),
        ordinary_cause=ordinary_cause(diagnosis["partitions"], diagnosis["coordinator"]),
        coordinator_log=log,
        coordinator_log_missing=missing,
        last_marker_error_ms=max(errors, default=None),
        coordinator_partition=partition,
        coordinator_broker=coordinator,
    )
    found = known_bugs(check(facts), facts, (COORDINATOR,))
    diagnosis["known_bugs"] = found
    if found["matches"]:
        diagnosis["summary"] = found["matches"][0]["line"]
        diagnosis["runbook"] = runbook_link(KNOWN_BUG)


def attach_to_hanging(row: HangingRow, leader: int | None, context: BugContext, now_ms: int) -> None:
    """A hanging row's known bugs (its partition's leader: `leader`, None when not known)."""
    facts = BugFacts(
        kind=HANGING,
        state="HANGING",
        now_ms=now_ms,
        producer_epoch=row["epoch"],
        versions=_versions({PARTITION_LEADER: leader}, context),
    )
    row["known_bugs"] = known_bugs(check(facts), facts, (PARTITION_LEADER,))


def brokers_named(doc: Document, snapshot: ClusterSnapshot, own_broker: int | None) -> set[int]:
    """The brokers whose versions the rows' known-bug check needs: the coordinators of the rows that
    get a diagnosis, the leaders of the hanging rows' partitions (where the snapshot says)."""
    named = {
        coordinator_broker(snapshot, row["coordinator_partition"], own_broker)
        for row in diagnosed_rows(doc["transactions"])
    }
    for row in doc["hanging"]:
        fact = snapshot.partition(row["topic"], row["partition"])
        named.add(None if fact.value is None else fact.value.leader)
    return {broker for broker in named if broker is not None}


def ordinary_cause(partitions: list[DiagnosedPartition], coordinator: CoordinatorPart) -> str | None:
    """What the diagnosis found that explains a row without a bug: its coordinator's partition short
    of ISR or leaderless, or unable to append; a data partition without a reachable leader or short of
    ISR (its cause, or its ISR below min.insync.replicas where its errors say it)."""
    if coordinator["cause"]:
        return f"{coordinator['partition']}: {coordinator['cause']}"
    if coordinator["append_errors"]:
        return f"{coordinator['partition']}: {coordinator['append_errors'][0]['error']} on its appends"
    for p in partitions:
        isr, min_isr = p["isr"], p["min_insync_replicas"]
        if p["cause"]:
            return f"{p['partition']}: {p['cause']}"
        if isr is not None and min_isr is not None and len(isr) < min_isr:
            return f"{p['partition']}: its ISR {sorted(isr)} is below min.insync.replicas={min_isr}"
    return None


def known_bugs(result: BugCheck, facts: BugFacts, roles: tuple[str, ...]) -> KnownBugs:
    """The check's result as the view's JSON, with the versions of the brokers of `roles`."""
    versions = {role: facts.versions.get(role) for role in roles}
    return {
        "matches": [
            {
                "jira": m.bug.jira,
                "title": m.bug.title,
                "certain": m.certain,
                "line": m.line,
                "version": m.version.text,
                "version_source": m.version.source,
                "fixed_in": list(m.fixed_in),
                "signal": m.signal,
                "workaround": m.workaround,
                "link": m.bug.link,
            }
            for m in result.matches
        ],
        "not_checked": [{"jira": n.jira, "why": n.why} for n in result.not_checked],
        "ordinary_cause": result.ordinary_cause,
        "versions": {role: None if v is None else v.text for role, v in versions.items()},
    }


def counts(doc: Document) -> dict[str, int]:
    """The document's rows (diagnosed and hanging) naming each known bug of the table, by JIRA id
    (kafka_transactions_matching_known_bug); every bug of the table counted, 0 where none."""
    found = dict.fromkeys((bug.jira for bug in KNOWN_BUGS), 0)
    lists = [d.get("known_bugs") for row in doc["transactions"] if (d := row.get("diagnosis"))]
    lists += [row.get("known_bugs") for row in doc["hanging"]]
    for bugs in lists:
        for jira in {m["jira"] for m in bugs["matches"]} if bugs else ():
            found[jira] = found.get(jira, 0) + 1
    return found


def version_seen(version: BrokerVersion) -> KafkaVersionSeen:
    return {"version": version.text, "source": version.source, "known": version.known}


def _versions(brokers: dict[str, int | None], context: BugContext) -> dict[str, BrokerVersion]:
    """The version of each role's broker, where the broker and its version are known."""
    return {
        role: context.versions[broker]
        for role, broker in brokers.items()
        if broker is not None and broker in context.versions
    }

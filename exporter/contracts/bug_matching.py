"""Which known Kafka bugs a stuck, late or hanging transaction's facts match; pure, no I/O.

    check(facts) -> BugCheck(matches, not_checked, ordinary_cause)
    match(facts) -> list[KnownBugMatch]          # check(facts).matches

`facts` (exporter.contracts.bug_facts.BugFacts) is what the exporter knows of one row of the view;
each row of the table (exporter.contracts.known_bugs.KNOWN_BUGS) is tried in turn:
- The ordinary cause first: when the diagnosis found one (the ISR below min.insync.replicas, a broker
  down, no leader), it explains the row and no bug is claimed (`ordinary_cause` says which).
- Rows of the table for other kinds of row (a hanging-transaction bug on a stuck PREPARE_*) are skipped.
- The version of the broker the bug lives on: unknown (not learned, or not a release: `7.7.1-ccs`) ->
  the bug is not checked, and `not_checked` says why; a version with the fix -> skipped, never
  claimed; a version whose patch is unknown (`3.9.x`, from ApiVersions) and only some of whose patches
  have the fix -> matched as possible, naming the fixed-in patch.
- A bug whose facts come from the coordinator's log, when the exporter does not read that log ->
  not checked, with why (without `--broker-log` only the rows whose facts come from the records and
  the Admin API can match).
- Then its symptom predicate.

Each KnownBugMatch carries its line as the view shows it:
    Matches KAFKA-16352 (Kafka 3.7.1; fixed in 3.8.0): held in PREPARE_COMMIT since ...
    Possibly KAFKA-17941 (Kafka 3.9.x, patch unknown; fixed in 3.9.2): its coordinator's load ...
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from exporter.contracts.bug_facts import BugFacts
from exporter.contracts.kafka_versions import NOT, WHOLLY, BrokerVersion, coverage, parse_release
from exporter.contracts.known_bugs import KNOWN_BUGS, KnownBug


@dataclass(frozen=True, slots=True)
class KnownBugMatch:
    bug: KnownBug
    certain: bool  # False: the broker's patch is unknown and some of the patches it may be have the fix
    version: BrokerVersion  # the version it was matched on
    fixed_in: tuple[str, ...]  # the fixed-in releases named (for a possible match, those in its range)
    line: str  # "Matches KAFKA-16352 (Kafka 3.7.1; fixed in 3.8.0): ..."
    signal: str
    workaround: str


@dataclass(frozen=True, slots=True)
class NotChecked:
    """A bug of the table the row's facts could not be held against, and why."""

    jira: str
    why: str


@dataclass(frozen=True, slots=True)
class BugCheck:
    matches: tuple[KnownBugMatch, ...] = ()
    not_checked: tuple[NotChecked, ...] = ()
    ordinary_cause: str | None = None  # set: it explains the row, and no bug was tried


def match(facts: BugFacts, table: Iterable[KnownBug] = KNOWN_BUGS) -> list[KnownBugMatch]:
    """The known bugs `facts` match, certain ones first."""
    return list(check(facts, table).matches)


def check(facts: BugFacts, table: Iterable[KnownBug] = KNOWN_BUGS) -> BugCheck:
    """The known bugs `facts` match (certain ones first) and those it could not be held against."""
    if facts.ordinary_cause is not None:
        return BugCheck(ordinary_cause=facts.ordinary_cause)
    matches: list[KnownBugMatch] = []
    not_checked: list[NotChecked] = []
    for bug in table:
        if facts.kind not in bug.rows:
            continue
        version = facts.versions.get(bug.broker)
        if version is None or not version.known:
            not_checked.append(NotChecked(bug.jira, _version_unknown(bug.broker, version)))
            continue
        covered = coverage(version, bug.intervals)
        if covered == NOT:  # a version with the fix, or one the bug never affected
            continue
        if bug.needs_coordinator_log and facts.coordinator_log is None:
            not_checked.append(NotChecked(bug.jira, f"needs the coordinator's log: {facts.coordinator_log_missing}"))
            continue
        if bug.symptom(facts):
            matches.append(_matched(bug, facts, version, covered == WHOLLY))
    matches.sort(key=lambda m: not m.certain)
    return BugCheck(tuple(matches), tuple(not_checked))


def _version_unknown(role: str, version: BrokerVersion | None) -> str:
    if version is None:
        return f"the {role}'s Kafka version is not known"
    return f"the {role}'s Kafka version is unknown ({version.text}, from its {version.source.replace('_', ' ')})"


def _matched(bug: KnownBug, facts: BugFacts, version: BrokerVersion, certain: bool) -> KnownBugMatch:
    fields = _fields(facts)
    fixed = bug.fixed_in
    if certain:
        head = f"Matches {bug.jira} (Kafka {version.text}; fixed in {', '.join(fixed)})"
    else:
        # The fixed-in releases within the range the version may be (3.9.2 for 3.9.x), else all.
        assert version.low is not None and version.high is not None  # a known version
        low, high = version.low, version.high
        fixed = tuple(f for f in fixed if low <= (parse_release(f) or low) <= high) or fixed
        head = f"Possibly {bug.jira} (Kafka {version.text}, patch unknown; fixed in {', '.join(fixed)})"
    return KnownBugMatch(
        bug=bug,
        certain=certain,
        version=version,
        fixed_in=fixed,
        line=f"{head}: {bug.shows.format(**fields)}",
        signal=bug.signal.format(**fields),
        workaround=bug.workaround.format(**fields),
    )


def _fields(facts: BugFacts) -> dict[str, object]:
    """The table's placeholders, from the facts ("?" where unknown)."""
    log = facts.coordinator_log
    loading = None if log is None else log.loading_since_ms
    return {
        "state": facts.state,
        "partition": "?" if facts.coordinator_partition is None else facts.coordinator_partition,
        "coordinator": "?" if facts.coordinator_broker is None else facts.coordinator_broker,
        "epoch": "?" if facts.producer_epoch is None else facts.producer_epoch,
        "load_minutes": "?" if loading is None else max(0, facts.now_ms - loading) // 60_000,
    }

"""The known Kafka bugs behind stuck, late and hanging transactions: one table, as data; pure.

A row per bug (KnownBug): its JIRA id and title, the Kafka versions it affects and the releases that
fix it, the broker whose version counts (the coordinator for a coordinator bug, the data partition's
leader for a produce-path bug), the view's rows it can explain, the symptom as a predicate over the
facts the exporter has (exporter.contracts.bug_facts), the signal that tells it from the ordinary
cause, and the workaround. exporter.contracts.bug_matching matches a row's facts against the table.

Each row was checked against the fix's code in each release line (the apache/kafka and
confluentinc/kafka repositories: the fix commit and the release commits that contain it; the pinned
jars for 3.6.2 to 4.4.0). Bugs considered and left out, and why, are in docs/known-bugs.md. A
predicate never fires on what the fixed code does normally: it reads only facts the bug leaves
(e.g. a reload at an epoch already loaded, which a fixed broker no longer does; a new epoch with the
same leader still reloads after KAFKA-15468's fix, so that is not counted).

The texts are format strings over the facts: {state}, {partition} (the row's `__transaction_state`
partition), {coordinator} (its broker), {epoch} (the producer epoch), {load_minutes} (how long the
coordinator's load of the partition has run).

A malformed row (a version range that does not parse, ranges that overlap, a fixed-in release inside
an affected range, an upper bound not among the fixed-in releases, an unknown placeholder) raises a
ValueError naming it when the table is built, at import.
"""

from __future__ import annotations

import string
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from exporter.contracts.bug_facts import (
    COORDINATOR,
    HANGING,
    LATE,
    MAX_PRODUCER_EPOCH,
    PARTITION_LEADER,
    STUCK,
    BugFacts,
)
from exporter.contracts.kafka_versions import Interval, parse_range, parse_release, release_text

JIRA_URL = "https://issues.apache.org/jira/browse/"
# A load that has run this long has not merely been slow: a partition loads in seconds.
LOAD_STUCK_MS = 5 * 60_000
PLACEHOLDERS = frozenset({"state", "partition", "coordinator", "epoch", "load_minutes"})
ROLES = (COORDINATOR, PARTITION_LEADER)
ROWS = frozenset({STUCK, LATE, HANGING})
PREPARES = ("PREPARE_COMMIT", "PREPARE_ABORT")


@dataclass(frozen=True)
class KnownBug:
    jira: str  # KAFKA-NNNNN
    title: str
    affected: tuple[str, ...]  # version ranges (exporter.contracts.kafka_versions.parse_range)
    fixed_in: tuple[str, ...]  # the first release of each line with the fix
    broker: str  # whose version counts: COORDINATOR or PARTITION_LEADER
    rows: frozenset[str]  # the view's rows it can explain: STUCK, LATE, HANGING
    symptom: Callable[[BugFacts], bool]
    shows: str  # what the facts show, after "Matches KAFKA-N (...): "
    signal: str  # what tells it from the ordinary cause
    workaround: str
    # Facts beyond the records and the Admin API: the coordinator's own log (its loads and elections).
    needs_coordinator_log: bool = False
    intervals: tuple[Interval, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # Parsed once; sorted by their lower bound (None first), as the checks below expect.
        intervals = sorted(map(parse_range, self.affected), key=lambda i: i.low or (-1, -1, -1))
        object.__setattr__(self, "intervals", tuple(intervals))

    @property
    def link(self) -> str:
        return JIRA_URL + self.jira


def _prepare_reloaded(facts: BugFacts) -> bool:
    """KAFKA-16352: held in PREPARE_* since its partition was loaded again (the load began after it
    entered the state), and no marker error read since that load: the coordinator is not retrying."""
    log = facts.coordinator_log
    if facts.state not in PREPARES or log is None or log.last_load_ms is None or facts.state_entered_ms is None:
        return False
    retrying = facts.last_marker_error_ms is not None and facts.last_marker_error_ms >= log.last_load_ms
    return log.last_load_ms >= facts.state_entered_ms and not retrying


def _load_never_finishes(facts: BugFacts) -> bool:
    """KAFKA-17941: its partition's load has run LOAD_STUCK_MS without its `Finished loading` line."""
    log = facts.coordinator_log
    return log is not None and log.loading_since_ms is not None and facts.now_ms - log.loading_since_ms >= LOAD_STUCK_MS


def _reloaded_at_same_epoch(facts: BugFacts) -> bool:
    """KAFKA-15468: its partition was reloaded at the epoch of its previous load, no resignation
    between, while the transaction was in its state."""
    log = facts.coordinator_log
    if log is None or log.last_same_epoch_reload_ms is None:
        return False
    return facts.state_entered_ms is None or log.last_same_epoch_reload_ms >= facts.state_entered_ms


def _tv2_ongoing_at_epoch(lowest: int, highest: int) -> Callable[[BugFacts], bool]:
    def symptom(facts: BugFacts) -> bool:
        epoch, tv = facts.producer_epoch, facts.transaction_version
        return (
            facts.state == "ONGOING" and tv is not None and tv >= 2 and epoch is not None and lowest <= epoch <= highest
        )

    return symptom


def _hanging(facts: BugFacts) -> bool:
    return facts.kind == HANGING


KNOWN_BUGS_ROWS: tuple[KnownBug, ...] = (
    KnownBug(
        jira="KAFKA-16352",
        title="a transaction stays in PREPARE_COMMIT or PREPARE_ABORT after its coordinator reloads its partition",
        affected=("<3.8.0",),
        fixed_in=("3.8.0",),
        broker=COORDINATOR,
        rows=frozenset({STUCK}),
        symptom=_prepare_reloaded,
        needs_coordinator_log=True,
        shows="held in {state} since its coordinator loaded __transaction_state-{partition} again while its "
        "markers were pending, and no marker error read since: the earlier markers' completion removed the new "
        "load's pending entry, so the coordinator never appends its COMPLETE_* record",
        signal="a load of its __transaction_state partition after it entered {state}, its data partitions healthy "
        "and no marker error read since the load (the ordinary cause retries and logs each failure)",
        workaround="make __transaction_state-{partition} load once more: move its leadership off broker "
        "{coordinator} (or restart that broker); the new load sends the markers again and completes the "
        "transaction. Upgrade to 3.8.0.",
    ),
    KnownBug(
        jira="KAFKA-17941",
        title="the coordinator's load of a __transaction_state partition loops forever on a segment ending "
        "with an empty batch",
        affected=("<3.9.2",),
        fixed_in=("3.9.2", "4.0.0"),
        broker=COORDINATOR,
        rows=frozenset({STUCK, LATE}),
        symptom=_load_never_finishes,
        needs_coordinator_log=True,
        shows="its coordinator's load of __transaction_state-{partition} has run {load_minutes} min without "
        "finishing: the load's read never passes a segment that ends with an empty batch, and until it "
        "finishes the partition's transactional ids get COORDINATOR_LOAD_IN_PROGRESS and none of its "
        "transactions completes or times out",
        signal="a `Loading transaction metadata from __transaction_state-{partition}` line and no `Finished "
        "loading` line after 5 minutes (a partition loads in seconds)",
        workaround="upgrade the coordinators to 3.9.2 or 4.0.0 (no other workaround is known).",
    ),
    KnownBug(
        jira="KAFKA-15468",
        title="KRaft brokers reload their __transaction_state partitions on every ISR change, with no "
        "leadership change",
        affected=("<3.8.0",),
        fixed_in=("3.8.0",),
        broker=COORDINATOR,
        rows=frozenset({STUCK, LATE}),
        symptom=_reloaded_at_same_epoch,
        needs_coordinator_log=True,
        shows="its coordinator loaded __transaction_state-{partition} again at the epoch it had already loaded "
        "(an ISR change, not a new leader): each such load drops the partition's queued markers and answers "
        "COORDINATOR_LOAD_IN_PROGRESS until it finishes",
        signal="a load at the coordinator epoch of the partition's previous load, with no resignation between "
        "(a load at a new epoch is a leadership change, reloaded on every version)",
        workaround="keep the __transaction_state partitions' ISRs steady (each ISR change reloads them); upgrade "
        "to 3.8.0.",
    ),
    KnownBug(
        jira="KAFKA-20090",
        title="TV2: a transaction at the exhausted producer epoch stays ONGOING",
        affected=(">=4.0.0,<4.3.0",),
        fixed_in=("4.3.0",),
        broker=COORDINATOR,
        rows=frozenset({LATE}),
        symptom=_tv2_ongoing_at_epoch(MAX_PRODUCER_EPOCH - 1, MAX_PRODUCER_EPOCH),
        shows="ONGOING past its timeout at producer epoch {epoch} under transaction version 2: at the top of the "
        "epoch the coordinator's timeout abort does not rotate the producer id, and the transaction is "
        "never aborted (the coordinator's scheduler logs `Cannot fence producer with epoch equal to "
        "Short.MaxValue` for its task 'transaction-abort')",
        signal="producer epoch {epoch} of 32767 under transaction version 2; its coordinator's partition "
        "healthy (the ordinary cause of a late transaction is a coordinator that cannot append its abort)",
        workaround="upgrade the coordinators to 4.3.0; until then give the producer a new transactional.id.",
    ),
    KnownBug(
        jira="KAFKA-19367",
        title="TV2: fencing an ongoing transaction at producer epoch 32766 bumps the epoch twice, past the top",
        affected=(">=4.0.0,<4.0.1",),
        fixed_in=("4.0.1", "4.1.0"),
        broker=COORDINATOR,
        rows=frozenset({LATE}),
        symptom=_tv2_ongoing_at_epoch(MAX_PRODUCER_EPOCH - 1, MAX_PRODUCER_EPOCH - 1),
        shows="ONGOING past its timeout at producer epoch 32766 under transaction version 2: fencing it (its "
        "timeout abort, or a new producer's InitProducerId) bumps the epoch to 32767 and the abort bumps it "
        "again, past the top, which fails, so the transaction stays ONGOING",
        signal="producer epoch 32766 under transaction version 2 on 4.0.0",
        workaround="upgrade the coordinators to 4.0.1 or 4.1.0; until then give the producer a new transactional.id.",
    ),
    KnownBug(
        jira="KAFKA-12671",
        title="a produce that reaches a partition after its transaction ended leaves a hanging transaction",
        affected=("<3.6.0",),
        fixed_in=("3.6.0",),
        broker=PARTITION_LEADER,
        rows=frozenset({HANGING}),
        symptom=_hanging,
        shows="a transaction open on the data partition that no coordinator will complete: a late produce of a "
        "transaction that had already ended started a new one there, which partition leaders before 3.6.0 "
        "accept without asking the coordinator",
        signal="the partition's leader predates 3.6.0's verification of transactional produce (KIP-890 part 1)",
        workaround="abort it with the row's kafka-transactions.sh abort command; upgrade the brokers to 3.6.0 or "
        "later, whose leaders verify each transactional produce with the coordinator "
        "(transaction.partition.verification.enable, on by default).",
    ),
)


def check_table(rows: Iterable[KnownBug]) -> tuple[KnownBug, ...]:
    """The rows, each checked (see the module docstring); ValueError naming the first bad one."""
    checked: list[KnownBug] = []
    for bug in rows:
        where = f"known bug {bug.jira!r}"
        if not bug.jira.startswith("KAFKA-") or not bug.jira[6:].isdigit():
            raise ValueError(f"{where}: not a KAFKA-N id")
        if any(bug.jira == other.jira for other in checked):
            raise ValueError(f"{where}: listed twice")
        if bug.broker not in ROLES or not bug.rows or not bug.rows <= ROWS:
            raise ValueError(f"{where}: broker {bug.broker!r} or rows {sorted(bug.rows)} unknown")
        fixed = []
        for text in bug.fixed_in:
            release = parse_release(text)
            if release is None:
                raise ValueError(f"{where}: fixed-in {text!r} is not a release X.Y.Z")
            if any(i.holds(release) for i in bug.intervals):
                raise ValueError(f"{where}: fixed-in {text} lies in an affected range")
            fixed.append(release)
        for before, after in zip(bug.intervals, bug.intervals[1:]):
            if before.high is None or after.low is None or not before.high < after.low:
                raise ValueError(f"{where}: ranges {before} and {after} overlap or touch (write them as one)")
        for interval in bug.intervals:
            if interval.high is not None and interval.high not in fixed:
                raise ValueError(
                    f"{where}: range {interval} ends at {release_text(interval.high)}, not a fixed-in release"
                )
        for text in (bug.shows, bug.signal, bug.workaround):
            names = {name for _, name, _, _ in string.Formatter().parse(text) if name is not None}
            if not names <= PLACEHOLDERS:
                raise ValueError(f"{where}: unknown placeholder(s) {sorted(names - PLACEHOLDERS)}")
        checked.append(bug)
    return tuple(checked)


KNOWN_BUGS: tuple[KnownBug, ...] = check_table(KNOWN_BUGS_ROWS)

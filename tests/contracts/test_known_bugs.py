"""Every row of the known-bug table: facts that match it, and the nearest facts that must not (the
fixed version, the ordinary cause, and the row's own near misses)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import pytest

from exporter.contracts.bug_facts import (
    COORDINATOR,
    HANGING,
    LATE,
    PARTITION_LEADER,
    STUCK,
    BugFacts,
    CoordinatorLog,
)
from exporter.contracts.bug_matching import check, match
from exporter.contracts.kafka_versions import from_log
from exporter.contracts.known_bugs import KNOWN_BUGS, KNOWN_BUGS_ROWS, KnownBug, check_table

NOW = 10_000_000
MINUTE = 60_000


def facts(kind: str, version: str, role: str = COORDINATOR, **fields: Any) -> BugFacts:
    return BugFacts(
        kind=kind,
        now_ms=NOW,
        versions={role: from_log(version)},
        coordinator_partition=7,
        coordinator_broker=2,
        **fields,
    )


def stuck_after_reload(version: str = "3.7.1", **changes: Any) -> BugFacts:
    fields: dict[str, Any] = {
        "state": "PREPARE_COMMIT",
        "state_entered_ms": NOW - 10 * MINUTE,
        "coordinator_log": CoordinatorLog(last_load_ms=NOW - 9 * MINUTE),
    }
    return facts(STUCK, version, **{**fields, **changes})


def load_running(version: str = "3.9.1", minutes: int = 6, kind: str = LATE) -> BugFacts:
    return facts(
        kind,
        version,
        state="ONGOING" if kind == LATE else "PREPARE_ABORT",
        state_entered_ms=NOW - 20 * MINUTE,
        coordinator_log=CoordinatorLog(loading_since_ms=NOW - minutes * MINUTE, last_load_ms=NOW - minutes * MINUTE),
    )


def reloaded_same_epoch(version: str = "3.7.2", reload_ago: int = 2) -> BugFacts:
    return facts(
        LATE,
        version,
        state="ONGOING",
        state_entered_ms=NOW - 5 * MINUTE,
        coordinator_log=CoordinatorLog(last_same_epoch_reload_ms=NOW - reload_ago * MINUTE),
    )


def tv2_late(version: str, epoch: int, tv: int = 2) -> BugFacts:
    return facts(
        LATE, version, state="ONGOING", state_entered_ms=NOW - 5 * MINUTE, producer_epoch=epoch, transaction_version=tv
    )


def hanging(version: str) -> BugFacts:
    return facts(HANGING, version, role=PARTITION_LEADER, state="HANGING")


# jira -> (facts that match it, the nearest facts that must not, each with why).
CASES: dict[str, tuple[BugFacts, list[tuple[str, BugFacts]]]] = {
    "KAFKA-16352": (
        stuck_after_reload(),
        [
            ("the fixed version", stuck_after_reload("3.8.0")),
            ("the load before it entered PREPARE", stuck_after_reload(state_entered_ms=NOW - 8 * MINUTE)),
            (
                "a marker error since the load: the coordinator retries",
                stuck_after_reload(last_marker_error_ms=NOW - MINUTE),
            ),
            ("no load seen", stuck_after_reload(coordinator_log=CoordinatorLog())),
            ("an ONGOING row", stuck_after_reload(state="ONGOING")),
        ],
    ),
    "KAFKA-17941": (
        load_running(),
        [
            ("the fixed 3.9 patch", load_running("3.9.2")),
            ("the fixed 4.0", load_running("4.0.0")),
            ("a load of 4 minutes: slow, not looping", load_running(minutes=4)),
        ],
    ),
    "KAFKA-15468": (
        reloaded_same_epoch(),
        [
            ("the fixed version", reloaded_same_epoch("3.8.0")),
            ("the reload before the transaction entered its state", reloaded_same_epoch(reload_ago=6)),
        ],
    ),
    "KAFKA-20090": (
        tv2_late("4.2.2", 32767),
        [
            ("the fixed version", tv2_late("4.3.0", 32767)),
            ("a version before TV2", tv2_late("3.9.2", 32767)),
            ("an epoch below the top", tv2_late("4.2.2", 32765)),
            ("a TV1 client", tv2_late("4.2.2", 32767, tv=1)),
        ],
    ),
    "KAFKA-19367": (
        tv2_late("4.0.0", 32766),
        [
            ("the fixed 4.0 patch", tv2_late("4.0.1", 32766)),
            ("the fixed 4.1", tv2_late("4.1.0", 32766)),
            ("epoch 32767: no second bump past the top from there", tv2_late("4.0.0", 32767)),
        ],
    ),
    "KAFKA-12671": (hanging("3.5.2"), [("the fixed version", hanging("3.6.0"))]),
}


def jiras(found: list[Any]) -> list[str]:
    return [m.bug.jira for m in found]


def test_every_row_has_its_case() -> None:
    assert sorted(CASES) == sorted(bug.jira for bug in KNOWN_BUGS)


@pytest.mark.parametrize("jira", sorted(CASES))
def test_a_row_matches_its_facts_on_an_affected_version(jira: str) -> None:
    matching, _ = CASES[jira]
    found = [m for m in match(matching) if m.bug.jira == jira]
    assert found, f"{jira} not matched"
    line = found[0].line
    assert line.startswith(f"Matches {jira} (Kafka {matching.versions[found[0].bug.broker].text}; fixed in ")
    assert "{" not in line and "{" not in found[0].workaround and "{" not in found[0].signal


@pytest.mark.parametrize(
    ("jira", "why", "near"), [(j, why, near) for j, (_, misses) in CASES.items() for why, near in misses]
)
def test_a_row_does_not_match_the_nearest_facts(jira: str, why: str, near: BugFacts) -> None:
    assert jira not in jiras(match(near)), why


@pytest.mark.parametrize("jira", sorted(CASES))
def test_the_ordinary_cause_comes_first_and_no_bug_is_claimed(jira: str) -> None:
    matching, _ = CASES[jira]
    cause = "ISR [1] of replicas [1, 2, 3] is below min.insync.replicas=2"
    result = check(dataclasses.replace(matching, ordinary_cause=cause))
    assert result.matches == () and result.ordinary_cause == cause


def test_the_rows_name_the_coordinator_in_their_workaround() -> None:
    (found,) = [m for m in match(stuck_after_reload()) if m.bug.jira == "KAFKA-16352"]
    assert "__transaction_state-7" in found.workaround and "broker 2" in found.workaround
    assert found.line.startswith("Matches KAFKA-16352 (Kafka 3.7.1; fixed in 3.8.0): held in PREPARE_COMMIT since")
    assert found.bug.link == "https://issues.apache.org/jira/browse/KAFKA-16352"


def bad_row(**changes: Any) -> Callable[[], tuple[KnownBug, ...]]:
    return lambda: check_table([dataclasses.replace(KNOWN_BUGS_ROWS[0], **changes)])


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"affected": ("<3.8",)}, "version range '<3.8'"),
        ({"affected": ("3.7.x",)}, "version range '3.7.x'"),
        ({"affected": (">=3.8.0,<3.7.0",)}, "empty"),
        ({"affected": ("<3.8.0", ">=3.7.0,<3.8.0")}, "overlap"),
        ({"fixed_in": ("3.7.1",)}, "lies in an affected range"),
        ({"fixed_in": ("3.8",)}, "not a release"),
        ({"affected": ("<3.7.9",)}, "not a fixed-in release"),
        ({"jira": "16352"}, "not a KAFKA-N id"),
        ({"rows": frozenset({"slow"})}, "unknown"),
        ({"shows": "held in {status}"}, "unknown placeholder"),
    ],
)
def test_a_malformed_row_fails_by_name(changes: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        bad_row(**changes)()


def test_a_row_listed_twice_fails() -> None:
    with pytest.raises(ValueError, match="listed twice"):
        check_table([KNOWN_BUGS_ROWS[0], KNOWN_BUGS_ROWS[0]])

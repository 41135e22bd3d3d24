"""The matcher's rules beyond each row: unknown and vendor versions, a patch unknown, no broker log."""

from __future__ import annotations

from exporter.contracts.bug_facts import COORDINATOR, LATE, STUCK, BugFacts, CoordinatorLog
from exporter.contracts.bug_matching import NotChecked, check, match
from exporter.contracts.kafka_versions import ANY_PATCH, API_VERSIONS, between, from_log, unknown

NOW = 10_000_000
MINUTE = 60_000


def late_ongoing(version: object, **fields: object) -> BugFacts:
    """A late ONGOING transaction now, its coordinator at `version` (None: unknown)."""
    return BugFacts(
        kind=LATE,
        state="ONGOING",
        now_ms=NOW,
        versions={} if version is None else {COORDINATOR: version},  # type: ignore[dict-item]
        **fields,  # type: ignore[arg-type]
    )


def load_stuck(version: object, log: CoordinatorLog | None = None, **fields: object) -> BugFacts:
    return late_ongoing(
        version,
        state_entered_ms=NOW - 20 * MINUTE,
        coordinator_log=CoordinatorLog(loading_since_ms=NOW - 6 * MINUTE) if log is None else log,
        coordinator_partition=3,
        **fields,
    )


def test_an_unknown_version_claims_nothing_and_says_the_version_is_unknown() -> None:
    for version in (from_log("7.7.1-ccs"), unknown("unknown (matches no pinned Kafka version)", API_VERSIONS)):
        result = check(load_stuck(version))
        assert result.matches == ()
        assert (
            NotChecked(
                "KAFKA-17941",
                f"the coordinator's Kafka version is unknown ({version.text}, from its "
                f"{version.source.replace('_', ' ')})",
            )
            in result.not_checked
        )


def test_a_version_not_learned_claims_nothing() -> None:
    result = check(load_stuck(None))
    assert result.matches == ()
    assert NotChecked("KAFKA-17941", "the coordinator's Kafka version is not known") in result.not_checked


def test_a_patch_unknown_is_a_possible_match_naming_the_fixed_patch() -> None:
    (found,) = match(load_stuck(between((3, 9, 0), (3, 9, ANY_PATCH), API_VERSIONS)))
    assert not found.certain
    assert found.fixed_in == ("3.9.2",)
    assert found.line.startswith("Possibly KAFKA-17941 (Kafka 3.9.x, patch unknown; fixed in 3.9.2): its coordinator's")
    assert "has run 6 min" in found.line


def test_a_minor_wholly_affected_matches_with_its_patch_unknown() -> None:
    (found,) = match(load_stuck(between((3, 8, 0), (3, 8, ANY_PATCH), API_VERSIONS)))
    assert found.certain and found.line.startswith("Matches KAFKA-17941 (Kafka 3.8.x; fixed in 3.9.2, 4.0.0)")


def test_a_minor_wholly_fixed_is_never_claimed() -> None:
    assert match(load_stuck(between((4, 0, 0), (4, 4, ANY_PATCH), API_VERSIONS))) == []


def test_without_the_coordinator_log_its_rows_are_not_checked_and_say_why() -> None:
    facts = BugFacts(
        kind=STUCK,
        state="PREPARE_COMMIT",
        now_ms=NOW,
        state_entered_ms=NOW - 20 * MINUTE,
        versions={COORDINATOR: from_log("3.7.1")},
    )
    result = check(facts)
    assert result.matches == ()
    assert {n.jira for n in result.not_checked} == {"KAFKA-16352", "KAFKA-17941", "KAFKA-15468"}
    assert all(
        n.why.endswith("the exporter does not read the coordinator's log (--broker-log)") for n in result.not_checked
    )


def test_without_the_coordinator_log_the_record_rows_still_match() -> None:
    facts = late_ongoing(from_log("4.1.2"), producer_epoch=32767, transaction_version=2)
    result = check(facts)
    assert [m.bug.jira for m in result.matches] == ["KAFKA-20090"]
    assert result.not_checked == ()  # the log's rows are fixed on 4.1.2: nothing left unchecked


def test_a_fixed_version_needs_no_log_to_be_ruled_out() -> None:
    facts = late_ongoing(from_log("4.4.0"))
    assert check(facts).not_checked == ()


def test_certain_matches_come_first() -> None:
    facts = late_ongoing(
        between((4, 0, 0), (4, 0, ANY_PATCH), API_VERSIONS), producer_epoch=32766, transaction_version=2
    )
    found = match(facts)
    assert [(m.bug.jira, m.certain) for m in found] == [("KAFKA-20090", True), ("KAFKA-19367", False)]

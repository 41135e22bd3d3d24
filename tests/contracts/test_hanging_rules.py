"""KIP-664's late/hanging rules (exporter.contracts.hanging_rules), as kafka-transactions.sh find-hanging applies them."""

from __future__ import annotations

from exporter.contracts.hanging_rules import (
    HANGING,
    LATE,
    CoordinatorTransaction,
    OpenTransaction,
    abort_command,
    is_late,
    judge,
    late_transactions,
    partitions_with_late_transactions,
)

NOW = 10_000_000


def txn(topic="orders", partition=0, pid=7, last=NOW - 1000) -> OpenTransaction:
    return OpenTransaction(topic, partition, pid, 3, 5, 42, last)


def described(partitions, state="Ongoing", pid=7) -> CoordinatorTransaction:
    return CoordinatorTransaction("tid-7", 1, state, pid, 3, 60_000, NOW - 2000, frozenset(partitions))


def test_late_is_strictly_past_max_timeout_plus_padding_since_the_last_write():
    assert not is_late(txn(last=NOW - 1500), NOW, 1000, 500)
    assert is_late(txn(last=NOW - 1501), NOW, 1000, 500)


def test_a_partition_counts_once_however_many_late_transactions():
    late = late_transactions(
        [txn(pid=1, last=0), txn(pid=2, last=0), txn(partition=1, last=0), txn(last=NOW)], NOW, 10, 0
    )
    assert len(late) == 3
    assert partitions_with_late_transactions(late) == 2


def test_verdicts_follow_find_hanging():
    unknown_pid = txn(pid=99)
    not_found = txn(pid=8)
    partition_missing = txn(partition=3)
    still_expected = txn(partition=0)
    findings = judge(
        [unknown_pid, not_found, partition_missing, still_expected],
        {7: "tid-7", 8: "tid-8"},
        {"tid-7": described({("orders", 0)}, state="PrepareCommit"), "tid-8": None},
        NOW,
    )
    assert [f.verdict for f in findings] == [HANGING, HANGING, HANGING, LATE]
    assert [f.transactional_id for f in findings] == [None, "tid-8", "tid-7", "tid-7"]
    assert findings[3].coordinator_id == 1 and findings[3].age_ms == 1000


def test_abort_command_is_kafkas_own_by_start_offset():
    assert abort_command("b:9092", txn(partition=2)) == (
        "kafka-transactions.sh --bootstrap-server b:9092 abort --topic orders --partition 2 --start-offset 42"
    )

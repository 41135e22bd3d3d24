"""The Kafka commands an operator may run to confirm or fix what a diagnosis found (a row's, its
consumer groups', a hanging transaction's), and the runbook links."""

from __future__ import annotations

import shlex
from collections.abc import Sequence

from exporter.contracts.cluster import TOPIC, TRANSACTION_STATE_TOPIC
from exporter.contracts.runbooks import HANGING, RUNBOOK_URL
from exporter.view.diagnosis.selection import split_partition
from exporter.view.document import (
    Command,
    CoordinatorPart,
    DiagnosedPartition,
    GroupWait,
    HangingAdvice,
    HangingRow,
    Runbook,
    TransactionRow,
)

# Topics whose commands a row shows, at most (a transaction over many troubled topics: the first ones).
MAX_COMMAND_TOPICS = 3

CONFIRM, FIX, LAST_RESORT = "confirm", "fix", "last resort"


def _command(purpose: str, command: str, why: str) -> Command:
    return {"purpose": purpose, "command": command, "why": why}


def row_commands(
    row: TransactionRow, partitions: list[DiagnosedPartition], coordinator: CoordinatorPart, bootstrap_servers: str
) -> list[Command]:
    b = shlex.quote(bootstrap_servers)
    commands = [
        _command(
            CONFIRM,
            f"kafka-transactions.sh --bootstrap-server {b} describe --transactional-id "
            f"{shlex.quote(row['transactional_id'])}",
            "the coordinator's view: state, start time, timeout, partitions (TransactionDurationMs: since start)",
        ),
    ]
    topics: list[str] = []
    for p in partitions:
        parsed = split_partition(p["partition"])
        if parsed is None:
            continue
        if parsed[0] not in topics:
            if len(topics) == MAX_COMMAND_TOPICS:
                continue
            topics.append(parsed[0])
        topic, index = shlex.quote(parsed[0]), parsed[1]
        errors = {e["error"] for e in p["errors"]}
        if p["errors"] or p["cause"]:
            commands.append(
                _command(
                    CONFIRM,
                    f"kafka-topics.sh --bootstrap-server {b} --describe --topic {topic}",
                    "the leader, replicas and ISR of each of the topic's partitions",
                )
            )
        if errors & {"NOT_ENOUGH_REPLICAS", "NOT_ENOUGH_REPLICAS_AFTER_APPEND", "REQUEST_TIMED_OUT"} or (
            p["cause"] and "min.insync.replicas" in p["cause"]
        ):
            commands.append(
                _command(
                    CONFIRM,
                    f"kafka-configs.sh --bootstrap-server {b} --describe --entity-type topics --entity-name "
                    f"{topic} --all",
                    "the min.insync.replicas in force (and where it is set)",
                )
            )
            commands += _lower_min_isr(p, b, topic)
        if "KAFKA_STORAGE_ERROR" in errors and p["leader"] is not None:
            commands.append(
                _command(
                    CONFIRM,
                    f"kafka-log-dirs.sh --bootstrap-server {b} --describe --broker-list {p['leader']} "
                    f"--topic-list {topic}",
                    "the leader's log directories: which one is offline",
                )
            )
        if "NOT_LEADER_OR_FOLLOWER" in errors:
            commands.append(
                _command(
                    CONFIRM,
                    f"kafka-reassign-partitions.sh --bootstrap-server {b} --list",
                    "reassignments in progress (leadership moving)",
                )
            )
        if "producer" in p:
            commands.append(
                _command(
                    CONFIRM,
                    f"kafka-transactions.sh --bootstrap-server {b} describe-producers --topic {topic} "
                    f"--partition {index}",
                    "the producer's last write, epoch and open transaction there",
                )
            )
    if coordinator["append_errors"] or coordinator["cause"]:
        commands.append(
            _command(
                CONFIRM,
                f"kafka-topics.sh --bootstrap-server {b} --describe --topic {TRANSACTION_STATE_TOPIC} "
                f"--under-min-isr-partitions",
                f"{coordinator['partition']} among the partitions short of ISR",
            )
        )
    # One of each, in order: partitions of one topic share its commands.
    seen: set[str] = set()
    return [c for c in commands if not (c["command"] in seen or seen.add(c["command"]))]  # type: ignore[func-returns-value]


def _lower_min_isr(p: DiagnosedPartition, b: str, topic: str) -> list[Command]:
    """The last-resort fix of a partition whose ISR stays below min.insync.replicas: lower it to the
    ISR's size for the topic, and how to restore it."""
    isr, min_isr = p["isr"], p["min_insync_replicas"]
    if not isr or min_isr is None or len(isr) >= min_isr:
        return []
    restore = (
        f"--add-config min.insync.replicas={min_isr}"
        if p["min_insync_replicas_source"] == TOPIC
        else "--delete-config min.insync.replicas"
    )
    return [
        _command(
            LAST_RESORT,
            f"kafka-configs.sh --bootstrap-server {b} --alter --entity-type topics --entity-name {topic} "
            f"--add-config min.insync.replicas={len(isr)}",
            f"lets the markers through with {len(isr)} in-sync replica(s), losing the durability min.insync.replicas="
            f"{min_isr} gives every write to the topic; restore it after (--alter ... {restore})",
        )
    ]


def group_commands(waits: Sequence[GroupWait], bootstrap_servers: str, shown: Sequence[Command]) -> list[Command]:
    b = shlex.quote(bootstrap_servers)
    commands = [
        _command(
            CONFIRM,
            f"kafka-consumer-groups.sh --bootstrap-server {b} --describe --group {shlex.quote(w['group_id'])}",
            "the group's coordinator, members and committed offsets (its pending ones appear once the transaction "
            "completes)",
        )
        for w in waits[:MAX_COMMAND_TOPICS]
    ]
    seen = {c["command"] for c in shown}
    return [c for c in commands if c["command"] not in seen]


def runbook_link(section: str) -> Runbook:
    return {"section": section, "url": f"{RUNBOOK_URL}#{section.lower()}"}


def hanging_advice(row: HangingRow, bootstrap_servers: str) -> HangingAdvice:
    """For a hanging transaction of the data-partition scan: its runbook and the commands (the abort
    command is the row's own `abort_command`, exporter.contracts.hanging_rules)."""
    b = shlex.quote(bootstrap_servers)
    topic, partition = row["topic"], row["partition"]
    return {
        "runbook": runbook_link(HANGING),
        "commands": [
            _command(
                CONFIRM,
                f"kafka-transactions.sh --bootstrap-server {b} describe-producers --topic "
                f"{shlex.quote(topic)} --partition {partition}",
                f"the open transaction at offset {row['start_offset']}: producer {row['producer_id']}, "
                f"epoch {row['epoch']}",
            ),
            _command(
                FIX,
                row["abort_command"],
                "writes an abort marker at that start offset; only an open transaction starting exactly "
                "there is aborted",
            ),
        ],
    }

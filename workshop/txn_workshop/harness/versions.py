"""The Kafka versions the harness runs, and everything that differs between them, in one table.

The harness and the tests read these fields instead of comparing version strings. Each row was
checked against that version's jars and a broker of it (tests/workshop/harness/test_versions.py,
tests/sources/broker_log_corpus/<version>.*).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal


@dataclass(frozen=True)
class KafkaVersion:
    version: str
    # The version whose complete classpath runs Kafka's command-line tools (DumpLogSegments,
    # TransactionsCommand, ...): the nearest one whose kafka-tools Maven Central serves.
    tools_version: str
    # Kafka's logging backend as its tarball ships it: reload4j (log4j 1 API, log4j.properties)
    # up to 3.x, log4j2 (log4j2.properties) from 4.0.
    log4j: Literal[1, 2]
    # Tool classes, in the tools version's jars. Those not listed in a row did not move in 3.6..4.4.
    dump_log_segments_class: str = "kafka.tools.DumpLogSegments"
    reassign_partitions_class: str = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"
    config_command_class: str = "kafka.admin.ConfigCommand"
    storage_tool_class: str = "kafka.tools.StorageTool"
    jmx_tool_class: str = "org.apache.kafka.tools.JmxTool"
    transactions_command_class: str = "org.apache.kafka.tools.TransactionsCommand"
    broker_api_versions_class: str = "kafka.admin.BrokerApiVersionsCommand"
    # `transaction.version` feature levels `kafka-storage format --feature` accepts (KIP-890 TV2
    # from 4.0); empty: the broker has no such feature to set.
    transaction_versions: tuple[int, ...] = ()
    # Share groups (KIP-932) have their own state topic from 4.0, replicated 3 by default: a
    # single-node cluster needs its replication and min ISR set to 1.
    share_group_state_topic: bool = False
    # How a broker's log lines print a transaction state (`txnState=...` of the failed-append lines):
    # display names (`PrepareCommit`) up to 4.0, the enum's names (`PREPARE_COMMIT`) from 4.1.
    log_state_names: Literal["display", "enum"] = "display"
    # The final-append retry line: `PendingCompleteTxn(transactionalId=...` (a Scala case class) up
    # to 4.3, `PendingCompleteTxn[transactionalId=...` (a Java record) from 4.4.
    pending_complete_txn_bracket: Literal["(", "["] = "("
    # DumpLogSegments --transaction-log-decoder prints a record's key and value as text
    # (`transaction_metadata::transactionalId=...`, `state=CompleteCommit,...`) up to 4.0, as the
    # generated messages' JSON (`"transactionStatus":4`) from 4.1.
    transaction_log_dump: Literal["text", "json"] = "text"
    # Runs the whole test suite (the newest 3.x and the newest 4.x); every version runs the
    # per-version checks (the tests marked tested_on, tests/tested_on.py).
    full_suite: bool = False
    # A broker can run in ZooKeeper mode (broker.id, zookeeper.connect, a ZooKeeper of the
    # distribution's own jars): up to 3.9; 4.0 removed it (KIP-833), only KRaft is left.
    zookeeper_mode: bool = False
    # The per-version checks run in ZooKeeper mode as well (the newest and the oldest 3.x).
    zookeeper_checks: bool = False

    @property
    def newest_transaction_version(self) -> int | None:
        return max(self.transaction_versions, default=None)

    @property
    def log4j_config(self) -> str:
        """The harness's logging config file for this version (workshop/txn_workshop/harness/)."""
        return "log4j2.properties" if self.log4j == 2 else "log4j.properties"


# What whole lines of versions share (keyword arguments of KafkaVersion).
_3X: dict[str, Any] = {"log4j": 1, "zookeeper_mode": True}
# BrokerApiVersionsCommand moved from core to the tools module in 4.0.
_4X: dict[str, Any] = {
    "log4j": 2,
    "transaction_versions": (0, 1, 2),
    "share_group_state_topic": True,
    "broker_api_versions_class": "org.apache.kafka.tools.BrokerApiVersionsCommand",
}
_4_1: dict[str, Any] = {**_4X, "log_state_names": "enum", "transaction_log_dump": "json"}

# Newest first. The newest patch of each minor that Maven Central serves (2026-11).
VERSIONS: tuple[KafkaVersion, ...] = (
    # kafka-tools and kafka-tools-api 4.4.0 are not on Maven Central (kafka_2.13 4.4.0 is, and lists
    # kafka-tools-api 4.4.0 as a dependency, so it does not even resolve as published; the pom
    # excludes it). kafka-tools 4.3.1 on 4.4.0's kafka-clients fails with NoSuchMethodError: tools
    # run from the complete 4.3.1 classpath, whose decoders know every record version 4.4 writes.
    KafkaVersion(
        "4.4.0",
        "4.3.1",
        dump_log_segments_class="org.apache.kafka.tools.DumpLogSegments",
        pending_complete_txn_bracket="[",
        full_suite=True,
        **_4_1,
    ),
    # DumpLogSegments moved from core (Scala) to the tools module in 4.3.
    KafkaVersion("4.3.1", "4.3.1", dump_log_segments_class="org.apache.kafka.tools.DumpLogSegments", **_4_1),
    # kafka_2.13 4.2.2 is served, kafka-tools 4.2.2 is not: tools from 4.2.1, as for 4.4.0.
    KafkaVersion("4.2.2", "4.2.1", **_4_1),
    KafkaVersion("4.1.2", "4.1.2", **_4_1),
    KafkaVersion("4.0.2", "4.0.2", **_4X),
    KafkaVersion("3.9.2", "3.9.2", full_suite=True, zookeeper_checks=True, **_3X),
    KafkaVersion("3.8.1", "3.8.1", **_3X),
    KafkaVersion("3.7.2", "3.7.2", **_3X),
    # ReassignPartitionsCommand moved from core to the tools module in 3.7.
    KafkaVersion(
        "3.6.2",
        "3.6.2",
        reassign_partitions_class="kafka.admin.ReassignPartitionsCommand",
        zookeeper_checks=True,
        **_3X,
    ),
)

BY_VERSION: dict[str, KafkaVersion] = {v.version: v for v in VERSIONS}
KAFKA_VERSIONS: tuple[str, ...] = tuple(BY_VERSION)
FULL_SUITE_VERSIONS: tuple[str, ...] = tuple(v.version for v in VERSIONS if v.full_suite)
ZOOKEEPER_CHECK_VERSIONS: tuple[str, ...] = tuple(v.version for v in VERSIONS if v.zookeeper_checks)
DEFAULT_KAFKA_VERSION = VERSIONS[0].version


def kafka_version(version: str) -> KafkaVersion:
    """The table's row of ``version``; a clear error for a version the harness does not pin."""
    try:
        return BY_VERSION[version]
    except KeyError:
        raise ValueError(f"Kafka {version} is not pinned; pinned: {', '.join(KAFKA_VERSIONS)}") from None

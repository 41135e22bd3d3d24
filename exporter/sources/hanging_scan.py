"""The data-partition view: KIP-664's find-hanging, done continuously and bounded in cost.

Each round (HangingScanner.scan):
1. Metadata: the data partitions this broker leads (`broker_id`; all partitions when None); internal
   topics are not data partitions (kafka-transactions.sh find-hanging skips them too).
2. DescribeProducers on at most `max_partitions` of them, sent to their leader; a cursor walks the
   list round after round, so a large broker is covered over several rounds. The last answer of
   each partition is kept, and forgotten when the broker stops leading it.
3. Late open transactions (exporter.contracts.hanging_rules.is_late: the broker's own rule).
4. ListTransactions filtered on their producer ids (every broker: each coordinator lists its own),
   then DescribeTransactions of those transactional ids at their coordinators.
5. exporter.contracts.hanging_rules.judge: hanging or late.

Rights (kafka-acls.sh terms; from Kafka's KafkaApis, the same from 3.6 to 4.x): Metadata lists only the
topics the principal may Describe; DescribeProducers needs Read on the topic (Read implies Describe);
ListTransactions needs nothing but silently leaves out the transactional ids the principal may not
Describe, and FindCoordinator and DescribeTransactions need Describe on the transactional id. No
cluster right is needed. Without Describe on the transactional ids every late transaction would look
hanging (no transactional id for its producer id), so each round first asks DescribeTransactions about
an id nobody uses: refused, the round fails with ScanAccessError naming the missing ACL. A topic the
principal sees but may not Read is left out of the scan, named once in a warning, and counted as a
failed round (ScanResult.events).

Why kafka-python: confluent-kafka (librdkafka) has no DescribeProducers, ListTransactions or
DescribeTransactions admin API; kafka-python >= 3.0 has all three (describe_producers,
list_transactions, describe_transactions), is pure Python and maintained.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from exporter import defaults
from exporter.contracts.events import HangingScanCompleted
from exporter.contracts.hanging_rules import (
    HANGING,
    CoordinatorTransaction,
    Finding,
    OpenTransaction,
    judge,
    late_transactions,
    partitions_with_late_transactions,
)
from exporter.sources.kafka_admin import KAFKA_PYTHON_SETTINGS, admin_client
from exporter.sources.kafka_python_adapter import forget_transaction_coordinators

log = logging.getLogger("txn_exporter.hanging")

_TRANSACTION_STATE = "__transaction_state"
# DescribeTransactions of this id tells whether the principal may Describe transactional ids.
_PROBE_TRANSACTIONAL_ID = "txn-exporter-acl-probe"
# Each request's bound (kafka-python's default is 30 s), a broker that does not answer then skipped
# (exporter.sources.kafka_admin).
REQUEST_TIMEOUT_MS = 10_000


class ScanAccessError(Exception):
    """The scan lacks a right it cannot work without; the message names the ACL to grant."""


@dataclass(frozen=True, slots=True)
class ScanResult:
    event: HangingScanCompleted
    unreadable_topics: tuple[str, ...] = ()  # seen, but without Read: not scanned

    @property
    def findings(self) -> tuple[Finding, ...]:
        return self.event.findings

    @property
    def events(self) -> list[HangingScanCompleted]:
        """For the model: the round, and a failed one too when topics were left out for lack of Read."""
        return [self.event, HangingScanCompleted(0, 0, 0, ok=False)] if self.unreadable_topics else [self.event]


class HangingScanner:
    def __init__(
        self,
        bootstrap_servers: str,
        broker_id: int | None,
        max_timeout_ms: int,
        padding_ms: int,
        max_partitions: int = defaults.HANGING_SCAN_MAX_PARTITIONS,
        kafka_settings: Mapping[str, str] | None = None,
        clock: Callable[[], float] = time.time,
        topic: str | None = None,
    ) -> None:
        skipped = sorted(set(kafka_settings or {}) - set(KAFKA_PYTHON_SETTINGS))
        if skipped:
            log.warning(
                "hanging-transaction scan: client settings without a kafka-python equivalent ignored: %s", skipped
            )
        # kafka-python: see the module docstring. Requests that name no broker go to this broker first,
        # then to others that answer.
        self._admin = admin_client(
            bootstrap_servers,
            kafka_settings or {},
            request_timeout_ms=REQUEST_TIMEOUT_MS,
            own_broker=lambda: broker_id,
            bootstrap_timeout_ms=REQUEST_TIMEOUT_MS,
        )
        self.broker_id = broker_id
        self.max_timeout_ms = max_timeout_ms
        self.padding_ms = padding_ms
        self.max_partitions = max_partitions
        self._clock = clock
        self._topic = topic
        self._cursor = 0
        # (topic, partition) -> open transactions at its last DescribeProducers.
        self._open: dict[tuple[str, int], list[OpenTransaction]] = {}
        self._unreadable: tuple[str, ...] = ()
        self._warned_unreadable: set[str] = set()

    def close(self) -> None:
        self._admin.close()

    def led_partitions(self) -> list[tuple[str, int]]:
        return self._metadata()[0]

    def _metadata(self) -> tuple[list[tuple[str, int]], bool]:
        """The data partitions led (internal topics are not data; topics without Read are left out,
        in self._unreadable) and whether __transaction_state exists."""
        topics = self._admin.describe_topics([self._topic, _TRANSACTION_STATE] if self._topic else None)
        led, unreadable, transaction_state = [], [], False
        for topic in topics:
            if topic.get("error_code"):
                continue
            transaction_state |= topic["name"] == _TRANSACTION_STATE
            if topic.get("is_internal"):
                continue
            # Listed at all means Describe; an empty list means the broker did not say.
            operations = topic.get("authorized_operations")
            if operations and "READ" not in operations:
                unreadable.append(topic["name"])
                continue
            for partition in topic["partitions"]:
                leader = partition["leader_id"]
                if leader >= 0 and (self.broker_id is None or leader == self.broker_id):
                    led.append((topic["name"], partition["partition_index"]))
        self._unreadable = tuple(sorted(unreadable))
        new = [t for t in self._unreadable if t not in self._warned_unreadable]
        if new:
            self._warned_unreadable.update(new)
            log.warning(
                "hanging-transaction scan: no Read on topic(s) %s, which DescribeProducers needs: their transactions "
                "are not scanned (each round counts as failed) until it is granted: kafka-acls.sh --add "
                "--allow-principal User:<the exporter's> --operation Read --topic <topic>",
                ", ".join(new),
            )
        return sorted(led), transaction_state

    def _check_transactional_id_rights(self) -> None:
        from kafka.errors import TransactionalIdAuthorizationFailedError, TransactionalIdNotFoundError

        forget_transaction_coordinators(self._admin, [_PROBE_TRANSACTIONAL_ID])
        try:
            self._admin.describe_transactions([_PROBE_TRANSACTIONAL_ID])
        except TransactionalIdNotFoundError:
            pass  # allowed to ask, and nobody uses the id
        except TransactionalIdAuthorizationFailedError:
            raise ScanAccessError(
                "no Describe on transactional ids: without it ListTransactions hides them all and every late "
                "transaction would look hanging, so the scan is off (the rest of the exporter works) until it is "
                "granted: kafka-acls.sh --add --allow-principal User:<the exporter's> --operation Describe "
                "--transactional-id '*'"
            ) from None

    def scan(self) -> ScanResult:
        """One bounded round; raises on a failed request (the caller counts it), ScanAccessError when
        a right it cannot work without is missing."""
        from kafka import TopicPartition

        led, transaction_state = self._metadata()
        if transaction_state:  # else no transaction exists yet (and asking would create the topic)
            self._check_transactional_id_rights()
        led_set = set(led)
        for key in [k for k in self._open if k not in led_set]:
            del self._open[key]
        if self._cursor >= len(led):
            self._cursor = 0
        batch = led[self._cursor : self._cursor + self.max_partitions]
        self._cursor += len(batch)
        if batch:
            states = self._admin.describe_producers([TopicPartition(t, p) for t, p in batch])
            for tp, state in states.items():
                self._open[(tp.topic, tp.partition)] = [
                    OpenTransaction(
                        tp.topic,
                        tp.partition,
                        p.producer_id,
                        p.producer_epoch,
                        p.coordinator_epoch,
                        p.current_transaction_start_offset,
                        p.last_timestamp,
                    )
                    for p in state.active_producers
                    if p.current_transaction_start_offset >= 0
                ]
        now_ms = int(self._clock() * 1000)
        late = late_transactions(
            (t for txns in self._open.values() for t in txns), now_ms, self.max_timeout_ms, self.padding_ms
        )
        findings: list[Finding] = []
        if late:
            transactional_ids = self._transactional_ids({t.producer_id for t in late})
            findings = judge(late, transactional_ids, self._describe(set(transactional_ids.values())), now_ms)
        event = HangingScanCompleted(
            partitions_scanned=len(batch),
            partitions_with_late_transactions=partitions_with_late_transactions(late),
            hanging_transactions=sum(1 for f in findings if f.verdict == HANGING),
            findings=tuple(findings),
            completed_ms=int(self._clock() * 1000),
        )
        return ScanResult(event, self._unreadable)

    def _transactional_ids(self, producer_ids: set[int]) -> dict[int, str]:
        by_broker = self._admin.list_transactions(producer_id_filters=sorted(producer_ids))
        return {
            listing.producer_id: listing.transactional_id
            for listings in by_broker.values()
            for listing in listings
            if listing.producer_id in producer_ids
        }

    def _describe(self, transactional_ids: set[str]) -> dict[str, CoordinatorTransaction | None]:
        from kafka.errors import TransactionalIdNotFoundError

        # kafka-python keeps a coordinator it found for good: once one moved, every later round would
        # fail on NOT_COORDINATOR. Asked afresh each round instead.
        forget_transaction_coordinators(self._admin, transactional_ids)
        try:
            described = self._admin.describe_transactions(sorted(transactional_ids))
        except TransactionalIdNotFoundError:
            described = {}
            for tid in sorted(transactional_ids):  # one at a time to tell which id is unknown
                try:
                    described.update(self._admin.describe_transactions([tid]))
                except TransactionalIdNotFoundError:
                    pass
        result: dict[str, CoordinatorTransaction | None] = dict.fromkeys(transactional_ids)
        for tid, d in described.items():
            result[tid] = CoordinatorTransaction(
                tid,
                d.coordinator_id,
                str(getattr(d.state, "value", d.state)),
                d.producer_id,
                d.producer_epoch,
                d.transaction_timeout_ms,
                d.transaction_start_time_ms,
                frozenset((tp.topic, tp.partition) for tp in d.topic_partitions),
            )
        return result

    def scan_all(self) -> ScanResult:
        """Rounds until every led partition was described once (for the `hanging` command)."""
        total = len(self.led_partitions())
        self._cursor = 0
        scanned = 0
        while True:
            result = self.scan()
            scanned += result.event.partitions_scanned
            if scanned >= total or result.event.partitions_scanned == 0:
                return ScanResult(
                    HangingScanCompleted(
                        scanned,
                        result.event.partitions_with_late_transactions,
                        result.event.hanging_transactions,
                        findings=result.event.findings,
                        completed_ms=result.event.completed_ms,
                    ),
                    result.unreadable_topics,
                )

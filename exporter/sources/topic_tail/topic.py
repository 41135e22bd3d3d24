"""What the tail's parts share: the topic they read, the logs they write to (each live record too, at
DEBUG), how long a request to Kafka may take, how ListOffsets asks for the latest offsets, and what they
read of a fetched message."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from typing import Protocol

from confluent_kafka import KafkaError, TopicPartition

from exporter.codec import TransactionLogRecord

TOPIC = "__transaction_state"
# One log for every part of the tail, named as the tail ("topic_tail: busy ..."): its lines are what
# operators, the benches and the integration tests read.
log = logging.getLogger(__package__)

# Every live record as received, at DEBUG: what the append-latency bound of each transition was
# measured from (tests/integration/broker_truth.py holds it to the coordinator's own log lines).
records_log = logging.getLogger(log.name + ".records")


def log_observed(partition: int, record: TransactionLogRecord, received_ms: int) -> None:
    value = record.value
    fields = {"partition": partition, "offset": record.offset, "transactional_id": record.transactional_id}
    if value is not None:
        fields.update(
            state=value.state.name,
            producer_id=value.producer_id,
            producer_epoch=value.producer_epoch,
            last_update_ms=value.last_update_timestamp_ms,
        )
    fields.update(timestamp_ms=record.timestamp_ms, received_ms=received_ms)
    records_log.debug("live record %s", json.dumps(fields, ensure_ascii=False))


METADATA_TIMEOUT_SECONDS = 5.0
# ListOffsets' timestamp for the latest offset: the high watermark, with the leader's epoch.
_LATEST = -1


def latest_offsets(partitions: Iterable[int]) -> list[TopicPartition]:
    """What Consumer.offsets_for_times asks to answer the `partitions`' high watermarks (ListOffsets
    LATEST: one request per leader), each answer with its leader's epoch."""
    return [TopicPartition(TOPIC, partition, _LATEST) for partition in partitions]


class Fetched(Protocol):
    """What the tail reads of a fetched confluent_kafka.Message. The client's types leave its
    partition and offset optional, for the messages that carry an error(); a message without one is
    a record, and librdkafka always sets them."""

    def error(self) -> KafkaError | None: ...
    def partition(self) -> int: ...
    def offset(self) -> int: ...
    def key(self) -> bytes | None: ...
    def value(self) -> bytes | None: ...
    def timestamp(self) -> tuple[int, int]: ...
    def leader_epoch(self) -> int | None: ...

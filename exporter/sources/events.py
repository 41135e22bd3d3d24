"""The typed events sources hand to the coordinator model."""

from __future__ import annotations

from dataclasses import dataclass

from exporter.codec import DecodeError, TransactionLogRecord


@dataclass(slots=True)
class TransactionLogEvent:
    """A decoded `__transaction_state` record as a consumer saw it."""

    partition: int
    record: TransactionLogRecord
    # Wall clock (ms) when the consumer received the record, i.e. after its append completed.
    received_ms: int
    # True while the partition is replayed up to its high watermark after being taken over:
    # the state is rebuilt, but no latency is observed (the appends happened long ago).
    replay: bool


@dataclass(slots=True)
class UndecodableRecord:
    """A record the codec rejected; counted by reason, skipped, and nothing else is lost."""

    partition: int
    offset: int
    error: DecodeError


@dataclass(slots=True)
class PartitionAssigned:
    """The exporter starts following a `__transaction_state` partition (replay begins)."""

    partition: int


@dataclass(slots=True)
class PartitionReplayed:
    """Replay reached the high watermark seen at assignment: records from here on are live."""

    partition: int


@dataclass(slots=True)
class PartitionRevoked:
    """The partition moved away: its state and every series it fed must go."""

    partition: int


@dataclass(slots=True)
class PartitionProgress:
    """Where the consumer stands in a partition, for the lag self-metric; sent as often as the
    source likes (e.g. from librdkafka's stats or after each poll batch)."""

    partition: int
    # Next offset the consumer will read (consumer.position()).
    position: int
    # Offset after the last record visible to consumers.
    high_watermark: int


@dataclass(slots=True)
class SourceStatus:
    """Whether the source can currently read from Kafka (feeds txn_exporter_source_up)."""

    up: bool

"""Admin operations the harness and its workloads share: topics, their configs, the internal topics.

Through confluent-kafka's AdminClient (Kafka's own tools are slower to start: broker.run_tool).
"""

from __future__ import annotations

import time
from collections.abc import Mapping

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
    ResourceType,
)

from exporter.logs import kafka_client_logger

TRANSACTION_STATE_TOPIC = "__transaction_state"
# librdkafka's lines through `logging` (where the demo collapses repeats), never raw to stderr: a
# setting of the Producer and Consumer, a keyword argument of the AdminClient (its settings are strings).
CLIENT_LOGGER = "librdkafka.harness"
CLIENT_LOG = {"logger": kafka_client_logger(CLIENT_LOGGER)}


def create_topic(
    bootstrap: str, topic: str, partitions: int = 3, replication_factor: int = 1, timeout: float = 30
) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap}, **CLIENT_LOG)
    futures = admin.create_topics([NewTopic(topic, partitions, replication_factor)], operation_timeout=timeout)
    futures[topic].result(timeout)
    # Metadata can lag the creation; producers need the partitions to exist.
    deadline = time.monotonic() + timeout
    while len(admin.list_topics(topic, timeout=timeout).topics[topic].partitions) < partitions:
        if time.monotonic() > deadline:
            raise TimeoutError(f"topic {topic} has no metadata after {timeout} s")
        time.sleep(0.1)


def alter_topic_config(bootstrap: str, topic: str, configs: Mapping[str, str | None]) -> None:
    """Set topic configs incrementally; a value of None deletes the override."""
    entries = [
        ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET)
        if v is not None
        else ConfigEntry(k, "", incremental_operation=AlterConfigOpType.DELETE)
        for k, v in configs.items()
    ]
    resource = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=entries)
    admin = AdminClient({"bootstrap.servers": bootstrap}, **CLIENT_LOG)
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(30)


def topic_config_override(bootstrap: str, topic: str, key: str) -> str | None:
    """The topic-level override of ``key``, None when the topic uses the broker default."""
    admin = AdminClient({"bootstrap.servers": bootstrap}, **CLIENT_LOG)
    (future,) = admin.describe_configs([ConfigResource(ResourceType.TOPIC, topic)]).values()
    entry = future.result(30)[key]
    return entry.value if entry.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value else None


def create_internal_topics(bootstrap: str) -> None:
    """Make the broker create __transaction_state and __consumer_offsets now, not on first use."""
    Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": "harness-internal-topics", **CLIENT_LOG}
    ).init_transactions(60)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "harness-internal-topics", **CLIENT_LOG})
    deadline = time.monotonic() + 60
    try:
        while True:  # OffsetFetch needs the group coordinator, hence the offsets topic
            try:
                consumer.committed([TopicPartition(TRANSACTION_STATE_TOPIC, 0)], timeout=10)
                return
            except KafkaException:  # NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS while it loads
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
    finally:
        consumer.close()


def partition_count(bootstrap: str, topic: str) -> int:
    admin = AdminClient({"bootstrap.servers": bootstrap}, **CLIENT_LOG)
    return len(admin.list_topics(topic, timeout=30).topics[topic].partitions)

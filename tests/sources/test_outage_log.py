"""The connection failures' lines in plain words (exporter.sources.topic_tail.outage_log.in_plain_words)."""

from __future__ import annotations

import pytest

from exporter.sources.topic_tail.outage_log import in_plain_words


@pytest.mark.parametrize(
    ("client", "said"),
    [
        (
            "127.0.0.1:51835/2: Connect to ipv4#127.0.0.1:51835 failed: Connection refused (after 0ms in state CONNECT)",
            "cannot connect to Kafka broker 2 at 127.0.0.1:51835: connection refused",
        ),
        (
            "broker-1:9092/bootstrap: Connect to ipv6#[::1]:9092 failed: Connection refused",
            "cannot connect to the Kafka bootstrap server broker-1:9092: connection refused",
        ),
        (
            "kafka-3.kafka:9092/3: Failed to resolve 'kafka-3.kafka:9092': Name or service not known "
            "(after 5ms in state CONNECT)",
            "cannot find Kafka broker 3 at kafka-3.kafka:9092: name or service not known",
        ),
        (
            "SSL://127.0.0.1:9093/1: Disconnected (after 12034ms in state UP)",
            "lost the connection to Kafka broker 1 at 127.0.0.1:9093",
        ),
        (
            "127.0.0.1:9092/1: Receive failed: Connection reset by peer",
            "Kafka broker 1 at 127.0.0.1:9092: receive failed: Connection reset by peer",
        ),
        ("2/2 brokers are down", "no Kafka broker answers (2 of 2 down)"),
        ("Local: All broker connections are down", "Kafka client: all broker connections are down"),
    ],
)
def test_a_connection_failure_names_the_broker_and_what_failed(client: str, said: str) -> None:
    assert in_plain_words(client) == said
    assert "#" not in said and "ms in state" not in said and len(said.split()) <= 15

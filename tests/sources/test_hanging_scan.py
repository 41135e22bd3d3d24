"""The kafka-python client arguments (exporter.sources.kafka_admin.admin_config), which the scan's and
the cluster state's clients are both made from. Against real brokers, the scan is exercised by
tests/integration/test_hanging_and_timeouts.py and tests/integration/test_kafka_auth.py."""

from __future__ import annotations

import logging

import pytest

from exporter.sources import kafka_admin

CLIENT_LOGGER = logging.getLogger("kafka.admin.client")


@pytest.fixture
def no_filter_yet():
    """The filter removed, as in a process where no kafka-python client was made yet."""
    CLIENT_LOGGER.removeFilter(kafka_admin._NO_CLIENT_CONFIGURATION)
    yield
    CLIENT_LOGGER.addFilter(kafka_admin._NO_CLIENT_CONFIGURATION)


def test_the_arguments_are_mapped_and_their_client_logs_no_password(no_filter_yet, caplog) -> None:
    # Whichever client is made first (the cluster state's may be, before any scan) takes its arguments
    # from here: once they are made, the configuration line kafka-python logs at DEBUG is dropped.
    config = kafka_admin.admin_config("a:9092,b:9092", {"sasl.password": "pw-123", "fetch.min.bytes": "1"})
    assert config == {
        "bootstrap_servers": ["a:9092", "b:9092"],
        "client_id": "txn-exporter-hanging",
        "sasl_plain_password": "pw-123",
    }
    with caplog.at_level(logging.DEBUG, logger=CLIENT_LOGGER.name):
        CLIENT_LOGGER.debug("Starting KafkaAdminClient with configuration: %s", config)
        CLIENT_LOGGER.debug("Bootstrapping cluster metadata")
    assert "pw-123" not in caplog.text
    assert "Bootstrapping cluster metadata" in caplog.text  # its other lines still pass

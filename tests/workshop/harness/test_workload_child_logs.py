"""The harness's child processes (a producer left mid-transaction, txn_workshop.harness.workload's
`hang`) log their librdkafka client's lines through `logging` at the level the harness's client
logger has in the parent, never bare on stderr: the demo sets it to ERROR, and a producer retrying
InitProducerId (`Failed to acquire transactional PID ... retrying`) reached its terminal anyway."""

from __future__ import annotations

import logging

import pytest

from txn_workshop.harness.admin import CLIENT_LOGGER, create_topic
from txn_workshop.harness.versions import DEFAULT_KAFKA_VERSION
from txn_workshop.harness.workload import timed_out_producer

RETRY = "Failed to acquire transactional PID"


@pytest.fixture
def client_logger():
    logger = logging.getLogger(CLIENT_LOGGER)
    level = logger.level
    yield logger
    logger.setLevel(level)


@pytest.mark.parametrize("level", ["ERROR", "WARNING"])
def test_a_child_producers_retries_follow_the_harness_client_logger(kafka_broker_factory, client_logger, capfd, level):
    broker = kafka_broker_factory(DEFAULT_KAFKA_VERSION, 2)
    topic, tid = f"child-logs-{level}", f"child-logs-{level}"
    create_topic(broker.bootstrap_servers, topic, partitions=1)
    client_logger.setLevel(level)
    # A transaction left open, then a second producer of the id: its InitProducerId finds the first
    # one's transaction still open, so the coordinator aborts it and answers CONCURRENT_TRANSACTIONS
    # until that is done, and the client retries (a warning of librdkafka's).
    timed_out_producer(broker.bootstrap_servers, tid, topic, transaction_timeout_ms=60000, wait=False)
    capfd.readouterr()
    timed_out_producer(broker.bootstrap_servers, tid, topic, transaction_timeout_ms=2000)
    err = capfd.readouterr().err
    retries = [line for line in err.splitlines() if RETRY in line]
    if level == "ERROR":
        assert retries == [], err
    else:
        assert retries, err
        assert all(f" WARNING {CLIENT_LOGGER}: " in line for line in retries), retries

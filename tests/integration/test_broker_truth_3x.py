"""The broker-log half of KIP-1344 held to Kafka's own counters (tests/integration/broker_truth.py)
on the 3.x rows of the Tested-on table."""

from tests.integration.broker_truth import *  # noqa: F403  (its tests, fixtures and pytest_generate_tests)

MAJOR = "3"

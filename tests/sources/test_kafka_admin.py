"""The routing of the admin's requests (exporter.sources.kafka_admin.Router), with a stand-in for
kafka-python's connection manager, without brokers; kafka-python's parts it goes through are
tests/sources/test_kafka_python_adapter.py's."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import kafka.errors as errors
import pytest

from exporter.sources.kafka_admin import STALLED_SECONDS, Router


class FakeManager:
    """Answers as KafkaConnectionManager: `failures` by node id raise instead of answering."""

    def __init__(self, nodes: list[int], failures: dict[int, Exception] | None = None) -> None:
        self.cluster = SimpleNamespace(brokers=lambda: [SimpleNamespace(node_id=n) for n in nodes])
        self.failures = failures or {}
        self.sent: list[int | None] = []

    def send(self, request: Any, node_id: int | None = None, request_timeout_ms: int | None = None) -> Any:
        self.sent.append(node_id)
        return self.failures.get(node_id) if node_id in self.failures else f"{request} from {node_id}"

    async def wait_for(self, future: Any, timeout_ms: int) -> Any:
        if isinstance(future, Exception):
            raise future
        return future


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def router(own: int | None = None, clock: Clock | None = None) -> Router:
    return Router(lambda: own, 1000, clock or Clock())


def send(router: Router, manager: FakeManager, request: str, node_id: int | None = None) -> Any:
    return asyncio.run(router.send(manager, request, node_id, None))


def test_the_own_broker_is_asked_first_then_the_others() -> None:
    for _ in range(20):  # the others are shuffled
        candidates = router(own=3).candidates(FakeManager([1, 2, 3, 4]))
        assert candidates[0] == 3 and sorted(candidates) == [1, 2, 3, 4]


def test_an_own_broker_unknown_or_not_in_the_metadata_changes_nothing() -> None:
    assert sorted(router(own=None).candidates(FakeManager([1, 2]))) == [1, 2]
    assert sorted(router(own=7).candidates(FakeManager([1, 2]))) == [1, 2]
    assert router().candidates(FakeManager([])) == []


def test_a_stalled_broker_is_asked_last_until_its_time_is_up() -> None:
    clock = Clock()
    fake, routing = FakeManager([1, 2, 3]), router(own=1, clock=clock)
    routing._stalled = {1: clock.now + 10, 2: clock.now + 5}
    assert routing.candidates(fake) == [3, 2, 1]  # the stalled last, the one stalled longest very last
    clock.now += 5
    assert routing.candidates(fake)[:2] in ([2, 3], [3, 2]) and routing.candidates(fake)[2] == 1
    clock.now += 5
    assert routing.candidates(fake)[0] == 1 and not routing._stalled


def test_a_timeout_stalls_the_broker_and_the_next_one_answers() -> None:
    clock = Clock()
    fake = FakeManager([1, 2], {1: errors.KafkaTimeoutError("late")})
    routing = router(own=1, clock=clock)
    assert send(routing, fake, "metadata") == "metadata from 2"
    assert fake.sent == [1, 2]
    assert routing._stalled == {1: clock.now + STALLED_SECONDS}
    assert routing.candidates(fake) == [2, 1]


def test_a_broker_down_is_passed_over_without_being_stalled() -> None:
    fake = FakeManager([1, 2], {1: errors.NodeNotReadyError(1)})
    routing = router(own=1)
    assert send(routing, fake, "metadata") == "metadata from 2"
    assert not routing._stalled


def test_when_none_answers_the_last_failure_is_raised() -> None:
    fake = FakeManager([1, 2], {1: errors.RequestTimedOutError(), 2: errors.KafkaConnectionError("gone")})
    with pytest.raises(errors.KafkaConnectionError):
        send(router(own=1), fake, "metadata")
    assert fake.sent == [1, 2]


def test_a_request_that_names_its_broker_goes_there_alone() -> None:
    fake = FakeManager([1, 2, 3], {2: errors.KafkaTimeoutError("late")})
    with pytest.raises(errors.KafkaTimeoutError):
        send(router(own=1), fake, "producers", node_id=2)
    assert fake.sent == [2]


def test_without_metadata_kafka_python_chooses() -> None:
    fake = FakeManager([])
    assert send(router(), fake, "metadata") == "metadata from None"
    assert fake.sent == [None]

"""On SIGTERM or Ctrl-C, `txn-exporter run` goes on while partitions its broker no longer leads drain
(exporter.commands.run._drain): until none does, at most --shutdown-drain-seconds, at once without
one, and a second signal cuts it short. The drains themselves: tests/sources/test_topic_tail_counting.py."""

from __future__ import annotations

import signal
import threading
from types import SimpleNamespace

import pytest

from exporter.commands.run import _drain


class Tail:
    """A tail whose partitions drain until `drained` is set."""

    def __init__(self) -> None:
        self.drained = threading.Event()
        self.asked = 0

    @property
    def draining(self) -> bool:
        self.asked += 1
        return not self.drained.is_set()


@pytest.fixture
def serving():
    """A sources' thread running until the test ends."""
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait, daemon=True)
    thread.start()
    yield thread
    stop.set()
    thread.join()


def test_without_a_drain_it_stops_at_once(serving) -> None:
    tail = Tail()
    tail.drained.set()
    _drain(SimpleNamespace(tail=tail), serving, [signal.SIGTERM], 10)
    assert tail.asked == 1


def test_it_waits_for_the_drains_to_end(serving) -> None:
    tail = Tail()
    threading.Timer(0.3, tail.drained.set).start()
    _drain(SimpleNamespace(tail=tail), serving, [signal.SIGTERM], 60)
    assert tail.drained.is_set() and tail.asked > 1


def test_it_stops_at_its_deadline_with_partitions_still_draining(serving, caplog) -> None:
    tail = Tail()
    _drain(SimpleNamespace(tail=tail), serving, [signal.SIGTERM], 0.2)
    assert not tail.drained.is_set() and "still draining" in caplog.text


def test_a_second_signal_stops_it_at_once(serving) -> None:
    tail = Tail()
    _drain(SimpleNamespace(tail=tail), serving, [signal.SIGTERM, signal.SIGINT], 60)
    assert tail.asked == 0


def test_sources_that_ended_are_not_waited_for() -> None:
    tail = Tail()
    ended = threading.Thread(target=lambda: None)
    ended.start()
    ended.join()
    _drain(SimpleNamespace(tail=tail), ended, [signal.SIGTERM], 60)
    assert not tail.drained.is_set()

"""The known-bug thread's parts (exporter.app.known_bugs_loop): what a view's check draws on (the
own broker's version as its model learned it, the others' from the versions source, the coordinator's
log), and the loop: the version looked back for in the log, the ApiVersions answer until the log
says it, the counts of each view. The versions source is a stand-in (its lookups of real brokers:
tests/integration/broker_truth.py)."""

from __future__ import annotations

import threading
from pathlib import Path

from exporter.app import known_bugs_loop
from exporter.contracts.bug_facts import BugContext
from exporter.contracts.cluster import Fact
from exporter.contracts.events import BrokerVersionSeen
from exporter.contracts.kafka_versions import ANY_PATCH, API_VERSIONS, BrokerVersion, between, from_log
from exporter.metrics import LatencyRecorders
from exporter.model import CoordinatorModel
from exporter.view.query import Query

ANSWERED = between((3, 9, 0), (3, 9, ANY_PATCH), API_VERSIONS)


class Versions:
    """Answers every broker with `version`; records what it was asked."""

    def __init__(self, version: BrokerVersion | None = ANSWERED) -> None:
        self.version = version
        self.asked: list[set[int]] = []

    def lookup(self, brokers: set[int]) -> dict[int, Fact[BrokerVersion]]:
        self.asked.append(set(brokers))
        return {b: Fact(self.version, problem=None if self.version else "no answer") for b in brokers}


def model() -> CoordinatorModel:
    return CoordinatorModel(LatencyRecorders().sinks())


def test_the_own_brokers_version_is_the_models_and_the_others_are_asked() -> None:
    m, versions = model(), Versions()
    m.apply(BrokerVersionSeen("3.9.1"))
    context = known_bugs_loop.bug_context(m, versions, 1, True, {1, 2})  # type: ignore[arg-type]
    assert versions.asked == [{2}]
    assert context == BugContext({1: from_log("3.9.1"), 2: ANSWERED}, {}, 1)


def test_a_broker_that_does_not_answer_is_left_out_and_no_log_means_no_coordinator_logs() -> None:
    context = known_bugs_loop.bug_context(model(), Versions(None), 1, False, {1, 2})  # type: ignore[arg-type]
    assert context == BugContext({}, None, 1)


def test_the_loop_looks_back_for_the_version_then_counts_each_view(tmp_path: Path, monkeypatch) -> None:
    log = tmp_path / "server.log"
    log.write_text(
        "[2026-12-02 01:11:26,039] INFO Kafka version: 3.7.2 (org.apache.kafka.common.utils.AppInfoParser)\n"
    )
    m, versions, stop = model(), Versions(), threading.Event()
    views: list[Query] = []

    def view(query: Query) -> dict:
        views.append(query)
        stop.set()  # one round
        return {"transactions": [], "hanging": []}

    monkeypatch.setattr(known_bugs_loop, "COUNT_SECONDS", 0.0)
    known_bugs_loop.count_known_bugs(stop, m, versions, [str(log)], lambda: 1, view)  # type: ignore[arg-type]
    assert m.broker_version() == from_log("3.7.2")
    assert versions.asked == []  # the log said it: no ApiVersions asked
    assert len(views) == 1 and views[0].limit == 1000


def test_without_the_startup_line_the_broker_is_asked_its_version(monkeypatch) -> None:
    m, versions, stop = model(), Versions(), threading.Event()
    monkeypatch.setattr(known_bugs_loop, "COUNT_SECONDS", 0.0)

    def view(query: Query) -> dict:
        stop.set()
        return {"transactions": [], "hanging": []}

    known_bugs_loop.count_known_bugs(stop, m, versions, [], lambda: 1, view)  # type: ignore[arg-type]
    assert versions.asked == [{1}] and m.broker_version() == ANSWERED

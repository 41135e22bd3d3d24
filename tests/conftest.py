"""Real-Kafka fixtures (txn_workshop.harness).

- ``broker``: session broker parametrized over ``BROKER_PARAMS`` (value v1 and v0, both log formats).
- ``kafka_broker_factory(version, transaction_version=None)``: the session broker for that key.
- ``own_broker(**KafkaBroker kwargs)``: a short-lived broker of the test's own (custom properties).

At most ``MAX_JVMS`` brokers run at once (CI has 2 cores): asking for another one stops the least
recently used session broker, which restarts on its next use with its data kept.
Tests using these fixtures get the ``kafka`` marker: deselect them with ``-m "not kafka"``.
`make check` runs the tests without the markers ``kafka``, ``spark``, ``image`` and ``tools`` (pyproject.toml
says what each needs); a test that needs a program or download of scripts/setup's full mode is marked ``tools``.

The whole suite runs on the table's full-suite versions (``BROKER_PARAMS``: the newest 4.x with
transaction.version 2 and 0, the newest 3.x); the per-version checks on every pinned version. Those
declare ``@pytest.mark.tested_on(check)``: their outcomes make the Tested-on table of docs/supported-versions.md
(tests/tested_on.py; its recorder is registered below).
"""

from __future__ import annotations

import os
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

from tests import machine, tested_on
from txn_workshop.harness.broker import KafkaBroker
from txn_workshop.harness.versions import FULL_SUITE_VERSIONS, kafka_version

MAX_JVMS = 2

# Every JVM the tests start (brokers, ZooKeeper, Kafka's tools, Spark, Streams apps, Maven) compiles
# with C1 only: they live seconds to minutes, and compiling with C2 took over a third of their CPU on
# CI's two cores (a broker's start, a small workload and stop: 17.5 CPU s, 10 with C1 only). The java
# launcher reads this variable and says so on stderr ("NOTE: Picked up JDK_JAVA_OPTIONS"). Benchmarks
# do not load this file: the brokers they measure compile as users' do.
os.environ.setdefault("JDK_JAVA_OPTIONS", "-XX:TieredStopAtLevel=1")


def _broker_params() -> dict[str, tuple[str, int | None]]:
    """Per full-suite version: with its newest and oldest transaction.version where it has them
    (4.x: value v1 and v0, 4.x log lines), else as it comes (3.x: value v0, 3.x log lines)."""
    params: dict[str, tuple[str, int | None]] = {}
    for version in FULL_SUITE_VERSIONS:
        levels = kafka_version(version).transaction_versions
        if levels:
            params[f"{version}-tv{max(levels)}"] = (version, max(levels))
            params[f"{version}-tv{min(levels)}"] = (version, min(levels))
        else:
            params[version] = (version, None)
    return params


BROKER_PARAMS = _broker_params()
_KAFKA_FIXTURES = {"broker", "kafka_broker_factory", "own_broker"}

BrokerKey = tuple[str, int | None]


class BrokerPool:
    def __init__(self, root: Path) -> None:
        self._root = root
        self._session: OrderedDict[BrokerKey, KafkaBroker] = OrderedDict()  # least recently used first
        self.own: list[KafkaBroker] = []

    def __call__(self, version: str, transaction_version: int | None = None) -> KafkaBroker:
        key = (version, transaction_version)
        broker = self._session.pop(key, None) or KafkaBroker(
            version, transaction_version, workdir=self._root / f"{version}-tv{transaction_version}"
        )
        self._session[key] = broker
        if not broker.running:
            self.make_room()
            broker.start()
        return broker

    def make_room(self) -> None:
        """Stop least recently used session brokers until one more JVM fits."""
        running = sum(b.running for b in [*self._session.values(), *self.own])
        for broker in self._session.values():
            if running < MAX_JVMS:
                return
            if broker.running:
                broker.stop()
                running -= 1

    @contextmanager
    def joined_pair(self, root: Path, version: str, **first: Any) -> Iterator[tuple[KafkaBroker, KafkaBroker]]:
        """Two brokers of one cluster, the second joining the first (so markers can be held back and
        partitions moved); both get the first's `broker_properties`, `jmx` and `mode`. Stopped on exit."""
        with self.joined(root, version, 2, **first) as brokers:
            yield brokers[0], brokers[1]

    @contextmanager
    def joined(self, root: Path, version: str, nodes: int, **first: Any) -> Iterator[list[KafkaBroker]]:
        """`nodes` brokers of one cluster, nodes 2.. joining node 1 (its only controller in KRaft); each
        gets the first's `broker_properties`, `jmx`, `mode` and `logging_config`. Stopped on exit. (A
        cluster of more than MAX_JVMS brokers runs beside no session broker: they are stopped first.)"""
        brokers = [KafkaBroker(version, workdir=root / "1", **first)]
        brokers += [
            KafkaBroker(
                version,
                workdir=root / str(n),
                join=brokers[0],
                node_id=n,
                broker_properties=first.get("broker_properties"),
                jmx=first.get("jmx", False),
                mode=first.get("mode", "kraft"),
                logging_config=first.get("logging_config"),
                internal_topics_on_join=first.get("internal_topics_on_join", True),
            )
            for n in range(2, nodes + 1)
        ]
        try:
            for broker in brokers:
                self.make_room()
                self.own.append(broker)
                broker.start()
            yield brokers
        finally:
            for broker in reversed(brokers):  # the joined brokers first: they need the controller to stop
                broker.stop()
                if broker in self.own:
                    self.own.remove(broker)

    def stop_all(self) -> None:
        for broker in reversed([*self._session.values(), *self.own]):
            broker.stop()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if _KAFKA_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.kafka)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "tested_on(check): a per-version check of the Tested-on table (docs/supported-versions.md)"
    )
    config.addinivalue_line("markers", "alone: runs while no other test does (tests/machine.py)")
    config.pluginmanager.register(tested_on.Recorder(config), "tested-on")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[object]:
    """Each test, its fixtures' setup and teardown included, holds the machine (tests/machine.py):
    alone if marked so, else shared with the other worker's."""
    hold = machine.alone if item.get_closest_marker("alone") else machine.shared
    with hold(item.config.rootpath / ".pytest_cache" / "machine"):
        return (yield)


@pytest.fixture(scope="session")
def kafka_broker_factory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerPool]:
    pool = BrokerPool(tmp_path_factory.mktemp("kafka"))
    yield pool
    pool.stop_all()


# Session scope makes pytest run all tests of one parameter before the next, so brokers are not
# stopped and restarted between tests when three keys share two JVM slots.
@pytest.fixture(scope="session", params=list(BROKER_PARAMS.values()), ids=list(BROKER_PARAMS))
def broker(request: pytest.FixtureRequest, kafka_broker_factory: BrokerPool) -> KafkaBroker:
    return kafka_broker_factory(*request.param)


@pytest.fixture
def own_broker(kafka_broker_factory: BrokerPool, tmp_path: Path) -> Iterator[Callable[..., KafkaBroker]]:
    started: list[KafkaBroker] = []

    def start(**kwargs: Any) -> KafkaBroker:
        kwargs.setdefault("workdir", tmp_path / f"broker-{len(started)}")
        broker = KafkaBroker(**kwargs)
        kafka_broker_factory.make_room()
        kafka_broker_factory.own.append(broker)
        started.append(broker)
        broker.start()
        return broker

    yield start
    for broker in reversed(started):  # joined brokers first: they need the controller to shut down
        broker.stop()
        kafka_broker_factory.own.remove(broker)


# Hypothesis's per-example deadline (200 ms) measures the machine, not the property: on two shared
# cores a slow example fails a correct test. Properties are run without it.
settings.register_profile("no-deadline", deadline=None)
settings.load_profile("no-deadline")

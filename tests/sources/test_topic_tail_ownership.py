"""Which followed partitions the exporter's own broker leads (Ownership.here): their coordinator's
`succeeded` lines are in the broker log read, so only their appends can be timed on its clock."""

from __future__ import annotations

from types import SimpleNamespace

from exporter.sources.topic_tail.ownership import Ownership
from exporter.sources.topic_tail.topic import TOPIC


def metadata(leaders: dict[int, int], brokers: tuple[int, ...] = (1, 2)) -> SimpleNamespace:
    return SimpleNamespace(
        brokers={b: SimpleNamespace(id=b, host="127.0.0.1", port=9090 + b) for b in brokers},
        topics={
            TOPIC: SimpleNamespace(
                error=None, partitions={p: SimpleNamespace(leader=leader) for p, leader in leaders.items()}
            )
        },
    )


def test_with_a_broker_id_every_followed_partition_is_its_own() -> None:
    ownership = Ownership("127.0.0.1:9091", broker_id=1, all_partitions=False, refresh_seconds=30)
    assert ownership.owned(metadata({0: 1, 1: 2})) == {0}
    assert ownership.here(0)


def test_with_all_partitions_those_the_bootstrap_brokers_lead() -> None:
    ownership = Ownership("127.0.0.1:9091", broker_id=None, all_partitions=True, refresh_seconds=30)
    assert ownership.owned(metadata({0: 1, 1: 2})) == {0, 1}
    assert ownership.here(0) and not ownership.here(1)


def test_with_all_partitions_and_a_bootstrap_naming_no_one_broker_none() -> None:
    ownership = Ownership("127.0.0.1:9091,127.0.0.1:9092", broker_id=None, all_partitions=True, refresh_seconds=30)
    ownership.owned(metadata({0: 1, 1: 2}))
    assert not ownership.here(0) and not ownership.here(1)

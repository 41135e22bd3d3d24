"""The cluster users deploy the exporter beside, on loopback: three nodes (node 1 the KRaft controller
too, or the ZooKeeper mode's first broker), `__transaction_state` at production defaults (50
partitions, replication factor 3, min.insync.replicas 2, created once all three run), the offsets
topic replicated 3, and the logging deploy/ ships: the coordinator's lines in txn-coordinator.log,
server.log at INFO. The cost benches (bench/three_broker_cluster.py) and the failovers
(txn_workshop.failover) start it."""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from pathlib import Path
from typing import Literal

from txn_workshop.harness.admin import create_internal_topics
from txn_workshop.harness.broker import KafkaBroker
from txn_workshop.harness.versions import kafka_version

NODES = (1, 2, 3)
PROPERTIES = {
    "transaction.state.log.replication.factor": "3",
    "transaction.state.log.min.isr": "2",
    "offsets.topic.replication.factor": "3",
}
DEPLOY_LOGGING = Path(__file__).resolve().parents[3] / "deploy" / "broker-logging"
COORDINATOR_LOG = "txn-coordinator.log"


def start(
    version: str,
    root: Path,
    *,
    mode: Literal["kraft", "zookeeper"] = "kraft",
    jmx: bool = False,
    properties: Mapping[str, str] = PROPERTIES,
) -> list[KafkaBroker]:
    """The three nodes, started, their internal topics created; all stopped if one fails."""
    broker = partial(
        KafkaBroker,
        version,
        broker_properties=dict(properties),
        jmx=jmx,
        logging_config=DEPLOY_LOGGING / kafka_version(version).log4j_config,
        mode=mode,
    )
    first = broker(workdir=root / "1")
    # (The joined ones' internal topics are created below, once all three run: replication factor 3.)
    brokers = [first] + [
        broker(workdir=root / str(n), join=first, node_id=n, internal_topics_on_join=False) for n in NODES[1:]
    ]
    try:
        for node in brokers:
            node.start()
        create_internal_topics(bootstrap_of(brokers))
    except BaseException:
        stop(brokers)
        raise
    return brokers


def stop(brokers: list[KafkaBroker]) -> None:
    for broker in reversed(brokers):  # the joined brokers first: they need the controller to stop
        broker.stop()


def bootstrap_of(brokers: list[KafkaBroker]) -> str:
    return ",".join(broker.bootstrap_servers for broker in brokers)

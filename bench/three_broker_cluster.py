"""The three-broker KRaft cluster of bench/cluster_cost.py (txn_workshop.harness.deployment_shape, with
JMX and the paced load's data topic): its leadership read, transactional ids
spread over its coordinators, the requests each broker served, its coordinators' log level and the
bytes their log file grew by."""

from __future__ import annotations

import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

from bench.bare_consumer import TOPIC
from bench.exporter_process import TSM_LOGGER
from bench.txn_load import DATA_PARTITIONS, DATA_TOPIC
from txn_workshop.harness import deployment_shape
from txn_workshop.harness.deployment_shape import COORDINATOR_LOG, NODES

if TYPE_CHECKING:
    from txn_workshop.harness.broker import KafkaBroker

REQUESTS = "kafka.network:type=RequestMetrics,name=RequestsPerSec,*"


def start_cluster(version: str, root: Path) -> list[KafkaBroker]:
    """The deployment shape's three nodes, JMX on each, and the data topic (min.insync.replicas 2)."""
    from txn_workshop.harness.admin import alter_topic_config, create_topic

    brokers = deployment_shape.start(version, root, jmx=True)
    try:
        bootstrap = deployment_shape.bootstrap_of(brokers)
        create_topic(bootstrap, DATA_TOPIC, partitions=DATA_PARTITIONS, replication_factor=3)
        alter_topic_config(bootstrap, DATA_TOPIC, {"min.insync.replicas": "2"})
    except BaseException:
        deployment_shape.stop(brokers)
        raise
    return brokers


def leadership(bootstrap: str, timeout: float = 60) -> dict:
    """`__transaction_state`'s leader of each partition, once every partition has its 3 replicas in
    sync; the partitions each node leads and is the preferred leader of (first replica)."""
    from confluent_kafka.admin import AdminClient

    from txn_workshop.harness.admin import CLIENT_LOG

    admin = AdminClient({"bootstrap.servers": bootstrap}, **CLIENT_LOG)
    deadline = time.monotonic() + timeout
    while True:
        partitions = admin.list_topics(TOPIC, timeout=30).topics[TOPIC].partitions
        if all(len(p.isrs) == 3 and p.leader in NODES for p in partitions.values()) or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    return {
        "leaders": {p: meta.leader for p, meta in sorted(partitions.items())},
        "led": dict(sorted(Counter(meta.leader for meta in partitions.values()).items())),
        "preferred": dict(sorted(Counter(meta.replicas[0] for meta in partitions.values()).items())),
        "replicas": sorted({len(meta.replicas) for meta in partitions.values()}),
        "in_sync": sorted({len(meta.isrs) for meta in partitions.values()}),
    }


def balanced_prefix(rate: int, leaders: dict[int, int], processes: int, threads: int) -> tuple[str, dict[int, int]]:
    """A prefix for Load's transactional ids (it names them `{prefix}-{process}-{thread}`) that spreads
    them over the coordinators as evenly as can be, so each broker gets its share of the load; with the
    number of ids on each."""
    from txn_workshop.harness.workload import transaction_state_partition

    ids = processes * threads
    best: tuple[int, str, Counter[int]] | None = None
    for k in range(5000):
        prefix = f"c{rate}x{k}"
        counts = Counter(
            leaders[transaction_state_partition(f"{prefix}-{p}-{t}", len(leaders))]
            for p in range(processes)
            for t in range(threads)
        )
        spread = max(counts[n] for n in NODES) - min(counts[n] for n in NODES)
        if best is None or spread < best[0]:
            best = (spread, prefix, counts)
        if spread <= (ids % len(NODES) != 0):
            break
    assert best is not None
    return best[1], {n: best[2][n] for n in NODES}


def requests_served(brokers: list[KafkaBroker]) -> list[tuple[float, dict[str, float]]]:
    """Each broker's (time, request type -> requests served since its start, all versions), read at
    once with JmxTool."""
    from txn_workshop.harness import jmx

    def one(broker: KafkaBroker) -> tuple[float, dict[str, float]]:
        values = jmx.read(broker, REQUESTS)
        read_at = time.time()  # JmxTool reads at its end, after its JVM started
        counts: dict[str, float] = {}
        for name, count in values.items():
            request = jmx._property(name, "request")
            counts[request] = counts.get(request, 0.0) + count
        return read_at, counts

    with ThreadPoolExecutor(len(brokers)) as pool:
        return list(pool.map(one, brokers))


def set_coordinator_logs(brokers: list[KafkaBroker], level: str) -> None:
    """TransactionStateManager at `level` on every broker, at run time, as an operator would turn it
    (kafka-configs --entity-type broker-loggers), the three at once."""
    from txn_workshop.harness.workload import set_logger_level

    with ThreadPoolExecutor(len(brokers)) as pool:
        list(pool.map(lambda broker: set_logger_level(broker, TSM_LOGGER, level), brokers))


def coordinator_log(broker: KafkaBroker) -> Path:
    return broker.logs_dir / COORDINATOR_LOG


def coordinator_log_bytes(broker: KafkaBroker) -> int:
    """The bytes the coordinator's log files hold (rolled ones too: a roll keeps the sum)."""
    return sum(f.stat().st_size for f in broker.logs_dir.glob(COORDINATOR_LOG + "*"))

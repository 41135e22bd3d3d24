"""A stalled broker does not blind the cluster state (issue 31, item 4), on a real three-broker 4.4.0
cluster: broker 1 is the controller and the only replica of every `__transaction_state` partition (the
coordinator); `stall-held` lives on brokers 2 and 3 with min.insync.replicas=2. The cluster-state
source runs as beside broker 3 (its own broker, asked first), which is then SIGSTOPped: its TCP
connections stay open and nothing it is asked answers.

Both a source that had answers before the stop (it must get fresh ones, not show its cache) and one
made after it (no state cached, its client bootstrapping from a list that names broker 3 first) name
the coordinator (the leader of the `__transaction_state` partition) and find min.insync.replicas.
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from exporter.sources.cluster_state import ClusterStateSource
from tests.integration.test_diagnosis import CLIENT, three_brokers

TOPIC = "stall-held"
TRANSACTION_STATE = "__transaction_state"


def known(source: ClusterStateSource, since_ms: int) -> bool:
    """The coordinator of every `__transaction_state` partition and the topic's min.insync.replicas,
    answered at or after `since_ms`."""
    snap = source.lookup([TRANSACTION_STATE, TOPIC])
    metadata = snap.topics[TRANSACTION_STATE]
    min_isr = snap.min_insync_replicas[TOPIC]
    return (
        metadata.value is not None
        and (metadata.as_of_ms or 0) >= since_ms
        and metadata.problem is None
        and all(p.leader == 1 for p in metadata.value.partitions.values())
        and min_isr.value is not None
        and min_isr.value.value == 2
        and (min_isr.as_of_ms or 0) >= since_ms
        and min_isr.problem is None
    )


def wait(condition, timeout: float, what: str) -> float:
    started = time.monotonic()
    while not condition():
        assert time.monotonic() - started < timeout, f"timed out waiting for {what}"
        time.sleep(0.25)
    return time.monotonic() - started


@pytest.mark.timeout(300)
def test_the_own_broker_stalled_the_others_answer(kafka_broker_factory, tmp_path):
    with three_brokers(kafka_broker_factory, tmp_path, "4.4.0") as (first, second, third):
        admin = AdminClient({"bootstrap.servers": first.bootstrap_servers, **CLIENT})
        topic = NewTopic(TOPIC, 1, -1, replica_assignment=[[2, 3]], config={"min.insync.replicas": "2"})
        admin.create_topics([topic], operation_timeout=30)[TOPIC].result(60)
        producer = Producer({"bootstrap.servers": first.bootstrap_servers, "transactional.id": "stall", **CLIENT})
        producer.init_transactions(60)  # __transaction_state exists from here
        bootstrap = ",".join(b.bootstrap_servers for b in (third, first, second))

        def source() -> ClusterStateSource:
            # wait_seconds 0: lookups never wait, the test polls (each first look is answered in the background).
            return ClusterStateSource(bootstrap, own_broker=lambda: 3, wait_seconds=0.0, cache_seconds=1.0)

        before = source()
        after = None
        try:
            wait(lambda: known(before, 0), 60, "the first answers")
            assert before._admin._manager.asked[0] == 3  # the own broker is the one asked first
            third.pause()
            stopped_ms = int(time.time() * 1000)
            after = source()  # made after the stop: nothing cached
            took_after = wait(lambda: known(after, stopped_ms), 60, "a source made after the stop to know")
            took_before = wait(lambda: known(before, stopped_ms), 60, "the source from before to answer afresh")
            print(f"known {took_after:.1f} s after (new source), {took_before:.1f} s more (old source)")
            # The stalled broker was asked and skipped: it is asked last now (or not at all, once the
            # controller fenced it and the metadata no longer lists it).
            assert 3 in before._admin._manager.asked
            assert before._admin._manager.candidates()[0] != 3
        finally:
            third.resume()
            before.close()
            if after is not None:
                after.close()

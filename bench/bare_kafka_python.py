"""A bare kafka-python reader of `__transaction_state`: the floor of the other client (issue 29).

librdkafka sends no KIP-227 incremental fetch sessions: each of its fetch requests and responses
names every followed partition, which the broker parses, reads and answers whatever they bring.
kafka-python sends them (enable_incremental_fetch_sessions, on by default): after the first request
of a session, a fetch names no partition that did not change, and its response only those with
records or a moved high watermark. This reader follows the partitions one broker leads (or all), from
their end, with a fixed fetch pattern (`--min-bytes`, `--wait-ms`: the busy pattern's 1 MiB and the
resolution), and counts records and their receipt minus timestamp (ms), nothing else: what the
client itself costs beside a broker, and what the broker spends serving it, are measured by the
bench that runs it (bench/cluster_cost.py `--floor kafka-python`), as for the librdkafka floor.

`--hold-ms H` is the other pattern that meets a resolution of H: a fetch held until the first byte
(min bytes 1, `--wait-ms` at most), and polls at least H apart. kafka-python sends a fetch only
from a poll (the next one as soon as a poll has drained the last response), so at most one fetch
per H, and a record appended meanwhile waits at most H in the broker or the client: the fewest
fetches a client can send for that resolution (several records of one transaction in one fetch),
which librdkafka cannot (it fetches ahead of the application's polls; its pause and queue backoff
put partitions back one by one: exporter/sources/topic_tail/fetch_pattern.py).

Protocol (sidecar_cost's Bare's): prints READY once assigned; on SIGUSR1 prints a JSON snapshot
(records, polls, latency histogram since the last one); stops on SIGTERM.

    .venv/bin/python bench/bare_kafka_python.py --bootstrap 127.0.0.1:9092 --broker-id 1 --wait-ms 10
"""

from __future__ import annotations

import argparse
import json
import signal
import threading
import time

TOPIC = "__transaction_state"


def led_partitions(bootstrap: str, broker_id: int | None) -> list[int]:
    """The topic's partitions whose leader is `broker_id` (all when None), read with confluent-kafka's
    metadata (kafka-python's consumer names no partition's leader)."""
    from confluent_kafka.admin import AdminClient

    topic = AdminClient({"bootstrap.servers": bootstrap}).list_topics(TOPIC, timeout=30).topics[TOPIC]
    return sorted(p for p, meta in topic.partitions.items() if broker_id is None or meta.leader == broker_id)


def main() -> None:
    from kafka import KafkaConsumer

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--broker-id", type=int, help="follow the partitions this broker leads (default: all)")
    parser.add_argument("--min-bytes", type=int, default=1 << 20)
    parser.add_argument("--wait-ms", type=int, default=10)
    parser.add_argument("--no-sessions", action="store_true", help="full fetch requests, as librdkafka sends")
    parser.add_argument("--hold-ms", type=int, default=0, help="polls at least this far apart (min bytes 1 then)")
    args = parser.parse_args()
    hold = args.hold_ms / 1000
    consumer = KafkaConsumer(
        bootstrap_servers=args.bootstrap,
        group_id=None,
        enable_auto_commit=False,
        isolation_level="read_uncommitted",
        fetch_min_bytes=1 if hold else args.min_bytes,
        fetch_max_wait_ms=args.wait_ms,
        enable_incremental_fetch_sessions=not args.no_sessions,
    )
    from kafka import TopicPartition

    partitions = [TopicPartition(TOPIC, p) for p in led_partitions(args.bootstrap, args.broker_id)]
    consumer.assign(partitions)
    consumer.seek_to_end(*partitions)
    for tp in partitions:
        consumer.position(tp)
    snapshot = threading.Event()
    stop = threading.Event()
    signal.signal(signal.SIGUSR1, lambda *_: snapshot.set())
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    records = polls = 0
    latency: dict[int, int] = {}
    print("READY", flush=True)
    next_poll = 0.0
    while not stop.is_set():
        if hold:
            time.sleep(max(0.0, next_poll - time.monotonic()))
            next_poll = time.monotonic() + hold
        batches = consumer.poll(timeout_ms=200)
        if batches:
            received_ms = int(time.time() * 1000)
            polls += 1
            for messages in batches.values():
                for message in messages:
                    records += 1
                    ms = received_ms - message.timestamp
                    latency[ms] = latency.get(ms, 0) + 1
        if snapshot.is_set():
            snapshot.clear()
            print(json.dumps({"t": time.time(), "records": records, "polls": polls, "latency": latency}), flush=True)
            latency = {}
    consumer.close()


if __name__ == "__main__":
    main()

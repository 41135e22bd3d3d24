"""The floor of P4 (tests/integration/broker_truth.py): a bare confluent-kafka consumer of every
`__transaction_state` partition from its end, with the exporter's idle fetch settings and receipt
clock, in a process of its own; writes `partition offset received_ms` per record to OUT.

    python -m tests.integration.bare_reader BOOTSTRAP OUT
"""

from __future__ import annotations

import signal
import sys
import time

from confluent_kafka import OFFSET_END, Consumer, TopicPartition

from exporter.sources.topic_tail import fetch_pattern
from exporter.sources.topic_tail.topic import TOPIC

P4_RESOLUTION_MS = 10  # the exporter's --latency-resolution-ms in P4, whose idle fetch this reader's is


def main(bootstrap: str, out_path: str) -> None:
    settings = {**fetch_pattern.DEFAULT_SETTINGS, **fetch_pattern.idle_settings(P4_RESOLUTION_MS)}
    consumer = Consumer(
        {**settings, "bootstrap.servers": bootstrap, "group.id": "p4-floor", "enable.auto.commit": False}
    )
    partitions = consumer.list_topics(TOPIC, timeout=30).topics[TOPIC].partitions
    consumer.assign([TopicPartition(TOPIC, p, OFFSET_END) for p in partitions])
    stopping: list[int] = []
    signal.signal(signal.SIGTERM, lambda signum, _: stopping.append(signum))
    with open(out_path, "w") as out:
        print("READY", flush=True)
        while not stopping:
            first = consumer.poll(0.2)
            if first is None:
                continue
            messages = [first, *consumer.consume(999, 0)]
            received_ms = int(time.time() * 1000)
            out.writelines(f"{m.partition()} {m.offset()} {received_ms}\n" for m in messages if m.error() is None)
            out.flush()
    consumer.close()


if __name__ == "__main__":
    main(*sys.argv[1:])

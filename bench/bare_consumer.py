"""The bare consumer beside the exporter: every `__transaction_state` partition read with the
exporter's fetch settings and loop, counting records and nothing else (a `bench/sidecar_cost.py bare`
command); its fetch settings, the exporter's or those before issue 22; and the quantiles of its
latency histogram."""

from __future__ import annotations

import argparse
import json
import signal
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import cast

TOPIC = "__transaction_state"
# Where a `__transaction_state` value's TransactionStatus byte is, in both versions: after its int16
# version, int64 ProducerId, int16 ProducerEpoch and int32 TransactionTimeoutMs (exporter/codec/value.py).
_STATE_AT = struct.calcsize(">hqhi")
# The bare consumer is sidecar_cost.py's `bare` command (bare_main), whichever bench starts it.
_COMMAND = Path(__file__).with_name("sidecar_cost.py")


def bare_main(args: argparse.Namespace) -> None:
    """Every `__transaction_state` partition from its end, read as the exporter reads it and nothing
    more: the first record, then what is queued, the clock read after; with `--busy`, its fetch pattern
    too (an idle consumer, a busy one fetching every interval under load, the partitions moved between
    them at their next offsets, by the exporter's own rule). Counts records and their receipt -
    timestamp (ms); on SIGUSR1 prints a JSON snapshot. With `--nudge-ms N`, a third client asks the
    broker for a followed partition's high watermark every N ms meanwhile (a ListOffsets request):
    a broker completes a held fetch only when it next handles a request (docs/benchmarks.md, "The
    idle fetch's tail"), so this is what bounds the idle fetch's delay by N."""
    from confluent_kafka import OFFSET_END, Consumer, TopicPartition

    from exporter import defaults
    from exporter.codec.states import PREPARE_STATES
    from exporter.sources.topic_tail.fetch_pattern import IDLE_BELOW, nudge_for_ms
    from exporter.sources.topic_tail.topic import Fetched

    fetches = {"idle": 0, "busy": 0}
    stats = {"t": 0.0}

    def consumer(name: str, settings: dict) -> Consumer:
        def on_stats(text: str) -> None:
            doc = json.loads(text)
            stats["t"] = time.time()
            fetches[name] = sum(b["req"].get("Fetch", 0) for b in doc["brokers"].values())

        return Consumer(
            {
                **settings,
                "bootstrap.servers": args.bootstrap,
                "group.id": "bench-bare",
                "enable.auto.commit": False,
                "enable.auto.offset.store": False,
                "isolation.level": "read_uncommitted",
                "statistics.interval.ms": 1000,
                "stats_cb": on_stats,
            }
        )

    idle = consumer("idle", json.loads(args.settings))
    busy = consumer("busy", json.loads(args.busy)) if args.busy else None
    active = idle
    metadata = idle.list_topics(TOPIC, timeout=10).topics[TOPIC].partitions
    # (--broker-id: the partitions one broker leads, as the exporter beside it follows them)
    partitions = sorted(p for p, m in metadata.items() if args.broker_id is None or m.leader == args.broker_id)
    next_offset = dict.fromkeys(partitions, OFFSET_END)
    idle.assign([TopicPartition(TOPIC, p, OFFSET_END) for p in partitions])
    # --nudge-prepared-ms: the transactions whose COMPLETE_* is due -> (partition, until when, ms)
    prepared: dict[bytes | None, tuple[int, int]] = {}
    prepared_lock = threading.Lock()
    if args.nudge_ms or args.nudge_prepared_ms:
        nudger = consumer("nudge", {})

        def nudge_always() -> None:
            while True:
                nudger.get_watermark_offsets(TopicPartition(TOPIC, partitions[0]), timeout=1)
                time.sleep(args.nudge_ms / 1000)

        def nudge_when_due() -> None:
            while True:
                now_ms = int(time.time() * 1000)
                with prepared_lock:
                    for key, (_, until_ms) in list(prepared.items()):
                        if until_ms <= now_ms:
                            del prepared[key]
                    due = next(iter(prepared.values()), None)
                if due is not None and active is idle:
                    nudger.get_watermark_offsets(TopicPartition(TOPIC, due[0]), timeout=1)
                time.sleep(args.nudge_prepared_ms / 1000)

        threading.Thread(target=nudge_always if args.nudge_ms else nudge_when_due, daemon=True).start()
    interval = args.interval or defaults.LATENCY_RESOLUTION_MS
    busy_from = 1000 / interval
    idle_below = IDLE_BELOW * busy_from
    nudge_for = nudge_for_ms(interval)
    snapshot = threading.Event()
    stop = threading.Event()
    signal.signal(signal.SIGUSR1, lambda *_: snapshot.set())
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    records = polls = busy_seconds = switches = 0
    second_polls = second_records = 0
    next_second = time.monotonic() + 1
    latency: dict[int, int] = {}
    print("READY", flush=True)
    while not stop.is_set():
        first = active.poll(0.2)
        if first is not None:
            # (Typed as the tail types them: a message without error() has its partition and offset.)
            messages = cast(list[Fetched], [first, *active.consume(999, 0)])
            received_ms = int(time.time() * 1000)
            polls += 1
            second_polls += 1
            for message in messages:
                if message.error() is None:
                    records += 1
                    second_records += 1
                    next_offset[message.partition()] = message.offset() + 1
                    ms = received_ms - message.timestamp()[1]
                    latency[ms] = latency.get(ms, 0) + 1
                    if args.nudge_prepared_ms and active is idle:
                        value = message.value()
                        if value is not None and len(value) > _STATE_AT and value[_STATE_AT] in PREPARE_STATES:
                            with prepared_lock:
                                prepared[message.key()] = (message.partition(), received_ms + nudge_for)
                        elif prepared:
                            with prepared_lock:
                                prepared.pop(message.key(), None)
        now = time.monotonic()
        if busy is not None and now >= next_second:
            seconds = now - next_second + 1
            poll_rate, record_rate = second_polls / seconds, second_records / seconds
            second_polls = second_records = 0
            next_second = now + 1
            other = busy if active is idle else idle
            other.poll(0)
            if active is idle and poll_rate >= busy_from:
                target = busy
            elif active is busy and record_rate < idle_below:
                target = idle
            else:
                target = None
            if target is not None:
                active.unassign()
                target.assign([TopicPartition(TOPIC, p, o) for p, o in next_offset.items()])
                active = target
                switches += 1
            busy_seconds += active is busy
        if snapshot.is_set():
            snapshot.clear()
            print(
                json.dumps(
                    {
                        "t": time.time(),
                        "records": records,
                        "polls": polls,
                        "stats_t": stats["t"],
                        "fetches": fetches["idle"] + fetches["busy"],
                        "busy_seconds": busy_seconds,
                        "switches": switches,
                        "latency": latency,
                    }
                ),
                flush=True,
            )
            latency = {}
    idle.close()
    if busy is not None:
        busy.close()


class Bare:
    def __init__(
        self,
        bootstrap: str,
        pattern: dict,
        broker_id: int | None = None,
        nudge_ms: float | None = None,
        nudge_prepared_ms: float | None = None,
    ) -> None:
        busy = (
            ["--busy", json.dumps(pattern["busy"]), "--interval", str(pattern["interval_ms"])]
            if pattern["busy"]
            else []
        )
        self.proc = subprocess.Popen(
            [
                sys.executable,
                str(_COMMAND),
                "bare",
                "--bootstrap",
                bootstrap,
                "--settings",
                json.dumps(pattern["idle"]),
                *busy,
                *(["--broker-id", str(broker_id)] if broker_id is not None else []),
                *(["--nudge-ms", str(nudge_ms)] if nudge_ms else []),
                *(["--nudge-prepared-ms", str(nudge_prepared_ms)] if nudge_prepared_ms else []),
            ],
            stdout=subprocess.PIPE,
            text=True,
            stdin=subprocess.DEVNULL,
        )
        assert self.proc.stdout is not None  # (started with a pipe)
        self._stdout = self.proc.stdout
        assert self._stdout.readline().strip() == "READY"

    def snapshot(self) -> dict:
        self.proc.send_signal(signal.SIGUSR1)
        return json.loads(self._stdout.readline())

    def stop(self) -> None:
        from txn_workshop.harness.processes import terminate

        terminate(self.proc, 20)


# The fetch settings and loop of the exporter before issue 22: one consumer, a fetch answered at the
# first byte (held 100 ms at most), the receipt clock read at the first record of a poll.
BEFORE = {"fetch.wait.max.ms": 100, "fetch.min.bytes": 1, "fetch.queue.backoff.ms": 10}


def fetch_pattern(args: argparse.Namespace) -> dict:
    """The bare consumer's settings: the exporter's own (idle and busy), or those before issue 22."""
    from exporter.sources.topic_tail.fetch_pattern import BUSY_MIN_BYTES, DEFAULT_SETTINGS, idle_settings

    kafka_config = dict(kv.split("=", 1) for kv in args.kafka_config)
    if args.before:
        return {"idle": {**BEFORE, **kafka_config}, "busy": None, "interval_ms": None, "kafka_config": kafka_config}
    common = {**DEFAULT_SETTINGS, **kafka_config}
    return {
        "idle": {**common, **idle_settings(args.latency_resolution_ms)},
        "busy": {
            **common,
            "fetch.min.bytes": BUSY_MIN_BYTES,
            "fetch.wait.max.ms": args.latency_resolution_ms,
        },
        "interval_ms": args.latency_resolution_ms,
        "kafka_config": kafka_config,
    }


def histogram_quantiles(histogram: dict[int, int], qs=(0.5, 0.99, 0.999, 1.0)) -> dict[float, int]:
    total = sum(histogram.values())
    out, seen = {}, 0
    pending = list(qs)
    for value in sorted(histogram):
        seen += histogram[value]
        while pending and seen >= pending[0] * total:
            out[pending.pop(0)] = value
    return out

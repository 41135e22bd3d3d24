"""Our decode of a real broker's `__transaction_state` segments equals Kafka's own decoder
(DumpLogSegments --transaction-log-decoder) record by record, and what a consumer reads.

One broker per parameter (value v1 from 4.4.0 with TV2, v0 from 4.4.0 with TV0, v0 and 3.x from
3.9.2), with a workload that produces every state a broker writes and a short
transactional.id.expiration.ms so tombstones are written too.
"""

from __future__ import annotations

import json
import re
import time
from collections import Counter
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

from exporter.codec import TransactionLogRecord, TransactionState, decode_record
from exporter.codec.value import TAGGED_FIELDS
from exporter.commands.decode import format_record
from exporter.sources.segment_files import partition_of, read_segment
from tests.conftest import BROKER_PARAMS
from txn_workshop.harness.admin import create_topic
from txn_workshop.harness.broker import KafkaBroker
from txn_workshop.harness.transaction_log_dump import BY_DISPLAY_NAME
from txn_workshop.harness.workload import run_mix

PARTITIONS = 4
EXPIRATION = {
    "transactional.id.expiration.ms": "3000",
    "transaction.remove.expired.transaction.cleanup.interval.ms": "1000",
}
_RECORD_LINE = re.compile(r"^\| offset: (\d+) CreateTime: (-?\d+) .* key: (.*?) payload: (.*)$")
_V3_KEY = re.compile(r"^transaction_metadata::transactionalId=(.*)$")
_V3_PAYLOAD = re.compile(
    r"^producerId:(-?\d+),producerEpoch:(-?\d+),state=(\w+),partitions=\[(.*)\],"
    r"txnLastUpdateTimestamp=(-?\d+),txnTimeoutMs=(-?\d+)$"
)


@pytest.fixture(scope="module", params=list(BROKER_PARAMS.values()), ids=list(BROKER_PARAMS))
def quiet_broker_log(request, kafka_broker_factory, tmp_path_factory):
    """A broker that ran the workload until every id expired, then stopped: its files are final."""
    version, tv = request.param
    broker = KafkaBroker(
        version,
        tv,
        transaction_state_partitions=PARTITIONS,
        broker_properties=EXPIRATION,
        workdir=tmp_path_factory.mktemp(f"decode-{version}-tv{tv}"),
    )
    kafka_broker_factory.make_room()
    kafka_broker_factory.own.append(broker)
    broker.start()
    try:
        create_topic(broker.bootstrap_servers, "orders", partitions=3)
        result = run_mix(broker.bootstrap_servers, "orders", ["tx-a", "tx-b", "tx-c"], commits=2, aborts=1, timeouts=1)
        consumed = _wait_until_all_expired(broker.bootstrap_servers, {"tx-a", "tx-b", "tx-c"})
    finally:
        broker.stop()
        kafka_broker_factory.own.remove(broker)
    return broker, result, consumed


def _consume_all(bootstrap: str) -> dict[int, list[TransactionLogRecord]]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "test", "enable.auto.commit": False})
    try:
        tps = [TopicPartition("__transaction_state", p, OFFSET_BEGINNING) for p in range(PARTITIONS)]
        high = {tp.partition: consumer.get_watermark_offsets(tp, timeout=10)[1] for tp in tps}
        consumer.assign(tps)
        records: dict[int, list[TransactionLogRecord]] = {p: [] for p in range(PARTITIONS)}
        deadline = time.monotonic() + 30
        while any(records[p][-1].offset + 1 < high[p] if records[p] else high[p] > 0 for p in high):
            assert time.monotonic() < deadline, "consumer did not reach the high watermarks"
            for m in consumer.consume(500, 0.5):
                assert m.error() is None, m.error()
                records[m.partition()].append(decode_record(m.key(), m.value(), m.offset(), m.timestamp()[1]))
        return records
    finally:
        consumer.close()


def _wait_until_all_expired(bootstrap: str, tids: set[str]) -> dict[int, list[TransactionLogRecord]]:
    deadline = time.monotonic() + 60
    while True:
        consumed = _consume_all(bootstrap)
        last = {r.transactional_id: r for rs in consumed.values() for r in rs}
        if all(tid in last and last[tid].value is None for tid in tids):
            return consumed
        assert time.monotonic() < deadline, f"ids did not expire: { {t: last.get(t) for t in tids} }"
        time.sleep(1)


def _ours(broker) -> dict[tuple[int, int], TransactionLogRecord]:
    decoded = {}
    for segment in broker.transaction_state_segments():
        for item in read_segment(segment):
            assert isinstance(item, TransactionLogRecord), item
            decoded[(partition_of(segment), item.offset)] = item
    return decoded


def _kafkas(broker) -> dict[tuple[int, int], dict]:
    """DumpLogSegments' records, normalised to our JSON shape (the fields its version prints)."""
    out = broker.dump_transaction_log()
    parsed, partition = {}, None
    for line in out.splitlines():
        if line.startswith("Dumping "):
            partition = partition_of(Path(line.removeprefix("Dumping ").strip()))
            continue
        match = _RECORD_LINE.match(line)
        if match:
            offset, timestamp, key, payload = match.groups()
            parsed[(partition, int(offset))] = {"timestamp_ms": int(timestamp), **_parse(key, payload)}
    return parsed


def _parse(key: str, payload: str) -> dict:
    v3_key = _V3_KEY.match(key)
    if v3_key:
        tid = v3_key.group(1)
        if payload in ("<DELETE>", "null"):
            return {"transactional_id": tid, "value": None}
        pid, epoch, state, partitions, last_update, timeout = _V3_PAYLOAD.match(payload).groups()
        return {
            "transactional_id": tid,
            "value": {
                "producer_id": int(pid),
                "producer_epoch": int(epoch),
                "state": BY_DISPLAY_NAME[state],
                "topic_partitions": sorted(p for p in partitions.split(",") if p),
                "last_update_timestamp_ms": int(last_update),
                "transaction_timeout_ms": int(timeout),
            },
        }
    tid = json.loads(key)["data"]["transactionalId"]
    if payload in ("<DELETE>", "null"):
        return {"transactional_id": tid, "value": None}
    value = json.loads(payload)
    data = value["data"]
    partitions = data["transactionPartitions"]
    return {
        "transactional_id": tid,
        "value": {
            "version": int(value["version"]),
            "producer_id": data["producerId"],
            "producer_epoch": data["producerEpoch"],
            "transaction_timeout_ms": data["transactionTimeoutMs"],
            "state": TransactionState(data["transactionStatus"]).name,
            "partitions": None if partitions is None else {p["topic"]: p["partitionIds"] for p in partitions},
            "last_update_timestamp_ms": data["transactionLastUpdateTimestampMs"],
            "start_timestamp_ms": data["transactionStartTimestampMs"],
            # Tagged fields are printed only when set; absent means the default. Every one the codec
            # names, under Kafka's name (tests/codec/test_kafka_schema.py: the table's are Kafka's).
            **{f.name: data.get(_camel(f.name), f.default) for f in TAGGED_FIELDS},
        },
    }


def _camel(name: str) -> str:
    """A field's name as Kafka's JSON prints it: previous_producer_id, previousProducerId."""
    first, *rest = name.split("_")
    return first + "".join(word.capitalize() for word in rest)


def _as_kafka_prints(record: TransactionLogRecord, like: dict) -> dict:
    """Our record in the shape of Kafka's parsed line: the same fields, nothing more."""
    ours = json.loads(format_record(record))
    del ours["offset"]
    value = ours["value"]
    if value is not None and "topic_partitions" in like["value"]:  # 3.x: topic-partition set
        value["topic_partitions"] = sorted(f"{t}-{p}" for t, ids in (value["partitions"] or {}).items() for p in ids)
    if value is not None:
        ours["value"] = {k: value[k] for k in like["value"]}
    return ours


def test_decode_equals_dump_log_segments_record_by_record(quiet_broker_log):
    broker, _, _ = quiet_broker_log
    ours, kafkas = _ours(broker), _kafkas(broker)
    assert ours.keys() == kafkas.keys()
    for position, theirs in kafkas.items():
        assert _as_kafka_prints(ours[position], theirs) == theirs, position


def test_decode_equals_what_a_consumer_reads(quiet_broker_log):
    broker, _, consumed = quiet_broker_log
    ours = _ours(broker)
    from_consumer = {(p, r.offset): r for p, rs in consumed.items() for r in rs}
    assert from_consumer == ours


def test_the_workload_wrote_every_state_and_tombstones_in_the_expected_version(quiet_broker_log):
    broker, result, _ = quiet_broker_log
    records = list(_ours(broker).values())
    states = Counter(r.value.state.name if r.value else "TOMBSTONE" for r in records)
    assert {
        "EMPTY",
        "ONGOING",
        "PREPARE_COMMIT",
        "PREPARE_ABORT",
        "COMPLETE_COMMIT",
        "COMPLETE_ABORT",
        "TOMBSTONE",
    } <= set(states)
    assert states["PREPARE_COMMIT"] == states["COMPLETE_COMMIT"] == result.commits
    # Client aborts plus the coordinator's timeout aborts.
    assert states["PREPARE_ABORT"] == states["COMPLETE_ABORT"] == result.aborts + result.timeouts
    versions = {r.value.version for r in records if r.value}
    assert versions == ({1} if broker.transaction_version == 2 else {0})

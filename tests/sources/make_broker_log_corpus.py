"""Writes tests/sources/broker_log_corpus/<VERSION>.log: real coordinator log lines of a real broker.

    .venv/bin/python -m tests.sources.make_broker_log_corpus VERSION [VERSION ...]
    .venv/bin/python -m tests.sources.make_broker_log_corpus --zookeeper VERSION  # <VERSION>-zookeeper.log

On a two-broker cluster of the harness (broker 1 the coordinator, __transaction_state replicated on
both), the faults of tests/integration/test_broker_log_faults.py, each waited for in broker 1's log:

1. coordinator election (startup), then a commit whose markers are held back (a topic's
   min.insync.replicas 2 with its follower stopped): retriable NOT_ENOUGH_REPLICAS marker errors;
2. commits while `__transaction_state` appends fail (its min ISR 2, the follower stopped), with the
   state manager at INFO (mapped error only), then at DEBUG (the raw error line as well);
3. a commit whose markers land but whose final COMPLETE_COMMIT append fails: the retry queue;
4. a held commit to a topic deleted while its markers are retried: the coordinator skips the
   deleted partition, after an UNKNOWN_TOPIC_OR_PARTITION retry when a request races the deletion
   (3.6 to 4.4 retry that error; their permanent ones, INVALID_PRODUCER_EPOCH,
   TRANSACTION_COORDINATOR_FENCED and UNSUPPORTED_*, need a fenced coordinator or an old data broker);
5. resignation: a partition moved off broker 1, then broker 1 stopped while broker 2 runs.

With ``--zookeeper`` the cluster runs in ZooKeeper mode (KafkaBroker(mode="zookeeper"), 3.x only;
broker 1, started first, is its controller) and the capture is `<VERSION>-zookeeper.log`.

The excerpt keeps the log's first lines (startup, read by nothing) and every coordinator line with
its continuation lines, but at most `REPEATS` entries of one kind (the text with digits masked):
a held marker is retried thousands of times a second with the same line.

The expected parse (<VERSION>.expected.json) is written by `--expected` from the parser and must be
checked by hand before committing: tests/sources/test_broker_log_corpus.py also holds it to plain
counts of the lines.
"""

from __future__ import annotations

import argparse
import json
import re
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import Literal

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

from exporter.broker_log import BrokerLogParser
from exporter.codec.states import TransactionState
from txn_workshop.harness.admin import alter_topic_config, create_topic
from txn_workshop.harness.broker import KafkaBroker
from txn_workshop.harness.workload import commit_transactions, held_commit, reassign_partitions, set_logger_level

CORPUS = Path(__file__).parent / "broker_log_corpus"
STATE_TOPIC = "__transaction_state"
PARTITIONS = 4
STATE_MANAGER = "kafka.coordinator.transaction.TransactionStateManager"
HEAD = 30
REPEATS = 6
# The packages of every line the exporter reads (kafka.* up to 4.x, org.apache.kafka.* for moved
# classes), and the data broker's own append errors (with their exception lines) for context.
_KEEP = re.compile(r"\((kafka|org\.apache\.kafka)\.coordinator\.transaction\.\w+\)$|\(kafka\.server\.ReplicaManager\)$")
_DIGITS = re.compile(r"\d+")


def _wait_for_log(broker: KafkaBroker, pattern: str, start: int, timeout: float = 90) -> None:
    """Until a line matching ``pattern`` (a regex) is written after byte ``start`` of its log."""
    regex = re.compile(pattern.encode())
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with broker.server_log.open("rb") as f:
            f.seek(start)
            if regex.search(f.read()):
                return
        time.sleep(0.2)
    raise TimeoutError(f"no {pattern!r} in {broker.server_log} after {timeout:.0f} s")


def _producer(broker: KafkaBroker, tid: str) -> Producer:
    producer = Producer(
        {"bootstrap.servers": broker.bootstrap_servers, "transactional.id": tid, "transaction.timeout.ms": 120000}
    )
    producer.init_transactions(60)
    return producer


def _wait_replicated(first: KafkaBroker, replicas: list[int]) -> None:
    admin = AdminClient({"bootstrap.servers": first.bootstrap_servers})
    deadline = time.monotonic() + 120
    while True:
        partitions = admin.list_topics(STATE_TOPIC, timeout=30).topics[STATE_TOPIC].partitions.values()
        if all(sorted(p.isrs) == replicas and p.leader == 1 for p in partitions):
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"{STATE_TOPIC} not on brokers {replicas}")
        time.sleep(0.5)


def _commit_while_state_log_fails(first: KafkaBroker, second: KafkaBroker, tid: str, line: str) -> None:
    """A commit retried by the client while `__transaction_state` appends fail, until ``line`` is
    logged; then appends succeed again and the commit completes."""
    producer = _producer(first, tid)
    producer.begin_transaction()
    producer.produce("plain", b"x", partition=0)
    producer.flush(30)
    start = first.server_log.stat().st_size
    alter_topic_config(first.bootstrap_servers, STATE_TOPIC, {"min.insync.replicas": "2"})
    second.stop()
    committer = threading.Thread(target=producer.commit_transaction, args=(90,))
    committer.start()
    try:
        _wait_for_log(first, line, start)
    finally:
        alter_topic_config(first.bootstrap_servers, STATE_TOPIC, {"min.insync.replicas": "1"})
        committer.join(120)
        second.start()


@contextmanager
def _commit_held(first: KafkaBroker, second: KafkaBroker, topic: str, tid: str) -> Iterator[int]:
    """A commit whose markers to ``topic`` are held (its min.insync.replicas 2, ``second`` stopped)
    and have failed once; yields broker 1's log size before the commit. ``second`` restarts on exit."""
    producer = _producer(first, tid)
    producer.begin_transaction()
    producer.produce(topic, b"x", partition=0)
    producer.flush(30)
    alter_topic_config(first.bootstrap_servers, topic, {"min.insync.replicas": "2"})
    second.stop()
    try:
        start = first.server_log.stat().st_size
        producer.commit_transaction(60)  # PREPARE_COMMIT written; the markers are retried
        _wait_for_log(first, "has failed with error", start)
        yield start
    finally:
        second.start()


def corpus_name(version: str, mode: str = "kraft") -> str:
    """The corpus files' stem: the version, `-zookeeper` after it for a ZooKeeper-mode capture."""
    return version if mode == "kraft" else f"{version}-{mode}"


def run_scenario(version: str, root: Path, mode: Literal["kraft", "zookeeper"] = "kraft") -> Path:
    """Runs the faults on a fresh cluster of ``version`` in ``mode``; returns broker 1's server.log."""
    first = KafkaBroker(version, workdir=root / "1", transaction_state_partitions=PARTITIONS, mode=mode)
    second = KafkaBroker(version, workdir=root / "2", join=first, node_id=2, mode=mode)
    try:
        first.start()
        second.start()
        bootstrap = first.bootstrap_servers
        create_topic(bootstrap, "held", partitions=1, replication_factor=2)
        create_topic(bootstrap, "doomed", partitions=1, replication_factor=2)
        create_topic(bootstrap, "plain", partitions=1, replication_factor=1)
        reassign_partitions(first, {(STATE_TOPIC, p): [1, 2] for p in range(PARTITIONS)}, root / "replicate.json")
        _wait_replicated(first, [1, 2])

        start = first.server_log.stat().st_size
        with held_commit(bootstrap, second, "held", "cap-held"):
            _wait_for_log(first, "has failed with error", start)

        _commit_while_state_log_fails(first, second, "cap-info", "transition failed due to")
        set_logger_level(first, STATE_MANAGER, "DEBUG")
        try:
            _commit_while_state_log_fails(first, second, "cap-debug", "'s new metadata ")
        finally:
            set_logger_level(first, STATE_MANAGER, None)

        with _commit_held(first, second, "held", "cap-complete") as start:
            try:
                # Markers go through now, but the COMPLETE_COMMIT append fails: the retry queue.
                alter_topic_config(bootstrap, STATE_TOPIC, {"min.insync.replicas": "2"})
                alter_topic_config(bootstrap, "held", {"min.insync.replicas": "1"})
                _wait_for_log(first, "Not available to append", start)
            finally:
                alter_topic_config(bootstrap, STATE_TOPIC, {"min.insync.replicas": "1"})
        commit_transactions(bootstrap, "cap-wake", "plain", 1)  # wakes the marker sender: drains the queue

        with _commit_held(first, second, "doomed", "cap-doomed"):
            start = first.server_log.stat().st_size
            admin = AdminClient({"bootstrap.servers": bootstrap})  # kept: its futures need it alive
            admin.delete_topics(["doomed"])["doomed"].result(60)
            _wait_for_log(first, r"permanently failed.*doomed-0|doomed-0.*permanently failed|Set\(doomed-0\)", start)

        start = first.server_log.stat().st_size
        reassign_partitions(first, {(STATE_TOPIC, PARTITIONS - 1): [2]}, root / "move.json")
        _wait_for_log(first, f"Resigned as the txn coordinator for partition {PARTITIONS - 1}", start)
        first.stop()  # its other partitions' leadership moves to broker 2: resigned on become-follower
    finally:
        second.stop()
        first.stop()
    return first.server_log


def excerpt(lines: list[str]) -> list[str]:
    """The first HEAD lines, then each kept entry (with its continuation lines) up to REPEATS times
    per kind."""
    kept, seen = lines[:HEAD], Counter[str]()
    keep = False
    for line in lines[HEAD:]:
        if line.startswith("["):
            body = line[line.find("] ") + 2 :]
            kind = _DIGITS.sub("#", body)
            keep = bool(_KEEP.search(line)) and seen[kind] < REPEATS
            seen[kind] += 1
        if keep:
            kept.append(line)
    return kept


def as_json(event, line: int) -> dict:
    """One event of the parser as <VERSION>.expected.json lists it (also what the test compares)."""
    fields = asdict(event)
    fields.pop("seen_ms", None)  # when the line was read, not what it says
    if "target_state" in fields:
        fields["target_state"] = TransactionState(fields["target_state"]).name
    return {"line": line, "event": type(event).__name__, **fields}


def expected(path: Path) -> dict:
    """The parser's reading of the corpus, in the layout of <VERSION>.expected.json."""
    parser = BrokerLogParser()
    lines = path.read_bytes().split(b"\n")[:-1]
    events = [as_json(event, number) for number, line in enumerate(lines, 1) for event in parser.feed([line])]
    return {"lines": parser.lines, "malformed": parser.malformed, "unrecognized": parser.unrecognized, "events": events}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("versions", nargs="+", metavar="VERSION")
    parser.add_argument("--expected", action="store_true", help="also write <VERSION>.expected.json (check it!)")
    parser.add_argument("--zookeeper", action="store_true", help="a ZooKeeper-mode cluster: <VERSION>-zookeeper.*")
    args = parser.parse_args(argv)
    mode: Literal["kraft", "zookeeper"] = "zookeeper" if args.zookeeper else "kraft"
    for version in args.versions:
        name = corpus_name(version, mode)
        with tempfile.TemporaryDirectory(prefix=f"corpus-{name}-") as root:
            log = run_scenario(version, Path(root), mode)
            lines = log.read_text(errors="replace").splitlines()
        target, kept = CORPUS / f"{name}.log", excerpt(lines)
        target.write_text("".join(line + "\n" for line in kept))
        print(f"{target}: {len(kept)} of {len(lines)} lines", flush=True)
        if args.expected:
            (CORPUS / f"{name}.expected.json").write_text(json.dumps(expected(target), indent=1) + "\n")


if __name__ == "__main__":
    main()

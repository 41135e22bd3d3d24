"""Applications' transactions, as users run them: a Kafka Streams exactly_once_v2 application
(java/StreamsMapApp.java) and consume-transform-produce (a consumer in a group whose offsets the
producer sends to its transaction) from Kafka's Java client (java/ConsumeTransformProduce.java) and
from librdkafka (confluent-kafka, in a thread).

The Streams application runs on kafka-streams of the broker's version (its own classpath, resolved
from Maven Central with streams-pom.xml into the harness cache, as txn_workshop.harness.jars does for
the broker), compiled with `javac` as txn_workshop.harness.java_workload compiles its client.

The consume-transform-produce workloads hold one transaction open (records sent, offsets sent: the
group's `__consumer_offsets-N` partition is in it) until their context exits, with a known group id
(``CtpRun.group``) for a test to look for.
"""

from __future__ import annotations

import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from confluent_kafka import Consumer, KafkaException, Producer

from exporter.pipeline import maven
from txn_workshop.harness.java_workload import compiled_classes
from txn_workshop.harness.processes import die_with_parent, tail, terminate
from txn_workshop.harness.workload import CLIENT_LOG, transaction_state_partition

STREAMS_SOURCE = "StreamsMapApp.java"
CTP_SOURCE = "ConsumeTransformProduce.java"


class AppWorkloadError(RuntimeError):
    pass


def streams_libs(version: str) -> Path:
    """kafka-streams ``version``'s runtime classpath (with kafka-clients, RocksDB, slf4j-simple)."""
    home = maven.cache_root() / "kafka-streams" / version
    if not maven.cached(home):
        maven.resolve(
            home,
            resources.files(__package__) / "streams-pom.xml",
            [f"-Dkafka.version={version}"],
            f"Kafka Streams {version} jars",
            lambda jars: None if f"kafka-streams-{version}.jar" in jars else f"no kafka-streams-{version}.jar",
            {"kafka-streams": version},
            AppWorkloadError,
        )
    return home / "libs"


def consumer_offsets_partition(group: str, partitions: int) -> int:
    """The `__consumer_offsets` partition of a group: abs(Java String.hashCode) % partitions, as for
    a transactional id's `__transaction_state` partition."""
    return transaction_state_partition(group, partitions)


# -- Kafka Streams -------------------------------------------------------------------------------


class StreamsInstance:
    """One JVM of the Streams application (java/StreamsMapApp.java): ``threads`` stream threads,
    exactly_once_v2, its producers not lingering. ``stop()`` closes it (committing); ``kill()`` is
    SIGKILL. The output values are the input's with ``@<name>`` appended."""

    def __init__(
        self,
        version: str,
        bootstrap: str,
        application_id: str,
        input_topic: str,
        output_topic: str,
        name: str,
        workdir: Path,
        threads: int = 2,
        commit_interval_ms: int = 100,
        transaction_timeout_ms: int = 10000,
    ) -> None:
        self.name = name
        self.application_id = application_id
        self.log = workdir / f"streams-{name}.log"
        libs = streams_libs(version)
        classes = compiled_classes(version, STREAMS_SOURCE, libs)
        workdir.mkdir(parents=True, exist_ok=True)
        cmd = [
            "java",
            "-Xmx256m",
            "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
            "-cp",
            f"{classes}:{libs}/*",
            "StreamsMapApp",
            "--bootstrap",
            bootstrap,
            "--application-id",
            application_id,
            "--input",
            input_topic,
            "--output",
            output_topic,
            "--instance",
            name,
            "--state-dir",
            str(workdir / f"state-{name}"),
            "--threads",
            str(threads),
            "--commit-interval-ms",
            str(commit_interval_ms),
            "--transaction-timeout-ms",
            str(transaction_timeout_ms),
        ]
        self.states: list[str] = []
        self.thread_names: list[str] = []
        self._changed = threading.Condition()
        with self.log.open("ab") as stderr:
            self._proc = subprocess.Popen(
                cmd,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=stderr,
                text=True,
                preexec_fn=die_with_parent,
            )
        self._reader = threading.Thread(target=self._follow, name=f"streams-{name}", daemon=True)
        self._reader.start()

    def _follow(self) -> None:
        assert self._proc.stdout is not None
        for line in self._proc.stdout:
            kind, _, value = line.rstrip("\n").partition("\t")
            with self._changed:
                if kind == "state":
                    self.states.append(value)
                elif kind == "threads":
                    self.thread_names = value.split(",")
                self._changed.notify_all()

    @property
    def transactional_ids(self) -> list[str]:
        """Its threads' transactional ids (exactly_once_v2: `<application id>-<process id>-<n>`)."""
        return [n.replace("-StreamThread-", "-") for n in self.thread_names]

    def wait_running(self, timeout: float = 120) -> None:
        """Until RUNNING with its threads known (the first RUNNING after start)."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while not self.thread_names:
                if self._proc.poll() is not None:
                    raise AppWorkloadError(f"Streams instance {self.name} exited:\n{tail(self.log)}")
                if time.monotonic() > deadline:
                    raise AppWorkloadError(f"Streams instance {self.name} not running after {timeout} s: {self.states}")
                self._changed.wait(0.5)

    def wait_rebalanced(self, since: int, timeout: float = 120) -> None:
        """Until a RUNNING state after the ``since``-th state change (a rebalance passed)."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while "RUNNING" not in self.states[since:] or self.states[-1] != "RUNNING":
                if time.monotonic() > deadline:
                    raise AppWorkloadError(f"Streams instance {self.name} did not rebalance: {self.states}")
                self._changed.wait(0.5)

    def kill(self) -> None:
        """SIGKILL (nothing if it has exited)."""
        if self._proc.poll() is not None:
            return
        self._proc.send_signal(signal.SIGKILL)
        self._proc.wait(10)

    def stop(self, timeout: float = 60) -> None:
        if self._proc.poll() is not None:
            return
        assert self._proc.stdin is not None
        self._proc.stdin.close()
        try:
            self._proc.wait(timeout)
        except subprocess.TimeoutExpired:
            terminate(self._proc, 10)
            raise AppWorkloadError(f"Streams instance {self.name} not closed {timeout} s after the stop") from None


@contextmanager
def feeding(bootstrap: str, topic: str, per_second: float = 100) -> Iterator[list[int]]:
    """Plain (non-transactional) records to ``topic`` at about ``per_second``, keys spread over its
    partitions, until exit; yields the live count of records sent."""
    sent = [0]
    stop = threading.Event()
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, **CLIENT_LOG})

    def run() -> None:
        n = 0
        while not stop.is_set():
            producer.produce(topic, key=str(n).encode(), value=f"in-{n}".encode())
            producer.poll(0)
            n += 1
            sent[0] = n
            stop.wait(1 / per_second)
        producer.flush(30)

    thread = threading.Thread(target=run, name="feeder", daemon=True)
    thread.start()
    try:
        yield sent
    finally:
        stop.set()
        thread.join(60)


def read_uncommitted_consumer(bootstrap: str, topic: str) -> Consumer:
    """A consumer of ``topic`` from its end that sees records of open transactions."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"watch-{topic}-{time.monotonic_ns()}",
            "isolation.level": "read_uncommitted",
            "auto.offset.reset": "latest",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 10,
            **CLIENT_LOG,
        }
    )
    consumer.subscribe([topic])
    return consumer


# -- consume-transform-produce -------------------------------------------------------------------


@dataclass
class CtpRun:
    """A consume-transform-produce run: its group and transactional id, the transactions it
    committed, and whether its held transaction is open now."""

    group: str
    transactional_id: str
    commits: int = 0
    open: bool = False
    aborts: int = 0
    _opened: threading.Event = field(default_factory=threading.Event, repr=False)

    def wait_open(self, timeout: float = 120) -> None:
        if not self._opened.wait(timeout):
            raise AppWorkloadError(f"{self.transactional_id}: no transaction held open after {timeout} s")


@contextmanager
def java_ctp_held(
    version: str,
    bootstrap: str,
    group: str,
    transactional_id: str,
    input_topic: str,
    output_topic: str,
    log: Path,
    transactions: int = 3,
    timeout: float = 120,
) -> Iterator[CtpRun]:
    """Kafka's Java client (``version``'s kafka-clients): ``transactions`` consume-transform-produce
    transactions committed, then one held open (records and offsets sent) until exit, then aborted.
    Yields once the held one is open. ``input_topic`` must have records enough (one poll each)."""
    cmd = [
        "java",
        "-Xmx256m",
        "-cp",
        f"{compiled_classes(version, CTP_SOURCE)}:{_kafka_libs(version)}/*",
        "ConsumeTransformProduce",
        "--bootstrap",
        bootstrap,
        "--group",
        group,
        "--transactional-id",
        transactional_id,
        "--input",
        input_topic,
        "--output",
        output_topic,
        "--transactions",
        str(transactions),
        "--hold-open",
        "true",
    ]
    run = CtpRun(group, transactional_id)
    with log.open("ab") as stderr:
        proc = subprocess.Popen(
            cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, text=True, preexec_fn=die_with_parent
        )

    def follow() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            kind = line.split("\t", 1)[0]
            if kind == "commit":
                run.commits += 1
            elif kind == "open":
                run.open = True
                run._opened.set()
            elif kind == "abort":
                run.open = False
                run.aborts += 1

    reader = threading.Thread(target=follow, name="java-ctp", daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + timeout
        while not run._opened.wait(0.5):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise AppWorkloadError(f"Java consume-transform-produce held nothing open:\n{tail(log)}")
        yield run
    except BaseException:
        terminate(proc, 10)
        raise
    assert proc.stdin is not None
    proc.stdin.close()
    try:
        proc.wait(60)
    finally:
        reader.join(10)
    if proc.returncode != 0:
        raise AppWorkloadError(f"Java consume-transform-produce failed (exit {proc.returncode}):\n{tail(log)}")


def _kafka_libs(version: str) -> Path:
    from txn_workshop.harness.jars import kafka_libs

    return kafka_libs(version)


@contextmanager
def librdkafka_ctp_held(
    bootstrap: str,
    group: str,
    transactional_id: str,
    input_topic: str,
    output_topic: str,
    transactions: int = 3,
    timeout: float = 120,
) -> Iterator[CtpRun]:
    """The same as java_ctp_held, from librdkafka (confluent-kafka) in a thread:
    send_offsets_to_transaction with the consumer's positions and group metadata."""
    run = CtpRun(group, transactional_id)
    release = threading.Event()
    failed: list[BaseException] = []
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            **CLIENT_LOG,
        }
    )
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id, **CLIENT_LOG})

    def one(commit: bool) -> None:
        deadline = time.monotonic() + timeout
        while True:
            records = [m for m in consumer.consume(5, 0.2) if m.error() is None]
            if records:
                break
            if time.monotonic() > deadline:
                raise AppWorkloadError(f"{transactional_id}: no input records in {timeout} s")
        producer.begin_transaction()
        for m in records:
            producer.produce(output_topic, key=m.key(), value=(m.value() or b"").upper())
        producer.flush(30)
        # The consumer's positions (the next offsets to read), as confluent-kafka's EOS example sends.
        offsets = consumer.position(consumer.assignment())
        producer.send_offsets_to_transaction(offsets, consumer.consumer_group_metadata(), 30)
        if commit:
            producer.commit_transaction(30)
            run.commits += 1
        else:
            run.open = True
            run._opened.set()
            release.wait()
            producer.abort_transaction(30)
            run.open = False
            run.aborts += 1

    def work() -> None:
        try:
            producer.init_transactions(30)
            consumer.subscribe([input_topic])
            for _ in range(transactions):
                one(commit=True)
            one(commit=False)
        except (KafkaException, AppWorkloadError) as e:
            failed.append(e)
            run._opened.set()

    thread = threading.Thread(target=work, name="librdkafka-ctp", daemon=True)
    thread.start()
    try:
        run.wait_open(timeout)
        if failed:
            raise AppWorkloadError(f"librdkafka consume-transform-produce failed: {failed[0]}")
        yield run
    finally:
        release.set()
        thread.join(60)
        consumer.close()
        producer.flush(10)
    if failed:
        raise AppWorkloadError(f"librdkafka consume-transform-produce failed: {failed[0]}")

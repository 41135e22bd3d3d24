"""Transactions from Kafka's own Java client (the kafka-clients of the broker's version), beside the
librdkafka producers of txn_workshop.harness.workload: against a 4.x broker whose `transaction.version`
is 2, kafka-clients 4.x runs KIP-890 part 2 (its records carry ClientTransactionVersion 2, and the
epoch is bumped at every transaction's end), which librdkafka does not.

The client is java/TransactionalProducers.java, compiled with the machine's `javac` against the
version's jars (txn_workshop.harness.jars) and cached in the harness cache, keyed by version and source
hash. Kafka's own tools do not fit: ProducerPerformance (kafka-producer-perf-test.sh
--transactional-id --transaction-duration-ms) and TransactionalMessageCopier each drive one producer
of one transactional id per JVM (the first never aborts, the second copies from an input topic
through a consumer group), so many ids would take as many JVMs; this runs them all in one.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

from exporter.pipeline import maven
from exporter.pipeline.maven import cache_root
from txn_workshop.harness.jars import kafka_libs
from txn_workshop.harness.workload import TxnCounts, WorkloadResult

if TYPE_CHECKING:
    from txn_workshop.harness.broker import KafkaBroker

SOURCE = "TransactionalProducers.java"
MAIN_CLASS = "TransactionalProducers"


class JavaWorkloadError(RuntimeError):
    pass


def compiled_classes(version: str) -> Path:
    """The directory of the compiled client for ``version``'s kafka-clients; compiled once (atomically,
    as exporter.pipeline.maven caches jars), then served from the cache."""
    source = resources.files(__package__) / "java" / SOURCE
    digest = hashlib.sha256(source.read_bytes()).hexdigest()[:16]
    home = cache_root() / "java-workload" / f"{version}-{digest}"
    if maven.cached(home):
        return home / "classes"
    javac = shutil.which("javac")
    if javac is None:
        raise JavaWorkloadError(
            "`javac` is not on PATH: the Java transactional workload needs a JDK 17+ "
            "(apt-get install openjdk-17-jdk-headless)"
        )
    libs = kafka_libs(version)
    home.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{home.name}-", dir=home.parent))
    try:
        proc = subprocess.run(
            [javac, "-nowarn", "-cp", f"{libs}/*", "-d", str(tmp / "classes"), str(source)],
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
        )
        if proc.returncode != 0:
            raise JavaWorkloadError(f"javac failed on {source} against Kafka {version}:\n{proc.stderr[-4000:]}")
        (tmp / maven.MARKER).write_text(f"{version} {digest}\n")
        try:
            tmp.rename(home)
        except OSError:
            if not maven.cached(home):  # else another process compiled it first
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return home / "classes"


def java_transactions(
    broker: KafkaBroker,
    topic: str,
    ids: Sequence[str],
    transactions: int | None = None,
    duration_s: float | None = None,
    abort_every: int = 0,
    messages_per_txn: int = 1,
    timeout: float | None = 600,
) -> WorkloadResult:
    """One Java transactional producer per id, all at once (a thread each, one JVM): init once, then
    begin / send ``messages_per_txn`` records / commit, aborting every ``abort_every``-th transaction
    (0: none), until ``transactions`` per id or ``duration_s`` (the first reached; at least one each).
    The client is the broker version's kafka-clients. Raises JavaWorkloadError if any producer failed;
    ``timeout`` (seconds, None: none) bounds the whole run."""
    if transactions is None and duration_s is None:
        raise ValueError("java_transactions needs transactions or duration_s")
    if not ids or any("," in tid or not tid for tid in ids):
        raise ValueError(f"transactional ids must be non-empty and without commas: {list(ids)}")
    classes = compiled_classes(broker.version)
    cmd = [
        "java",
        "-Xmx256m",
        "-cp",
        f"{classes}:{kafka_libs(broker.version)}/*",
        MAIN_CLASS,
        "--bootstrap",
        broker.bootstrap_servers,
        "--topic",
        topic,
        "--ids",
        ",".join(ids),
        "--abort-every",
        str(abort_every),
        "--messages",
        str(messages_per_txn),
        *(["--transactions", str(transactions)] if transactions is not None else []),
        *(["--duration-ms", str(round(duration_s * 1000))] if duration_s is not None else []),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    if proc.returncode != 0:
        raise JavaWorkloadError(f"Java transactional producers failed (exit {proc.returncode}):\n{proc.stderr[-4000:]}")
    result = WorkloadResult(topic, messages_per_txn)
    for line in proc.stdout.splitlines():
        tid, commits, aborts = line.split("\t")
        result.per_id[tid] = TxnCounts(int(commits), int(aborts))
    if result.per_id.keys() != set(ids):
        raise JavaWorkloadError(f"Java transactional producers reported {sorted(result.per_id)}, not {sorted(ids)}")
    return result

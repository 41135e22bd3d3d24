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
import threading
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

from exporter.pipeline import maven
from exporter.pipeline.maven import cache_root
from txn_workshop.harness.jars import kafka_libs
from txn_workshop.harness.processes import die_with_parent, tail, terminate
from txn_workshop.harness.workload import RunningCounts, TxnCounts, WorkloadResult

if TYPE_CHECKING:
    from txn_workshop.harness.broker import KafkaBroker

SOURCE = "TransactionalProducers.java"
MAIN_CLASS = "TransactionalProducers"


class JavaWorkloadError(RuntimeError):
    pass


def compiled_classes(version: str, source_name: str = SOURCE, libs: Path | None = None) -> Path:
    """The directory of the compiled client for ``version``'s kafka-clients; compiled once (atomically,
    as exporter.pipeline.maven caches jars), then served from the cache. ``source_name``: another
    source of java/ (txn_workshop.harness.app_workloads), compiled against ``libs`` (default: the
    version's Kafka jars)."""
    source = resources.files(__package__) / "java" / source_name
    digest = hashlib.sha256(source.read_bytes()).hexdigest()[:16]
    name = f"{version}-{digest}" if source_name == SOURCE else f"{version}-{Path(source_name).stem}-{digest}"
    home = cache_root() / "java-workload" / name
    if maven.cached(home):
        return home / "classes"
    javac = shutil.which("javac")
    if javac is None:
        raise JavaWorkloadError(
            "`javac` is not on PATH: the Java transactional workload needs a JDK 17+ "
            "(apt-get install openjdk-17-jdk-headless)"
        )
    libs = kafka_libs(version) if libs is None else libs
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
            # javac's first errors are the cause (a missing package), the last ones follow from them.
            raise JavaWorkloadError(f"javac failed on {source} against Kafka {version}:\n{proc.stderr[:4000]}")
        (tmp / maven.MARKER).write_text(f"{version} {digest}\n")
        try:
            tmp.rename(home)
        except OSError:
            if not maven.cached(home):  # else another process compiled it first
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return home / "classes"


def _command(
    version: str,
    bootstrap: str,
    topic: str,
    ids: Sequence[str],
    abort_every: int,
    messages_per_txn: int,
    *options: str,
) -> list[str]:
    if not ids or any("," in tid or not tid for tid in ids):
        raise ValueError(f"transactional ids must be non-empty and without commas: {list(ids)}")
    return [
        "java",
        "-Xmx256m",
        "-cp",
        f"{compiled_classes(version)}:{kafka_libs(version)}/*",
        MAIN_CLASS,
        "--bootstrap",
        bootstrap,
        "--topic",
        topic,
        "--ids",
        ",".join(ids),
        "--abort-every",
        str(abort_every),
        "--messages",
        str(messages_per_txn),
        *options,
    ]


def _event(line: str) -> tuple[str, str, str]:
    """One line of the client's stdout (see TransactionalProducers.java): (kind, id, error name)."""
    kind, *fields = line.rstrip("\n").split("\t")
    if kind not in ("commit", "abort", "producer", "error") or len(fields) != 1 + (kind == "error"):
        raise JavaWorkloadError(f"Java transactional producers printed {line!r}")
    return kind, fields[0], fields[1] if kind == "error" else ""


def _events(lines: Iterable[str]) -> Iterator[tuple[str, str, str]]:
    for line in lines:
        yield _event(line)


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
    The client is the broker version's kafka-clients. Raises JavaWorkloadError if any producer failed
    (its first error ends it: the outcomes are exact); ``timeout`` (seconds, None: none) bounds the run."""
    if transactions is None and duration_s is None:
        raise ValueError("java_transactions needs transactions or duration_s")
    cmd = _command(
        broker.version,
        broker.bootstrap_servers,
        topic,
        ids,
        abort_every,
        messages_per_txn,
        *(["--transactions", str(transactions)] if transactions is not None else []),
        *(["--duration-ms", str(round(duration_s * 1000))] if duration_s is not None else []),
    )
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    if proc.returncode != 0:
        raise JavaWorkloadError(f"Java transactional producers failed (exit {proc.returncode}):\n{proc.stderr[-4000:]}")
    result = WorkloadResult(topic, messages_per_txn)
    for tid in ids:
        result.per_id[tid] = TxnCounts()
    for kind, tid, _ in _events(proc.stdout.splitlines()):
        if kind == "commit":
            result.per_id[tid].commits += 1
        elif kind == "abort":
            result.per_id[tid].aborts += 1
    return result


@contextmanager
def java_transactions_running(
    version: str,
    bootstrap: str,
    topic: str,
    ids: Sequence[str],
    log: Path,
    abort_every: int = 3,
    messages_per_txn: int = 2,
    pause_s: float = 0.05,
    stop_timeout: float = 600,
) -> Iterator[RunningCounts]:
    """Java transactions back to back (one producer and thread per id, one JVM; every
    ``abort_every``-th aborted) until exit, riding out broker restarts and coordinator moves as
    txn_workshop.harness.workload.transactions_running does for librdkafka: a timed-out call is
    called again, a fatal error (fenced...) re-creates the producer (whose init fences and aborts
    what the old one left open), any other error aborts the transaction; no error ends a producer.
    On exit every id is settled: a last initTransactions returns only once no transaction of it is
    open or has markers pending. The counts are live (the client prints each event as it happens);
    errors are counted by the Java exception's class name (the client's log, with each error, is
    ``log``). ``version``: whose kafka-clients (any 4.x runs TV2 against a TV2 cluster). Raises
    JavaWorkloadError on exit if the client failed."""
    counts = RunningCounts()
    lock = threading.Lock()
    cmd = _command(
        version,
        bootstrap,
        topic,
        ids,
        abort_every,
        messages_per_txn,
        "--until-stdin-closes",
        "true",
        "--ride-out",
        "true",
        "--pause-ms",
        str(round(pause_s * 1000)),
    )
    with log.open("ab") as stderr:
        proc = subprocess.Popen(
            cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, text=True, preexec_fn=die_with_parent
        )
    problems: list[JavaWorkloadError] = []

    def follow() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:  # read to the end whatever comes: a full pipe would stall the client
            try:
                kind, _, name = _event(line)
            except JavaWorkloadError as e:
                problems.append(e)
                continue
            with lock:
                if kind == "commit":
                    counts.commits += 1
                elif kind == "abort":
                    counts.aborts += 1
                elif kind == "producer":
                    counts.producers += 1
                else:
                    counts.errors[name] += 1

    reader = threading.Thread(target=follow, name="java-workload-events", daemon=True)
    reader.start()
    try:
        yield counts
    except BaseException:
        terminate(proc, 10)
        raise
    assert proc.stdin is not None
    proc.stdin.close()  # the producers finish the transaction in hand, settle their ids and exit
    try:
        proc.wait(stop_timeout)
    except subprocess.TimeoutExpired:
        terminate(proc, 10)
        raise JavaWorkloadError(f"Java transactional producers not done {stop_timeout} s after the stop") from None
    finally:
        reader.join(10)
    if problems:
        raise problems[0]
    if proc.returncode != 0:
        raise JavaWorkloadError(f"Java transactional producers failed (exit {proc.returncode}):\n{tail(log)}")

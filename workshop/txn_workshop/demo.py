"""`txn-exporter demo`: a local Kafka cluster, a transactional workload, and the exporter, live.

Two brokers from the harness (the second one makes it possible to hold markers back: see
txn_workshop.harness.workload.hold_markers), a workload that commits, aborts and lets producers time
out, and after every FREE_SECONDS of that holds the markers of two transactions back (a client's
commit and the coordinator's abort of a timed-out producer) until both are pending, then for
HOLD_SECONDS more, and the exporter serving /metrics. Kafka's tools that the transactions view
names run from the cached jars through scripts the demo writes into its work dir (bin/). A summary of what the numbers say is printed every few seconds until
Ctrl-C or --duration. The brokers' data and logs (each file rolls over by size: a hold's marker
retries write megabytes a second) live in a temporary directory, removed on exit unless
--keep-work-dir.

It runs as deploy/ recommends: the brokers log with deploy/broker-logging/'s loggers (demo_logging/),
the coordinator's TransactionStateManager at DEBUG in a file of its own, and the exporter follows that
file, so every append is timed on the coordinator's own clock. Broker 1 is the coordinator of every
transactional id: the harness makes `__transaction_state` there before broker 2 joins, and broker 2
is the one each hold stops, so no hold moves a coordinator.

Ctrl-C (or SIGTERM) stops everything, brokers included, at any moment, a hold included (within 3 s:
bench/demo_stop.py). The main thread only waits for it, or for the end; the demo's own thread starts
the brokers and runs the rest. Whatever that thread or the workload's is doing then is left where it
is: both brokers are closed at once (SIGKILL after BROKER_STOP_SECONDS; a start under way launches
no JVM after that: KafkaBroker.close), the work dir is removed, and the process leaves.
"""

from __future__ import annotations

import argparse
import itertools
import logging
import math
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable
from importlib import resources
from pathlib import Path

from prometheus_client import CollectorRegistry

from exporter import config, defaults, logs
from exporter.app import Exporter
from exporter.codec.states import IN_FLIGHT_STATES, PREPARE_STATES
from exporter.http_server import ListenError, MetricsServer
from txn_workshop.harness.admin import create_topic
from txn_workshop.harness.broker import KafkaBroker, KafkaBrokerError
from txn_workshop.harness.jars import (
    DEFAULT_KAFKA_VERSION,
    KAFKA_VERSIONS,
    TOOL_SCRIPTS,
    KafkaJarsError,
    kafka_libs,
    tool_scripts,
    tools_libs,
    tools_version,
)
from txn_workshop.harness.versions import kafka_version
from txn_workshop.harness.workload import held_commit, run_mix, timed_out_producer

TOPIC = "demo-orders"
# Free flow for FREE_SECONDS (from the start, then from broker 2's return after each hold), then a
# hold of HOLD_SECONDS from the moment both held transactions are pending.
FREE_SECONDS = 10
HOLD_SECONDS = 20
# The held abort's producer: its records are written before the hold (nothing is, during it), and
# the coordinator aborts its transaction when this timeout runs out, by then inside the hold.
HELD_TIMEOUT_MS = 8000
# Where the demo's exporter listens by default: `txn-exporter transactions`' default exporter too, so
# the banner's command needs no --url there.
LISTEN = f"127.0.0.1:{defaults.PORT}"
# On Ctrl-C both brokers get SIGTERM at once, and SIGKILL if still there after this long: broker 2
# alone waits for its controlled shutdown (3 s here), the two at once were gone in 0.6-0.75 s. A kill
# costs nothing here: their data is thrown away, their logs are written line by line.
BROKER_STOP_SECONDS = 1.0
# The coordinator's lines, in the file deploy/broker-logging/ gives them (demo_logging/ has its loggers).
COORDINATOR_LOG = "txn-coordinator.log"
log = logging.getLogger("txn_exporter.demo")


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "demo",
        help="a local Kafka cluster, a transactional workload and the exporter",
        description="Start two local Kafka brokers (from the pinned jars), a transactional workload "
        f"(commits, aborts, timed-out producers, and after every {FREE_SECONDS} s of those, the markers of "
        f"two transactions held back until both are pending, then for {HOLD_SECONDS} s more), and the exporter; "
        "print where to look and what the numbers mean. Stops everything on Ctrl-C or after --duration.",
    )
    parser.add_argument(
        "--listen",
        default=LISTEN,
        type=_listen,
        metavar="HOST:PORT",
        help="where /metrics is served (default: %(default)s)",
    )
    parser.add_argument(
        "--duration", type=float, default=None, metavar="SECONDS", help="stop after this long (default: until Ctrl-C)"
    )
    parser.add_argument(
        "--kafka-version",
        choices=KAFKA_VERSIONS,
        default=DEFAULT_KAFKA_VERSION,
        help="the Kafka version of the brokers (default: %(default)s)",
    )
    parser.add_argument(
        "--keep-work-dir",
        action="store_true",
        help="keep the brokers' data and logs (a temporary directory) after the demo; by default it is removed",
    )
    parser.set_defaults(func=run)


def _listen(value: str) -> str:
    try:
        config.split_listen(value)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    return value


def run(args: argparse.Namespace) -> int:
    # Checked before anything starts: a port in use must not cost two broker starts and a traceback.
    problem = _preflight(args)
    if problem:
        print(f"txn-exporter demo: {problem}", file=sys.stderr)
        return 2
    # Warnings only, repeats collapsed: stopping the second broker to hold markers back makes every
    # client complain about it at each reconnect attempt, which is expected here.
    logs.configure("WARNING")
    # kafka-python (the hanging-transaction scan) logs each connection the stopped broker drops at
    # ERROR, three lines a time; here that is the demo working, not news. So are the workload's
    # producers retrying through a hold (GETPID ... concurrent operation ... retrying).
    logging.getLogger("kafka.net").setLevel(logging.CRITICAL)
    logging.getLogger("librdkafka.harness").setLevel(logging.ERROR)
    workdir = Path(tempfile.mkdtemp(prefix="txn-exporter-demo-"))
    kept = "kept" if args.keep_work_dir else "removed on exit; --keep-work-dir keeps it"
    print(f"Starting two Kafka {args.kafka_version} brokers (data and logs in {workdir}, {kept}) ...", flush=True)
    demo = _Demo(args, workdir)
    # As in exporter.commands.run: a signal may be taken by any thread, and Python runs its handler
    # in this one; this thread sleeps in a read of the wakeup fd, which the C handler writes to
    # wherever it ran, and so does the demo's thread when it ends.
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_write, False)
    signal.set_wakeup_fd(wake_write, warn_on_full_buffer=False)
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: demo.stop.set())
    thread = threading.Thread(target=demo.run, args=(wake_write,), name="demo", daemon=True)
    thread.start()
    os.read(wake_read, 1)
    code = demo.shut_down()
    logs.flush()
    sys.stdout.flush()
    sys.stderr.flush()
    if threading.active_count() > 1:
        # A thread is still inside a Kafka client's call to a broker now gone (the workload's, the
        # exporter's): the interpreter's exit would wait for them, or crash under librdkafka's threads
        # (as exporter.commands.run says). Everything the demo started is stopped and flushed.
        os._exit(code)
    return code


class _Demo:
    """The demo's parts, started by its own thread (run) and stopped by the main thread (shut_down)."""

    def __init__(self, args: argparse.Namespace, workdir: Path) -> None:
        self.args = args
        self.workdir = workdir
        self.stop = threading.Event()
        name = kafka_version(args.kafka_version).log4j_config
        logging_config = Path(str(resources.files(__package__) / "demo_logging" / name))
        self.first = KafkaBroker(args.kafka_version, workdir=workdir / "broker-1", logging_config=logging_config)
        self.second = KafkaBroker(
            args.kafka_version, workdir=workdir / "broker-2", join=self.first, node_id=2, logging_config=logging_config
        )
        self.exporter: Exporter | None = None
        self.code = 0
        self.failure: BaseException | None = None  # what ended the demo's thread, unless stopped first

    def run(self, wake: int) -> None:
        """The demo's thread: everything until Ctrl-C or --duration; then wakes the main thread."""
        try:
            self._run()
        except BaseException as e:  # reported by shut_down, in the main thread
            if not self.stop.is_set():  # else a consequence of the stop (a broker closed under it)
                self.failure = e
        finally:
            try:
                os.write(wake, b"\0")
            except BlockingIOError:  # the pipe is full: the main thread is awake already
                pass

    def _run(self) -> None:
        self.first.start()
        self.second.start()
        create_topic(self.first.bootstrap_servers, TOPIC, partitions=3, replication_factor=2)
        coordinator_log = self.first.logs_dir / COORDINATOR_LOG
        settings = config.Settings(
            bootstrap_servers=self.first.bootstrap_servers,
            all_partitions=True,
            listen=self.args.listen,
            metadata_refresh_seconds=5,
            # The coordinator's own lines: each append timed on its clock, marker retries while markers
            # are held back, append errors. Broker 1 is the coordinator of every transactional id
            # (see the docstring), so its file holds the lines of every append.
            broker_log=[str(coordinator_log)],
            broker_log_from_start=True,
            # Late and stuck after 5 s past a transaction's own timeout (not 5 min): a timed-out
            # producer's held abort shows as stuck, with its diagnosis, within one hold.
            late_transaction_padding_seconds=5,
        )
        exporter = self.exporter = Exporter(settings)
        try:
            exporter.start()
        except ListenError as e:  # taken since the preflight check
            print(f"txn-exporter demo: {e}", file=sys.stderr)
            self.code = 2
            return
        tools = tool_scripts(self.workdir / "bin", self.args.kafka_version)
        _explain(
            exporter.server.url,
            self.first.bootstrap_servers,
            self.second.bootstrap_servers,
            tools,
            self.args.kafka_version,
            coordinator_log,
        )
        threading.Thread(target=exporter.serve, args=(self.stop,), name="exporter", daemon=True).start()
        workload = (self.first.bootstrap_servers, self.second, exporter, self.stop)
        threading.Thread(target=_workload, args=workload, name="workload", daemon=True).start()
        deadline = math.inf if self.args.duration is None else time.monotonic() + self.args.duration
        while not self.stop.wait(min(5.0, max(0.0, deadline - time.monotonic()))):
            if time.monotonic() >= deadline:
                return
            _summary(exporter)

    def shut_down(self) -> int:
        """Stops everything, whatever the demo's thread and the workload's are doing; the exit code."""
        self.stop.set()
        print("Stopping the workload, the exporter and the brokers ...", flush=True)
        # From here on the clients' warnings are this stop's (brokers going away under them): not news.
        logging.disable(logging.WARNING)
        closing = [
            threading.Thread(target=broker.close, args=(BROKER_STOP_SECONDS,), name=f"close-{broker.node_id}")
            for broker in (self.first, self.second)
        ]
        for thread in closing:
            thread.start()
        if self.exporter is not None:
            self.exporter.stop()
        for thread in closing:
            thread.join()
        keep = self.args.keep_work_dir
        code = self.code
        if isinstance(self.failure, KafkaBrokerError):  # its message quotes the broker's log: kept to read whole
            print(f"txn-exporter demo: {self.failure}", file=sys.stderr)
            keep, code = True, 1
        elif self.failure is not None:  # a bug: its traceback
            traceback.print_exception(self.failure)
            code = 1
        if keep:
            print(f"Brokers' data and logs kept in {self.workdir}", flush=True)
        else:
            shutil.rmtree(self.workdir, ignore_errors=True)
        return code


def _preflight(args: argparse.Namespace) -> str | None:
    """What would stop the demo midway, found before it starts anything: the port, Java, the jars."""
    host, port = config.split_listen(args.listen)
    probe = MetricsServer(host, port, CollectorRegistry(), healthy=lambda: True, ready=lambda: False)
    try:
        probe.start()
    except ListenError as e:
        return f"{e} (--listen HOST:PORT picks another)"
    probe.stop()
    if shutil.which("java") is None:
        return "Java 17+ is needed for the Kafka brokers (apt-get install openjdk-17-jre-headless)"
    try:
        kafka_libs(args.kafka_version)  # resolved from Maven Central once, then cached
        tools_libs(args.kafka_version)  # the tools' classpath: another version's for some (versions.py)
    except KafkaJarsError as e:
        return str(e)
    return None


def _workload(bootstrap: str, follower: KafkaBroker, exporter: Exporter, stop: threading.Event) -> None:
    """Rounds of commits and aborts, a producer timing out every 3rd round; after every FREE_SECONDS
    of those, a hold (see _held_transactions)."""
    try:
        free_until = time.monotonic() + FREE_SECONDS
        for round_ in itertools.count(1):
            if stop.is_set():
                return
            run_mix(bootstrap, TOPIC, [f"demo-{i}" for i in range(4)], commits=3, aborts=1, seed=round_)
            if round_ % 3 == 0:
                timed_out_producer(bootstrap, "demo-timeout", TOPIC, transaction_timeout_ms=3000, wait=False)
            if time.monotonic() >= free_until:
                _held_transactions(bootstrap, follower, exporter, stop)
                free_until = time.monotonic() + FREE_SECONDS
    except Exception:  # the demo's brokers are going away under it at shutdown
        if not stop.is_set():
            log.exception("workload stopped")


def _held_transactions(bootstrap: str, follower: KafkaBroker, exporter: Exporter, stop: threading.Event) -> None:
    """Two transactions whose markers are held back for HOLD_SECONDS: demo-held's commit, and the
    coordinator's abort of demo-held-timeout's transaction, timed out inside the hold. Each message
    is printed once what it says is so: the hold's once the exporter sees what is pending, the
    release's before the markers are released (a summary showing 0 pending comes after it)."""
    # Nothing else in flight (a timed-out transaction of the rounds is aborted within seconds), so
    # the hold holds these two only: as the exporter sees it once it has read what the rounds
    # appended, which on the coordinator's clock it does within its freshness (twice that: a busy
    # machine). Asked at once, a round's timed-out producer could still be unseen, and held too.
    if stop.wait(2 * exporter.settings.freshness_seconds):
        return
    _wait(stop, lambda: _in_flight(exporter) == 0, 30)
    timed_out_producer(bootstrap, "demo-held-timeout", TOPIC, transaction_timeout_ms=HELD_TIMEOUT_MS, wait=False)
    with held_commit(bootstrap, follower, TOPIC, "demo-held"):
        _wait(stop, lambda: _pending(exporter) >= 2, HELD_TIMEOUT_MS / 1000 + 30)
        pending = _pending(exporter)
        held = (
            "demo-held's commit and the coordinator's abort of demo-held-timeout (timed out)"
            if pending >= 2
            else "demo-held's commit"
        )
        if stop.is_set():
            return
        print(
            f"... holding the markers of {held} back for {HOLD_SECONDS} s more (the oldest pending for "
            f"{_oldest_age(exporter):.0f} s already): pending markers {pending}, marker retries climbing",
            flush=True,
        )
        if stop.wait(HOLD_SECONDS):
            return
        print(
            f"... releasing the held markers (the oldest held {_oldest_age(exporter):.0f} s): pending markers "
            "drop back to 0 within seconds",
            flush=True,
        )


def _wait(stop: threading.Event, condition: Callable[[], bool], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not condition() and time.monotonic() < deadline and not stop.wait(0.2):
        pass


def _pending(exporter: Exporter) -> int:
    return exporter.model.snapshot(int(time.time() * 1000), 0, lambda: None)[0].pending_markers


def _oldest_age(exporter: Exporter) -> float:
    """Seconds the oldest transaction waiting for its markers has waited, as the exporter sees it now."""
    now_ms = int(time.time() * 1000)
    oldest = exporter.model.snapshot(now_ms, 0, lambda: None)[0].oldest_prepare_ms
    return 0.0 if oldest is None else max(0.0, (now_ms - oldest) / 1000)


def _in_flight(exporter: Exporter) -> int:
    """Transactions ONGOING or PREPARE_*, as the exporter sees them now."""
    by_state = exporter.model.snapshot(int(time.time() * 1000), 0, lambda: None)[0].transactions_by_state
    return sum(by_state[state] for state in IN_FLIGHT_STATES)


def _explain(
    url: str, bootstrap: str, held_broker: str, tools: Path, kafka_version: str, coordinator_log: Path
) -> None:
    base = url.removesuffix("/metrics")
    command = "txn-exporter transactions" + ("" if base == f"http://{LISTEN}" else f" --url {base}")
    libs = str(tools_libs(kafka_version)).replace(str(Path.home()), "~", 1)
    print(
        f"""
kafka-txn-exporter demo
  metrics:  {url}   (readiness: {base}/readyz)
  transactions: {base}/transactions   (which ones are in flight or stuck; a page in a browser)
      in a terminal: {command}
  kafka:    {bootstrap}

Kafka's tools that the transactions page's commands name:
  {", ".join(TOOL_SCRIPTS)}.
  The demo installs no Kafka distribution; its scripts run Kafka {tools_version(kafka_version)}'s tools from the cached jars
  ({libs}). They are in {tools}
  (removed with the work dir). In another terminal:
      export PATH="{tools}:$PATH"
      kafka-transactions.sh --bootstrap-server {bootstrap} list

What to look at:
  kafka_transaction_state_log_append_latency_seconds{{target_state}}  how long the coordinator's appends
      to __transaction_state took, on the coordinator's own clock (below)
  kafka_transactions_with_pending_markers      transactions prepared whose commit/abort markers are not
      all written yet; kafka_transaction_pending_markers_oldest_age_seconds: how long the oldest waits
  kafka_transaction_marker_completion_seconds{{result}}  prepare -> complete
  kafka_transactions{{state}}                   transactional ids by their current state
  kafka_transactions_stuck_in_prepare          PREPARE_* longer than their own timeout + 5 s (the demo's
      padding): the transactions page says why each one is stuck and what to run
  kafka_transaction_marker_retries_total{{error}}  WriteTxnMarkers retried (from the coordinator's log file).
      Kafka retries markers without backoff: a partition that answers with a retriable error goes
      straight back on the coordinator's queue and is resent as soon as the answer is in (one
      request in flight per broker), so each hold counts thousands of retries a second.

The clock: every append latency here is the coordinator's own, exact to the ms
(txn_exporter_append_latency_clock_info{{clock="coordinator"}} is 1), as deploy/ recommends: both
brokers log the coordinator's TransactionStateManager at DEBUG, a line as each append succeeds, in a
file of its own (deploy/broker-logging/), and the exporter follows it (--broker-log) on broker 1, the
coordinator of every transactional id here (all of __transaction_state is there; broker 2 is the one
each hold stops):
      {coordinator_log}
Without those lines the exporter times each record when it reaches it: an upper bound, not the append.

The workload: commits and aborts of 4 transactional ids, a producer timing out every 3rd round; after
every {FREE_SECONDS} s of that, the markers of two transactions are held back (broker 2 stopped: their
WriteTxnMarkers fail with NOT_ENOUGH_REPLICAS, and Kafka retries them): a commit, then the
coordinator's abort of a producer that times out {HELD_TIMEOUT_MS // 1000} s later; once both are pending,
{HOLD_SECONDS} s more, so the oldest waits longer than {HOLD_SECONDS} s (each hold line says how long).
At each hold the exporter warns, on stderr, that broker 2 is gone; that is the hold, not a fault:
  WARNING exporter.sources.topic_tail: cannot connect to Kafka broker 2 at {held_broker}: connection refused ...
Each summary line: totals since the start, then what is true now; p99 ... of N: N samples in the window
(with fewer than 100, the p99 is about their maximum).
Ctrl-C stops everything.
""",
        flush=True,
    )


def _summary(exporter: Exporter) -> None:
    """One line: running totals since the exporter started (appends, marker retries), then what is
    true now (pending markers, the oldest one's age). p99: the exporter's sliding quantile window."""
    now_ms = int(time.time() * 1000)
    states = [state.name for state in PREPARE_STATES]
    recorders = [exporter.recorders.append_latency[state] for state in PREPARE_STATES]
    model, snapshots = exporter.model.snapshot(now_ms, 0, lambda: [r.snapshot(now_ms, (0.99,)) for r in recorders])
    now = f"pending markers {model.pending_markers}"
    if model.pending_markers and model.oldest_prepare_ms is not None:
        now += f", the oldest for {max(0.0, (now_ms - model.oldest_prepare_ms) / 1000):.1f} s"
    appends = ", ".join(f"{state} {s.cumulative_buckets[-1]}" for state, s in zip(states, snapshots, strict=True))
    # Beside each p99, the samples it is of: under 100 it is their maximum, or nearly.
    p99 = ", ".join(f"{_ms(s.quantiles[0])} of {s.window_count}" for s in snapshots)
    window = _duration(exporter.settings.latency_window_seconds)
    print(
        f"[{time.strftime('%H:%M:%S')}] since start: appends {appends} (p99 of the last {window}: {p99}), "
        f"marker retries {sum(model.marker_retries.values())} | now: {now}",
        flush=True,
    )


def _ms(seconds: float) -> str:
    return "-" if math.isnan(seconds) else f"{seconds * 1000:.0f} ms"


def _duration(seconds: float) -> str:
    return f"{seconds / 60:g} min" if seconds >= 60 and seconds % 60 == 0 else f"{seconds:g} s"

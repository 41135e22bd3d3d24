"""The composition root: one exporter process's source, model, sinks and HTTP server, wired.

`txn-exporter run` (exporter.commands.run) and the workshop's demo both build an exporter here.
One thread polls the `__transaction_state` tail and applies its events to the model (holding the
model's lock once per polled batch); with --broker-log, another follows the broker's log files the
same way and, on a coordinator elected/resigned line, asks the tail to re-read partition ownership at
once (and hands it the epochs its broker was elected in: exporter.sources.topic_tail's counting.py); with a hanging-scan interval, a third runs the scan. The HTTP server's threads render the
model at scrape time, and the transactions view, which asks the cluster-state source
(exporter.sources.cluster_state: cached, bounded in time, its own threads) about the stuck rows it
shows.
"""

from __future__ import annotations

import logging
import socket
import ssl
import threading
import time
from collections.abc import Sequence

from prometheus_client import CollectorRegistry, GCCollector, PlatformCollector, ProcessCollector

from exporter import config
from exporter.contracts.events import BrokerLogStats, CoordinatorChanged, HangingScanCompleted, TransitionAppended
from exporter.http_server import MetricsServer
from exporter.metrics import otlp
from exporter.metrics.prometheus import TransactionCollector
from exporter.metrics.recorders import LatencyRecorders
from exporter.model import CoordinatorModel
from exporter.sources import peer_exporters
from exporter.sources.broker_log_tail import BrokerLogFollower
from exporter.sources.cluster_state import ClusterStateSource
from exporter.sources.consumer_groups import ConsumerGroupsSource
from exporter.sources.file_watch import FileWatch
from exporter.sources.kafka_admin import import_kafka_python
from exporter.sources.topic_tail import TransactionLogTail
from exporter.view import endpoint

log = logging.getLogger("txn_exporter")
# The broker log is read when its file changes (exporter.sources.file_watch), at most every
# BROKER_LOG_POLL_SECONDS after a read that brought an event (a failed append, a marker retry, a
# coordinator change); after one that did not, that least wait doubles up to
# BROKER_LOG_QUIET_POLL_SECONDS. Growth alone does not count: at DEBUG, which --broker-log needs, the
# coordinator writes a line for every transition it appends, and reading them 10 times a second cost
# 3.0 ms of CPU a second at 200 transactions/s, 2 of them the reads' own (docs/benchmarks.md, "The
# broker log's reads"). An event is then counted up to a second after its line is written. Where the
# file's changes cannot be watched, it is read after each such wait, changed or not; watched, at least
# every BROKER_LOG_WATCHED_POLL_SECONDS.
BROKER_LOG_POLL_SECONDS = 0.1
BROKER_LOG_QUIET_POLL_SECONDS = 1.0
BROKER_LOG_WATCHED_POLL_SECONDS = 5.0
# On Ctrl-C or SIGTERM, how long a thread still inside a Kafka request (a metadata request, the
# hanging scan's client connecting) is waited for before the process exits without it.
STOP_GRACE_SECONDS = 1.0


class Exporter:
    """The source, the model and the HTTP server of one exporter process."""

    def __init__(self, settings: config.Settings) -> None:
        self.settings = settings
        self.recorders = LatencyRecorders(window_seconds=settings.latency_window_seconds)
        push = settings.otlp_endpoint is not None or otlp.enabled_by_environment()
        exponential = (
            otlp.ExponentialRecorders(self.recorders) if push and settings.otlp_histogram == "exponential" else None
        )
        self.model = CoordinatorModel(
            exponential.sinks() if exponential else self.recorders.sinks(),
            coordinator_log=bool(settings.broker_log),
            all_partitions=settings.all_partitions,
        )
        self.registry = CollectorRegistry(auto_describe=True)
        collector = TransactionCollector(
            self.model,
            self.recorders,
            late_padding_seconds=settings.late_transaction_padding_seconds,
            http_rejected_connections=lambda: self.server.rejected_connections,
        )
        self.registry.register(collector)
        # The process's own cost (process_cpu_seconds_total, process_resident_memory_bytes...), the
        # Python runtime's and its garbage collector's, as the client library's default registry has
        # them: the exporter's CPU and memory are watched where its other metrics are (the dashboards'
        # "the exporter itself" rows, TxnExporterCpuHigh), not only from outside.
        ProcessCollector(registry=self.registry)
        PlatformCollector(registry=self.registry)
        GCCollector(registry=self.registry)
        self.pusher = (
            otlp.OtlpPusher(collector, settings.otlp_endpoint, exponential, settings.otlp_interval_seconds)
            if push
            else None
        )
        self.tail = TransactionLogTail(
            settings.bootstrap_servers,
            broker_id=settings.broker_id,
            all_partitions=settings.all_partitions,
            metadata_refresh_seconds=settings.metadata_refresh_seconds,
            kafka_settings=settings.kafka,
            latency_resolution_ms=settings.latency_resolution_ms,
            freshness_ms=int(settings.freshness_seconds * 1000),
        )
        self.broker_logs = [
            BrokerLogFollower(path, from_start=settings.broker_log_from_start) for path in settings.broker_log
        ]
        host, port = config.listen_address(settings)
        # Its requests go to the exporter's own broker first (exporter.sources.kafka_admin).
        self.cluster_state = ClusterStateSource(
            settings.bootstrap_servers, settings.kafka, own_broker=lambda: self.tail.broker_id
        )
        # The consumer groups pending on the rows' __consumer_offsets partitions, routed the same way.
        self.consumer_groups = ConsumerGroupsSource(
            settings.bootstrap_servers, settings.kafka, own_broker=lambda: self.tail.broker_id
        )
        peers = None
        if settings.peers:
            peers = peer_exporters.Peers(
                settings.peers,
                endpoint.PATH,
                settings.peer_timeout_seconds,
                ssl.create_default_context(cafile=settings.peer_ca_file),
                plain_http_listener=lambda: self.server.web is None or not self.server.web.tls,
            )
        name = _own_name(host, port)
        scheme = "https" if settings.web_config is not None and settings.web_config.tls else "http"
        transactions = endpoint.TransactionsEndpoint(
            self.model,
            settings.late_transaction_padding_seconds,
            settings.bootstrap_servers,
            bool(settings.broker_log),
            broker_id=lambda: self.tail.broker_id,
            peers=peers,
            name=name,
            url=f"{scheme}://{name}",
            cluster_state=self.cluster_state.lookup,
            # With --all-partitions the exporter's broker coordinates only some of its rows.
            coordinator=lambda: None if settings.all_partitions else self.tail.broker_id,
            consumer_groups=self.consumer_groups.lookup,
        )
        self.server = MetricsServer(
            host,
            port,
            self.registry,
            healthy=lambda: True,
            ready=self.ready,
            readiness_detail=self.readiness,
            web_config_file=settings.web_config,
            routes={endpoint.PATH: transactions},
        )
        self._polling = False  # serve()'s loop is running (and using the consumer)

    def start(self) -> None:
        import_kafka_python()  # before any thread that uses it starts (see there)
        self.server.start()
        if self.pusher is not None:
            log.info(
                "pushing metrics by OTLP to %s every %g s",
                otlp.describe(self.settings.otlp_endpoint),
                self.settings.otlp_interval_seconds,
            )
            self.pusher.start()

    def serve(self, stop: threading.Event) -> None:
        """Polls the sources and feeds the model until `stop` is set."""
        threads = []
        watch = FileWatch(broker_log.path for broker_log in self.broker_logs) if self.broker_logs else None
        if watch is not None:
            threads.append(
                threading.Thread(target=self.follow_broker_logs, args=(stop, watch), name="broker-log", daemon=True)
            )
        if self.settings.hanging_scan_interval_seconds > 0:
            threads.append(threading.Thread(target=self.scan_hanging, args=(stop,), name="hanging-scan", daemon=True))
        for thread in threads:
            thread.start()
        self._polling = True
        # The cluster-state client connects ahead of the first diagnosis, once Kafka has answered the
        # tail: before that it would only log the same connection failures again.
        connect_cluster_state = True
        next_tick = 0.0
        try:
            while not stop.is_set():
                events = self.tail.poll()
                now = time.time()
                if events or now >= next_tick:  # (a tick counts the records and lines that waited in vain)
                    next_tick = now + 1.0
                    self.model.apply_batch(events, int(now * 1000))
                if self.broker_logs:
                    self.tail.fetch_for_freshness(self.model.coordinator_clock())
                if connect_cluster_state and self.tail.not_ready is None:
                    connect_cluster_state = False
                    self.cluster_state.start()
        finally:
            self._polling = False
            stop.set()
            if watch is not None:
                watch.wake()
            for thread in threads:
                thread.join(STOP_GRACE_SECONDS)  # a scan still connecting is a daemon: left behind
            if watch is not None and not any(thread.is_alive() for thread in threads):
                watch.close()

    def scan_hanging(self, stop: threading.Event) -> None:
        """Every hanging_scan_interval_seconds, one bounded round of exporter.sources.hanging_scan over the
        data partitions this broker leads (all of them with --all-partitions), until `stop` is set."""
        # kafka-python (the scan's client) is imported only when a scan is configured.
        from exporter.sources.hanging_scan import HangingScanner

        settings = self.settings
        # The first round waits for the replay, at most one interval: a round holds the GIL too,
        # and readiness waits on the replay alone.
        deadline = time.monotonic() + settings.hanging_scan_interval_seconds
        while not self.ready() and time.monotonic() < deadline:
            if stop.wait(0.1):
                return
        scanner = None
        failing = False
        while not stop.is_set():
            try:
                if scanner is None:
                    broker_id = None if settings.all_partitions else self.tail.broker_id
                    if broker_id is None and not settings.all_partitions:
                        # The topic source has not discovered the broker id yet.
                        if stop.wait(1.0):
                            break
                        continue
                    scanner = HangingScanner(
                        settings.bootstrap_servers,
                        broker_id,
                        int(settings.hanging_max_transaction_timeout_seconds * 1000),
                        int(settings.late_transaction_padding_seconds * 1000),
                        settings.hanging_scan_max_partitions,
                        settings.kafka,
                    )
                self.model.apply_batch(scanner.scan().events)
                failing = False
            except Exception as e:  # a failed round is counted; the next one tries again
                if not failing:
                    log.warning("hanging-transaction scan failed: %s", e)
                failing = True
                self.model.apply_batch([HangingScanCompleted(0, 0, 0, ok=False)])
            if stop.wait(settings.hanging_scan_interval_seconds):
                break
        if scanner is not None:
            scanner.close()

    def follow_broker_logs(self, stop: threading.Event, watch: FileWatch) -> None:
        """Reads the broker log files when they change, at most every BROKER_LOG_POLL_SECONDS, less
        often while they bring no event (up to BROKER_LOG_QUIET_POLL_SECONDS), until `stop` is set."""
        failing: set[int] = set()  # followers whose last poll failed, so an error is logged once
        wait = BROKER_LOG_POLL_SECONDS
        # Read at least twice within the freshness: a `succeeded` line times its record no later.
        quiet = min(BROKER_LOG_QUIET_POLL_SECONDS, self.settings.freshness_seconds / 2)
        while True:
            events = []
            for n, broker_log in enumerate(self.broker_logs):
                try:
                    events += broker_log.poll()
                except OSError as e:
                    if n not in failing:
                        log.warning("cannot read broker log %s: %s", broker_log.path, e)
                    failing.add(n)
                else:
                    failing.discard(n)
            if events:  # (any line read makes one: the lines' count)
                watch.read_found_lines()
                self.model.apply_batch(events, int(time.time() * 1000))
                changes = [event for event in events if type(event) is CoordinatorChanged]
                for change in changes:
                    # An elected line names an epoch this broker leads: its records are counted here.
                    if change.elected and change.epoch is not None:
                        self.tail.coordinator_elected(change.partition, change.epoch)
                if changes:
                    self.tail.refresh_ownership_soon()
            wait = next_broker_log_wait(wait, events, quiet)
            if stop.wait(wait):
                return
            if watch.watching():
                watch.wait(BROKER_LOG_WATCHED_POLL_SECONDS)

    def stop(self) -> bool:
        """Stops serving and closes the sources; returns whether the Kafka clients were closed (not if
        serve() is still inside a call of theirs: see exporter.commands.run)."""
        self.server.stop()
        if self.pusher is not None:
            self.pusher.stop()
        closed = not self._polling and self.tail.close()
        for broker_log in self.broker_logs:
            broker_log.close()
        self.cluster_state.close()
        self.consumer_groups.close()
        return closed

    def ready(self) -> bool:
        return self.readiness() == "ready"

    def readiness(self) -> str:
        return self.tail.not_ready or "ready"


def next_broker_log_wait(wait: float, events: Sequence[object], quiet: float = BROKER_LOG_QUIET_POLL_SECONDS) -> float:
    """The wait before the broker log's next read, after a read that brought `events` (see
    BROKER_LOG_POLL_SECONDS): the shortest after an event, else twice the last, at most `quiet`. The
    `succeeded` lines of appends, which a busy coordinator writes all the time, do not hasten it."""
    if any(type(event) not in _ROUTINE for event in events):
        return BROKER_LOG_POLL_SECONDS
    return min(wait * 2, quiet)


_ROUTINE = (BrokerLogStats, TransitionAppended)


def _own_name(host: str, port: int) -> str:
    """How a merged view names this exporter: its listen address, the host's name for a wildcard."""
    if host in ("0.0.0.0", "::"):
        host = socket.gethostname()
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"

"""The composition root: one exporter process's source, model, sinks and HTTP server, wired.

`txn-exporter run` (exporter.commands.run) and the workshop's demo both build an exporter here.
Here the parts are built and wired; each of its threads runs the loop of a module of its own. One
polls the `__transaction_state` tail and feeds the model (tail_loop); with --broker-log, another
follows the broker's log files the same way (broker_log_loop) and, on a coordinator elected/resigned
line, asks the tail to re-read partition ownership at once and hands it the epochs its broker was
elected in (exporter.sources.topic_tail's counting.py); with a hanging-scan interval, a third runs
the scan (hanging_loop); a fourth learns the broker's version and counts the transactions matching
each known Kafka bug (known_bugs_loop). The HTTP server's threads render the model at scrape time,
and the transactions view, which asks the cluster-state source (exporter.sources.cluster_state:
cached, bounded in time, its own threads) about the stuck rows it shows, and the brokers' versions
(exporter.sources.broker_versions) to hold them against the known bugs.
"""

from __future__ import annotations

import gc
import logging
import socket
import ssl
import threading

from prometheus_client import CollectorRegistry, GCCollector, PlatformCollector, ProcessCollector

from exporter import config
from exporter.app.broker_log_loop import follow_broker_logs
from exporter.app.hanging_loop import scan_hanging
from exporter.app.known_bugs_loop import bug_context, count_known_bugs
from exporter.app.tail_loop import follow_tail
from exporter.contracts.events import CoordinatorChanged, CoordinatorStarting
from exporter.http_server import MetricsServer
from exporter.metrics import otlp
from exporter.metrics.prometheus import TransactionCollector
from exporter.metrics.recorders import LatencyRecorders
from exporter.model import CoordinatorModel
from exporter.sources import peer_exporters
from exporter.sources.broker_log_tail import BrokerLogFollower
from exporter.sources.broker_versions import BrokerVersionsSource
from exporter.sources.cluster_state import ClusterStateSource
from exporter.sources.consumer_groups import ConsumerGroupsSource
from exporter.sources.file_watch import FileWatch
from exporter.sources.kafka_admin import import_kafka_python
from exporter.sources.topic_tail import TransactionLogTail
from exporter.view import endpoint

log = logging.getLogger("txn_exporter")
# On Ctrl-C or SIGTERM, how long a thread still inside a Kafka request (a metadata request, the
# hanging scan's client connecting) is waited for before the process exits without it.
STOP_GRACE_SECONDS = 1.0
# Above a poll's or a log read's events alive at once (1,000 records' objects, a half-second's lines').
GC_FIRST_GENERATION = 20_000


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
        # The brokers' ApiVersions answers, for their versions (the known bugs), routed the same way.
        self.broker_versions = BrokerVersionsSource(
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
        self.transactions = endpoint.TransactionsEndpoint(
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
            known_bugs=lambda brokers: bug_context(
                self.model, self.broker_versions, self.tail.broker_id, bool(settings.broker_log), brokers
            ),
        )
        self.server = MetricsServer(
            host,
            port,
            self.registry,
            healthy=lambda: True,
            ready=self.ready,
            readiness_detail=self.readiness,
            web_config_file=settings.web_config,
            routes={endpoint.PATH: self.transactions},
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
        # The cyclic collector's first generation at GC_FIRST_GENERATION objects, not 700: a fetch's or
        # a log read's thousands of events, alive while they are applied, were walked at every one of
        # its collections (the clock mode at 1,400 transactions/s: 19% of the exporter's CPU,
        # docs/benchmarks.md#the-clock-mode-at-high-rates).
        gc.set_threshold(GC_FIRST_GENERATION, *gc.get_threshold()[1:])
        threads = []
        watch = FileWatch(broker_log.path for broker_log in self.broker_logs) if self.broker_logs else None
        if watch is not None:
            freshness = self.settings.freshness_seconds
            follow = (stop, watch, self.broker_logs, self.model, self._coordinator_lines, freshness)
            threads.append(threading.Thread(target=follow_broker_logs, args=follow, name="broker-log", daemon=True))
        if self.settings.hanging_scan_interval_seconds > 0:
            scan = (stop, self.settings, self.model, lambda: self.tail.broker_id, self.ready)
            threads.append(threading.Thread(target=scan_hanging, args=scan, name="hanging-scan", daemon=True))
        versions, view = self.broker_versions, self.transactions.own_view
        bugs = (stop, self.model, versions, self.settings.broker_log, lambda: self.tail.broker_id, view)
        threads.append(threading.Thread(target=count_known_bugs, args=bugs, name="known-bugs", daemon=True))
        for thread in threads:
            thread.start()
        self._polling = True
        try:
            # The cluster-state client connects ahead of the first diagnosis, once Kafka has answered
            # the tail: before that it would only log the same connection failures again.
            follow_tail(stop, self.tail, self.model, bool(self.broker_logs), self.cluster_state.start)
        finally:
            self._polling = False
            stop.set()
            if watch is not None:
                watch.wake()
            for thread in threads:
                thread.join(STOP_GRACE_SECONDS)  # a scan still connecting is a daemon: left behind
            if watch is not None and not any(thread.is_alive() for thread in threads):
                watch.close()

    def _coordinator_lines(self, lines: list[CoordinatorChanged | CoordinatorStarting], read_ms: int | None) -> None:
        """A read of the broker log, told to the tail (exporter.sources.topic_tail's counting.py): the
        epochs its elected lines say this broker leads, its resignations and restarts (which end the
        run of epochs it led), and that every line written before `read_ms` has been read (None: a
        file could not be read). An
        elected or resigned line has the tail re-read partition ownership at once."""
        for line in lines:
            if isinstance(line, CoordinatorStarting):
                self.tail.coordinator_restarted()
            elif line.elected and line.epoch is not None:
                self.tail.coordinator_elected(line.partition, line.epoch)
            elif not line.elected:
                self.tail.coordinator_resigned(line.partition)
        if read_ms is not None:
            self.tail.broker_log_read(read_ms)
        if any(type(line) is CoordinatorChanged for line in lines):
            self.tail.refresh_ownership_soon()

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
        self.broker_versions.close()
        return closed

    def ready(self) -> bool:
        return self.readiness() == "ready"

    def readiness(self) -> str:
        return self.tail.not_ready or "ready"


def _own_name(host: str, port: int) -> str:
    """How a merged view names this exporter: its listen address, the host's name for a wildcard."""
    if host in ("0.0.0.0", "::"):
        host = socket.gethostname()
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"

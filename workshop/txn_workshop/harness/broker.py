"""A real single-node Kafka (KRaft, broker+controller in one JVM; or, up to 3.9, a ZooKeeper-mode broker
beside a ZooKeeper) on 127.0.0.1, run from Maven jars."""

from __future__ import annotations

import atexit
import base64
import os
import re
import signal
import socket
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from types import TracebackType
from typing import Literal

from confluent_kafka.admin import AdminClient

from exporter.logs import kafka_client_logger
from txn_workshop.harness.admin import alter_topic_config, create_internal_topics
from txn_workshop.harness.jars import DEFAULT_KAFKA_VERSION, kafka_libs, tools_libs
from txn_workshop.harness.processes import free_port, start_server, tail, terminate
from txn_workshop.harness.transaction_log_dump import DumpedRecord, dumped_records
from txn_workshop.harness.versions import KafkaVersion, kafka_version
from txn_workshop.harness.zookeeper import ZooKeeper

_START_TIMEOUT_S = 60.0
# server.log rolls over at this size, keeping this many older files (server.log.1, .2...): a
# coordinator at DEBUG writes ~17 MB/s during a marker hold (workload.hold_markers).
SERVER_LOG_MAX_BYTES = 64 * 1024 * 1024
SERVER_LOG_BACKUPS = 2
_STOP_TIMEOUT_S = 30.0
# Modest heap: CI has 2 cores and may run two brokers at once.
_JVM_OPTS = ["-Xms128m", "-Xmx512m", "-XX:+UseG1GC", "-Djava.awt.headless=true"]

# Brokers not stopped yet (strong refs: a dropped broker must still be stopped); atexit stops them
# so an error or Ctrl-C never leaves a JVM behind.
_live: set[KafkaBroker] = set()


def _run_java(libs: Path, main_class: str, *args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["java", "-Xmx256m", "-cp", f"{libs}/*", main_class, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


def _random_cluster_id() -> str:
    """Kafka's Uuid text form: URL-safe base64 of 16 bytes, unpadded. Like Kafka's Uuid.randomUuid(),
    never one starting with "-": StorageTool's argument parser would read it as an option."""
    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        if not cluster_id.startswith("-"):
            return cluster_id


class KafkaBrokerError(RuntimeError):
    pass


class KafkaBroker:
    """One Kafka JVM. By default a single-node cluster (broker + controller). With ``join``, a
    broker-only node ``node_id`` of that broker's cluster instead (replication factor 2, see
    workload.hold_markers); its transaction_version and partition settings then do not apply.

    With ``sasl_users`` ({name: password}), a second listener, SASL_PLAINTEXT with SCRAM-SHA-512
    (``sasl_bootstrap_servers``), the users' SCRAM credentials written at format time, and ACLs on
    (StandardAuthorizer). The PLAINTEXT listener, the controller and inter-broker traffic stay
    unauthenticated as the super user User:ANONYMOUS, so the harness (readiness, admin, workloads)
    works as before while clients of the SASL listener get only what ACLs grant them.

    ``server.log`` rolls over at ``server_log_max_bytes`` to ``server.log.1`` and so on, keeping
    ``server_log_backups`` older files (log4j's size-based rolling, in 3.x and 4.x alike).

    With ``jmx``, remote JMX on a loopback port (``jmx_url``), for Kafka's own JmxTool (harness.jmx).

    With ``internal_topics_on_join`` false, a joining broker leaves the internal topics uncreated, for
    the caller to create once every node runs (admin.create_internal_topics), at the replication
    factor its ``broker_properties`` set (bench/cluster_cost.py: 3 nodes, replication factor 3).

    With ``mode="zookeeper"`` (versions whose row has ``zookeeper_mode``: 3.x), a ZooKeeper-mode broker
    instead: ``broker.id`` (``node_id``) and ``zookeeper.connect``, no controller settings and no
    StorageTool format; the cluster's controller is the broker ZooKeeper elects (the first to start).
    The first broker runs a ZooKeeper of the same version's jars (harness.zookeeper, data and logs in
    ``workdir/zookeeper``), which a joining broker (``join``, of the same mode) shares; it stops once
    every broker of the cluster stopped. ``sasl_users`` is KRaft-only (SCRAM credentials at format
    time, StandardAuthorizer)."""

    def __init__(
        self,
        version: str = DEFAULT_KAFKA_VERSION,
        transaction_version: int | None = None,
        coordinator_log_level: str = "INFO",
        transaction_state_partitions: int = 50,
        broker_properties: dict[str, str] | None = None,
        workdir: Path | None = None,
        join: KafkaBroker | None = None,
        node_id: int = 1,
        sasl_users: Mapping[str, str] | None = None,
        server_log_max_bytes: int = SERVER_LOG_MAX_BYTES,
        server_log_backups: int = SERVER_LOG_BACKUPS,
        jmx: bool = False,
        internal_topics_on_join: bool = True,
        mode: Literal["kraft", "zookeeper"] = "kraft",
        timezone: str | None = None,
        logging_config: Path | None = None,
    ) -> None:
        levels = kafka_version(version).transaction_versions
        if transaction_version is not None and transaction_version not in levels:
            raise ValueError(
                f"Kafka {version} has no transaction.version {transaction_version} (levels: {levels or 'none'})"
            )
        if join is not None and node_id == join.node_id:
            raise ValueError("a joining broker needs its own node_id")
        if sasl_users and join is not None:
            raise ValueError("sasl_users is for a single-node cluster")
        if mode == "zookeeper" and not kafka_version(version).zookeeper_mode:
            raise ValueError(f"Kafka {version} has no ZooKeeper mode (removed in 4.0): mode='kraft'")
        if join is not None and join.mode != mode:
            raise ValueError(f"a {mode} broker cannot join a {join.mode} one")
        if sasl_users and mode == "zookeeper":
            raise ValueError("sasl_users is for a KRaft cluster")
        if server_log_backups < 1:
            raise ValueError("server_log_backups must be at least 1 (0 would truncate server.log in place)")
        self.version = version
        self.transaction_version = transaction_version
        self.join = join
        self.node_id: int = node_id
        self.coordinator_log_level = coordinator_log_level
        self.transaction_state_partitions = transaction_state_partitions
        self.broker_properties = dict(broker_properties or {})
        self.sasl_users = dict(sasl_users or {})
        self.server_log_max_bytes = server_log_max_bytes
        self.server_log_backups = server_log_backups
        self.jmx = jmx
        self.internal_topics_on_join = internal_topics_on_join
        self.workdir = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix=f"kafka-{version}-"))
        self.mode: Literal["kraft", "zookeeper"] = mode
        # The JVM's zone (user.timezone), e.g. "Asia/Kolkata": its log's local times are in it.
        self.timezone = timezone
        # A log4j configuration of the user's (deploy/broker-logging/) instead of the harness's own;
        # absolute: the JVM runs elsewhere, and log4j2, given a path it cannot open, logs to the
        # console (`No configuration found`) instead of failing, so no file would get a line.
        self.logging_config = logging_config.resolve() if logging_config else None
        # The cluster's ZooKeeper in ZooKeeper mode: the first broker's own, shared by those joining it.
        self.zookeeper: ZooKeeper | None = None
        if mode == "zookeeper":
            self.zookeeper = join.zookeeper if join is not None else ZooKeeper(version, self.workdir / "zookeeper")
        self.log_dirs = self.workdir / "data"
        self.logs_dir = self.workdir / "logs"
        self.server_log = self.logs_dir / "server.log"
        self.stdout_log = self.logs_dir / "kafka.out"
        self._port = 0
        self._controller_port = 0
        self._sasl_port = 0
        self._jmx_port = 0
        self._proc: subprocess.Popen[bytes] | None = None
        self.paused = False  # SIGSTOPped by pause()
        # close() may come from another thread than a start() under way: the JVM's launch checks it
        # under this lock, so none is launched once it came.
        self._lifecycle = threading.Lock()
        self._closed = False

    @property
    def bootstrap_servers(self) -> str:
        if not self._port:
            raise KafkaBrokerError("broker was never started")
        return f"127.0.0.1:{self._port}"

    @property
    def sasl_bootstrap_servers(self) -> str:
        """The SASL_PLAINTEXT (SCRAM-SHA-512) listener; only with ``sasl_users``."""
        if not self.sasl_users:
            raise KafkaBrokerError("broker has no SASL listener (sasl_users)")
        if not self._sasl_port:
            raise KafkaBrokerError("broker was never started")
        return f"127.0.0.1:{self._sasl_port}"

    @property
    def jmx_url(self) -> str:
        """The JMX connector (remote JMX on loopback, no auth, no SSL); only with ``jmx``."""
        if not self.jmx:
            raise KafkaBrokerError("broker has no JMX connector (jmx)")
        if not self._jmx_port:
            raise KafkaBrokerError("broker was never started")
        return f"service:jmx:rmi:///jndi/rmi://127.0.0.1:{self._jmx_port}/jmxrmi"

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def kafka(self) -> KafkaVersion:
        """What differs between versions, for the version this broker runs now (a rolling upgrade
        changes `version` between a stop and a start)."""
        return kafka_version(self.version)

    def __repr__(self) -> str:
        mode = ", zookeeper" if self.mode == "zookeeper" else ""
        return f"KafkaBroker({self.version}, tv={self.transaction_version}{mode}, {self.workdir})"

    def __enter__(self) -> KafkaBroker:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    # -- lifecycle -------------------------------------------------------------------------------

    def start(self) -> None:
        if self.running:
            return
        libs = kafka_libs(self.version)
        if self.join:
            if not self.join.running:
                raise KafkaBrokerError(f"{self.join} must run before a broker can join it")
            # Internal topics (replication factor 1) are created on first use, on any unfenced
            # broker: create them now so they all live on the first node, which stays up.
            if self.internal_topics_on_join:
                create_internal_topics(self.join.bootstrap_servers)
        if not self._port:  # restart() keeps the ports: clients and the quorum config stay valid
            self._port, self._controller_port = free_port(), free_port()
            if self.sasl_users:
                self._sasl_port = free_port()
            if self.jmx:
                self._jmx_port = free_port()
        self.logs_dir.mkdir(parents=True, exist_ok=True)
        if self.zookeeper is not None:
            self.zookeeper.acquire(self)  # released by stop(), including a failed start's
        props = self._write_server_properties()
        if self.mode == "kraft" and not (self.log_dirs / "meta.properties").exists():
            self._format_storage(props)
        # Both configs read these system properties; see log4j.properties / log4j2.properties.
        logging_opts = [
            f"-Dkafka.logs.dir={self.logs_dir}",
            f"-Dtxn.coordinator.log.level={self.coordinator_log_level}",
            f"-Dtxn.log.max.bytes={self.server_log_max_bytes}",
            f"-Dtxn.log.backups={self.server_log_backups}",
            *([f"-Duser.timezone={self.timezone}"] if self.timezone else []),
            f"-Dlog4j2.configurationFile={self._logging_config()}"
            if self.kafka.log4j == 2
            else f"-Dlog4j.configuration=file:{self._logging_config()}",
        ]
        try:
            self._launch(
                ["java", *_JVM_OPTS, *logging_opts, *self._jmx_opts(), "-cp", f"{libs}/*", "kafka.Kafka", str(props)]
            )
            self._wait_ready()
        except BaseException:
            self.stop()
            raise

    def _launch(self, command: list[str]) -> None:
        """Starts the JVM, unless the broker was closed (KafkaBrokerError)."""
        with self._lifecycle:
            if self._closed:
                raise KafkaBrokerError(f"{self} was closed")
            self._proc = start_server(command, self.stdout_log, self.workdir)
            _live.add(self)

    def stop(self, timeout: float = _STOP_TIMEOUT_S) -> None:
        """SIGTERM (controlled shutdown), SIGKILL after `timeout` s. Idempotent; a paused broker is
        resumed first. Another thread may stop it meanwhile (close()): each waits for the same JVM,
        until it is gone or its own timeout kills it."""
        self.resume()
        proc = self._proc
        if proc is not None:
            terminate(proc, timeout)
        with self._lifecycle:
            if self._proc is proc:
                self._proc = None
                _live.discard(self)
        if self.zookeeper is not None:
            self.zookeeper.release(self)

    def close(self, timeout: float = _STOP_TIMEOUT_S) -> None:
        """Stops the broker for good, from any thread: a start() under way in another thread ends in
        KafkaBrokerError, its JVM stopped or never launched (the demo's Ctrl-C while its workload
        restarts a broker)."""
        with self._lifecycle:
            self._closed = True
        self.stop(timeout)

    def kill(self) -> None:
        """SIGKILL: the broker dies at once, without a controlled shutdown (its leadership moves only
        once the controller misses its heartbeats, broker.session.timeout.ms). `start` restarts it."""
        self.resume()
        proc, self._proc = self._proc, None
        _live.discard(self)
        if proc is not None:
            proc.kill()
            proc.wait()
        if self.zookeeper is not None:
            self.zookeeper.release(self)

    def pause(self) -> None:
        """SIGSTOP the JVM: a broker that hangs (a long GC pause, a stalled disk) without closing its
        connections or leaving the cluster until the controller misses its heartbeats
        (broker.session.timeout.ms). `resume` (or `stop`) continues it."""
        if self._proc is None:
            raise KafkaBrokerError("broker is not running")
        os.kill(self._proc.pid, signal.SIGSTOP)
        self.paused = True

    def resume(self) -> None:
        """SIGCONT a paused broker; nothing otherwise."""
        if self.paused and self._proc is not None:
            os.kill(self._proc.pid, signal.SIGCONT)
        self.paused = False

    def restart(self) -> None:
        self.stop()
        self.start()

    def _logging_config(self) -> Path:
        return self.logging_config or Path(str(resources.files(__package__) / self.kafka.log4j_config))

    def _jmx_opts(self) -> list[str]:
        # What kafka-run-class.sh sets from JMX_PORT, on loopback; the RMI port equal to the registry's
        # so one known port serves JmxTool (txn_workshop.harness.jmx).
        if not self.jmx:
            return []
        return [
            f"-Dcom.sun.management.jmxremote.port={self._jmx_port}",
            f"-Dcom.sun.management.jmxremote.rmi.port={self._jmx_port}",
            "-Dcom.sun.management.jmxremote.host=127.0.0.1",
            "-Djava.rmi.server.hostname=127.0.0.1",
            "-Dcom.sun.management.jmxremote.authenticate=false",
            "-Dcom.sun.management.jmxremote.ssl=false",
        ]

    def _server_properties(self) -> dict[str, str]:
        controller = self.join or self
        props = {
            "process.roles": "broker" if self.join else "broker,controller",
            "node.id": str(self.node_id),
            # Static quorum: accepted by 3.x and 4.x alike, and `format` then needs no --standalone.
            "controller.quorum.voters": f"{controller.node_id}@127.0.0.1:{controller._controller_port}",
            "listeners": f"PLAINTEXT://127.0.0.1:{self._port}"
            + ("" if self.join else f",CONTROLLER://127.0.0.1:{self._controller_port}"),
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self._port}",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "log.dirs": str(self.log_dirs),
            "num.partitions": "1",
            "auto.create.topics.enable": "true",
            "offsets.topic.replication.factor": "1",
            "offsets.topic.num.partitions": "1",  # only consumer groups use it; 50 slows them down
            "group.initial.rebalance.delay.ms": "0",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "transaction.state.log.num.partitions": str(self.transaction_state_partitions),
            # Default 10 s; short so timed-out transactions are aborted promptly in tests.
            "transaction.abort.timed.out.transaction.cleanup.interval.ms": "500",
        }
        if self.zookeeper is not None:
            # A ZooKeeper-mode broker: no process.roles (the controller is a broker ZooKeeper elects).
            for key in ("process.roles", "node.id", "controller.quorum.voters", "controller.listener.names"):
                del props[key]
            props["broker.id"] = str(self.node_id)
            props["zookeeper.connect"] = f"{self.zookeeper.connect}/kafka"  # the chroot, made by the broker
            props["listeners"] = f"PLAINTEXT://127.0.0.1:{self._port}"
            props["listener.security.protocol.map"] = "PLAINTEXT:PLAINTEXT"
        if self.sasl_users:
            props["listeners"] += f",SASL://127.0.0.1:{self._sasl_port}"
            props["advertised.listeners"] += f",SASL://127.0.0.1:{self._sasl_port}"
            props["listener.security.protocol.map"] += ",SASL:SASL_PLAINTEXT"
            props["sasl.enabled.mechanisms"] = "SCRAM-SHA-512"
            props["listener.name.sasl.scram-sha-512.sasl.jaas.config"] = (
                "org.apache.kafka.common.security.scram.ScramLoginModule required;"
            )
            props["authorizer.class.name"] = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
            props["super.users"] = "User:ANONYMOUS"
        if self.kafka.share_group_state_topic:
            props["share.coordinator.state.topic.replication.factor"] = "1"
            props["share.coordinator.state.topic.min.isr"] = "1"
        props.update(self.broker_properties)
        return props

    def _write_server_properties(self) -> Path:
        path = self.workdir / "server.properties"
        path.write_text("".join(f"{k}={v}\n" for k, v in self._server_properties().items()))
        return path

    def _format_storage(self, props: Path) -> None:
        if self.join:
            meta = (self.join.log_dirs / "meta.properties").read_text()
            found = re.search(r"^cluster\.id=(\S+)", meta, re.MULTILINE)
            if found is None:
                raise KafkaBrokerError(f"no cluster.id in the joined broker's {self.join.log_dirs / 'meta.properties'}")
            cluster_id = found.group(1)
        else:
            cluster_id = _random_cluster_id()
        args = ["format", "-t", cluster_id, "-c", str(props)]
        if self.transaction_version is not None and not self.join:
            args += ["--feature", f"transaction.version={self.transaction_version}"]
        for name, password in self.sasl_users.items():
            args += ["--add-scram", f"SCRAM-SHA-512=[name={name},password={password}]"]
        # StorageTool is in core: run it from the broker's own jars, not tools_libs().
        proc = _run_java(kafka_libs(self.version), self.kafka.storage_tool_class, *args, timeout=120)
        if proc.returncode != 0:
            raise KafkaBrokerError(f"StorageTool format failed:\n{proc.stdout}\n{proc.stderr}")

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + _START_TIMEOUT_S
        # Wait for the listener before creating a client: librdkafka logs every refused connect.
        while not self._port_open():
            self._check_alive(deadline)
            time.sleep(0.2)
        admin = AdminClient(
            {"bootstrap.servers": self.bootstrap_servers}, logger=kafka_client_logger("librdkafka.harness")
        )
        while True:
            self._check_alive(deadline)
            try:
                if self.node_id in admin.list_topics(timeout=2).brokers:
                    return
            except Exception:  # KafkaException while the broker is still fenced/starting
                pass
            time.sleep(0.2)

    def _port_open(self) -> bool:
        with socket.socket() as s:
            s.settimeout(0.5)
            return s.connect_ex(("127.0.0.1", self._port)) == 0

    def _check_alive(self, deadline: float) -> None:
        proc = self._proc
        if proc is None:  # stopped by another thread (close())
            raise KafkaBrokerError(f"Kafka {self.version} was stopped during its start")
        if proc.poll() is not None:
            raise KafkaBrokerError(
                f"Kafka {self.version} exited with {proc.returncode} during start\n"
                f"--- {self.stdout_log}:\n{tail(self.stdout_log)}\n--- {self.server_log}:\n{tail(self.server_log)}"
            )
        if time.monotonic() > deadline:
            raise KafkaBrokerError(
                f"Kafka {self.version} not ready after {_START_TIMEOUT_S:.0f} s\n"
                f"--- {self.server_log}:\n{tail(self.server_log)}"
            )

    # -- tools -----------------------------------------------------------------------------------

    def run_tool(self, main_class: str, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        """Run a Kafka Java main class (DumpLogSegments, TransactionsCommand...) from this version's
        tools classpath (for 4.4.0 that is 4.3.1's: see versions.py). Output captured as text.
        The tool classes that moved between versions are in ``self.kafka`` (the version table)."""
        return _run_java(tools_libs(self.version), main_class, *args, timeout=timeout)

    def transactions_table(self, *args: str) -> tuple[list[str], list[list[str]]]:
        """`kafka-transactions.sh --bootstrap-server <this broker> ARGS` (list, describe,
        describe-producers, find-hanging...): the header and rows of the table it prints, each line
        split on whitespace. Raises KafkaBrokerError, with the tool's stderr, if it fails."""
        proc = self.run_tool(self.kafka.transactions_command_class, "--bootstrap-server", self.bootstrap_servers, *args)
        if proc.returncode != 0:
            raise KafkaBrokerError(
                f"kafka-transactions.sh {' '.join(args)}: exit {proc.returncode}: {proc.stderr[-2000:]}"
            )
        header, *rows = (line.split() for line in proc.stdout.splitlines() if line.strip())
        return header, rows

    def transaction_state_segments(self) -> list[Path]:
        """All ``__transaction_state`` segment files, by partition then base offset."""
        return sorted(
            self.log_dirs.glob("__transaction_state-*/*.log"),
            key=lambda p: (int(p.parent.name.rsplit("-", 1)[1]), int(p.stem)),
        )

    def dump_transaction_log(self, *segments: Path) -> str:
        """DumpLogSegments --transaction-log-decoder over ``segments`` (default: all); its stdout."""
        files = ",".join(str(p) for p in (segments or self.transaction_state_segments()))
        proc = self.run_tool(self.kafka.dump_log_segments_class, "--transaction-log-decoder", "--files", files)
        if proc.returncode != 0:
            raise KafkaBrokerError(f"DumpLogSegments failed:\n{proc.stderr[-4000:]}")
        return proc.stdout

    def transaction_log_records(self) -> list[DumpedRecord]:
        """Every ``__transaction_state`` record, as DumpLogSegments decodes it (Kafka's own reading)."""
        return dumped_records(self.dump_transaction_log(), self.kafka.transaction_log_dump)

    def alter_topic_config(self, topic: str, configs: Mapping[str, str | None]) -> None:
        """Incremental topic config change; None deletes an override."""
        alter_topic_config(self.bootstrap_servers, topic, configs)


@atexit.register
def _stop_all() -> None:
    # Joined brokers first: their controlled shutdown needs the controller.
    for broker in sorted(_live, key=lambda b: b.join is None):
        broker.stop()

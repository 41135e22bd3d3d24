"""A standalone ZooKeeper on 127.0.0.1 for ZooKeeper-mode brokers (Kafka 3.x), run from the Kafka
distribution's own jars: kafka_2.13 3.x depends on org.apache.zookeeper:zookeeper, so a version's
resolved classpath (jars.kafka_libs) holds the server, as the tarball's libs/ does.

It runs as the tarball's zookeeper-server-start.sh runs it (QuorumPeerMain with a zoo.cfg of a single
server: standalone), its admin server off, its data and log under the owning broker's workdir. The
brokers of one cluster share it (KafkaBroker(mode="zookeeper"), the joining ones through `join`):
it starts with the first of them and stops once the last one stopped.
"""

from __future__ import annotations

import socket
import subprocess
import time
from importlib import resources
from pathlib import Path

from txn_workshop.harness.jars import kafka_libs
from txn_workshop.harness.processes import free_port, start_server, tail, terminate
from txn_workshop.harness.versions import kafka_version

MAIN_CLASS = "org.apache.zookeeper.server.quorum.QuorumPeerMain"
_START_TIMEOUT_S = 60.0
_STOP_TIMEOUT_S = 20.0


class ZooKeeperError(RuntimeError):
    pass


class ZooKeeper:
    """One ZooKeeper JVM of ``version``'s jars, shared by the brokers that ``acquire`` it."""

    def __init__(self, version: str, workdir: Path) -> None:
        if not kafka_version(version).zookeeper_mode:
            raise ValueError(f"Kafka {version} has no ZooKeeper mode (removed in 4.0)")
        self.version = version
        self.workdir = workdir
        self.data_dir = workdir / "data"
        self.logs_dir = workdir / "logs"
        self.stdout_log = self.logs_dir / "zookeeper.out"
        self.port = 0
        self._proc: subprocess.Popen[bytes] | None = None
        self._users: set[object] = set()

    @property
    def connect(self) -> str:
        """The connection string of its client port (no chroot)."""
        if not self.port:
            raise ZooKeeperError("ZooKeeper was never started")
        return f"127.0.0.1:{self.port}"

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def __repr__(self) -> str:
        return f"ZooKeeper({self.version}, {self.connect if self.port else 'not started'})"

    def acquire(self, user: object) -> None:
        """``user`` (a broker about to start) needs it: started if it is not running."""
        if not self.running:
            self.start()
        self._users.add(user)

    def release(self, user: object) -> None:
        """``user`` stopped: the last one's release stops it."""
        self._users.discard(user)
        if not self._users:
            self.stop()

    def start(self) -> None:
        if self.running:
            return
        if not self.port:  # a restart keeps the port: the brokers' zookeeper.connect stays valid
            self.port = free_port()
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.logs_dir.mkdir(parents=True, exist_ok=True)
        config = self.workdir / "zoo.cfg"
        config.write_text(
            f"dataDir={self.data_dir}\n"
            f"clientPort={self.port}\n"
            "clientPortAddress=127.0.0.1\n"
            "tickTime=2000\n"
            "maxClientCnxns=0\n"
            "admin.enableServer=false\n"
            "4lw.commands.whitelist=ruok\n"
        )
        row = kafka_version(self.version)
        log4j = resources.files(__package__) / row.log4j_config
        logging_opts = [
            # The harness's broker logging config: the server.log of this logs dir.
            f"-Dkafka.logs.dir={self.logs_dir}",
            "-Dtxn.coordinator.log.level=INFO",
            f"-Dtxn.log.max.bytes={16 * 1024 * 1024}",
            "-Dtxn.log.backups=1",
            f"-Dlog4j2.configurationFile={log4j}" if row.log4j == 2 else f"-Dlog4j.configuration=file:{log4j}",
        ]
        classpath = f"{kafka_libs(self.version)}/*"
        self._proc = start_server(
            ["java", "-Xms32m", "-Xmx128m", *logging_opts, "-cp", classpath, MAIN_CLASS, str(config)],
            self.stdout_log,
            self.workdir,
        )
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None:
            terminate(proc, _STOP_TIMEOUT_S)

    def _wait_ready(self) -> None:
        """Until it answers the four-letter word `ruok` with `imok` (serving)."""
        deadline = time.monotonic() + _START_TIMEOUT_S
        while self._ruok() != b"imok":
            assert self._proc is not None
            if self._proc.poll() is not None or time.monotonic() > deadline:
                state = f"exited with {self._proc.returncode}" if self._proc.poll() is not None else "not ready"
                raise ZooKeeperError(
                    f"ZooKeeper of Kafka {self.version} {state}\n--- {self.stdout_log}:\n{tail(self.stdout_log)}\n"
                    f"--- {self.logs_dir / 'server.log'}:\n{tail(self.logs_dir / 'server.log')}"
                )
            time.sleep(0.2)

    def _ruok(self) -> bytes:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=2) as s:
                s.sendall(b"ruok")
                return s.recv(16)
        except OSError:
            return b""

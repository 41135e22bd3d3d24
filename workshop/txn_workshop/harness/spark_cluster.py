"""A real Spark standalone cluster on 127.0.0.1: one master and N workers, started with the pyspark
package's own launcher (`bin/spark-class ...deploy.master.Master` / `...deploy.worker.Worker`).

Small on purpose (CI has 2 cores): each worker offers `cores` cores and `memory` to executors, the
daemons themselves get a 256 MiB heap. Workers run executors with this interpreter (PYSPARK_PYTHON),
which has pyarrow and the exporter package. Ready once the master's JSON status lists every worker
alive; stopped workers first, then the master (also at exit, and on the parent's death).
"""

from __future__ import annotations

import atexit
import importlib.util
import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from txn_workshop.harness.processes import die_with_parent, free_port, tail, terminate

_START_TIMEOUT_S = 120.0
_STOP_TIMEOUT_S = 30.0
_live: set[SparkStandalone] = set()


class SparkClusterError(RuntimeError):
    pass


def spark_class() -> Path:
    """pyspark's bin/spark-class (without importing pyspark: that is slow)."""
    spec = importlib.util.find_spec("pyspark")
    if spec is None or not spec.origin:
        raise SparkClusterError("pyspark is not installed: pip install 'kafka-txn-exporter[spark]'")
    return Path(spec.origin).parent / "bin" / "spark-class"


class SparkStandalone:
    def __init__(self, workdir: Path, workers: int = 2, cores: int = 1, memory: str = "1g") -> None:
        self.workdir = Path(workdir)
        self.workers, self.cores, self.memory = workers, cores, memory
        self.port, self.ui_port = free_port(), free_port()
        self._processes: list[tuple[subprocess.Popen[bytes], Path]] = []

    @property
    def url(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    def worker_dir(self, index: int) -> Path:
        """Where worker `index` runs its executors (app-*/<executor id>/stdout, stderr)."""
        return self.workdir / f"worker-{index}"

    def __enter__(self) -> SparkStandalone:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        _live.add(self)
        try:
            self._spawn(
                "master",
                "org.apache.spark.deploy.master.Master",
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--webui-port",
                str(self.ui_port),
            )
            for i in range(self.workers):
                self.worker_dir(i).mkdir(exist_ok=True)
                self._spawn(
                    f"worker-{i}",
                    "org.apache.spark.deploy.worker.Worker",
                    "--host",
                    "127.0.0.1",
                    "--webui-port",
                    str(free_port()),
                    "--cores",
                    str(self.cores),
                    "--memory",
                    self.memory,
                    "--work-dir",
                    str(self.worker_dir(i)),
                    self.url,
                )
            self._wait_workers()
        except BaseException:
            self.stop()
            raise

    def status(self) -> dict:
        """The master's JSON status page (workers, active and completed applications)."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.ui_port}/json/", timeout=10) as response:
            return json.load(response)

    def stop(self) -> None:
        for process, _ in reversed(self._processes):  # workers first: they report to the master
            terminate(process, _STOP_TIMEOUT_S)
        self._processes.clear()
        _live.discard(self)

    def _spawn(self, name: str, main_class: str, *args: str) -> None:
        env = dict(
            os.environ,
            SPARK_LOCAL_IP="127.0.0.1",
            SPARK_DAEMON_MEMORY="256m",
            PYSPARK_PYTHON=sys.executable,
            SPARK_NO_DAEMONIZE="1",
        )
        log = self.workdir / f"{name}.log"
        with log.open("wb") as out:
            process = subprocess.Popen(
                [str(spark_class()), main_class, *args],
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                preexec_fn=die_with_parent,
            )
        self._processes.append((process, log))

    def _wait_workers(self) -> None:
        deadline = time.monotonic() + _START_TIMEOUT_S
        alive = 0
        while time.monotonic() < deadline:
            for process, log in self._processes:
                if process.poll() is not None:
                    raise SparkClusterError(f"{log.stem} exited with {process.returncode}:\n{tail(log)}")
            try:
                alive = self.status().get("aliveworkers", 0)
            except OSError:
                alive = 0
            if alive >= self.workers:
                return
            time.sleep(0.5)
        logs = "\n".join(f"--- {log.name}\n{tail(log, 20)}" for _, log in self._processes)
        raise SparkClusterError(f"{alive}/{self.workers} workers registered after {_START_TIMEOUT_S:.0f} s:\n{logs}")


@atexit.register
def _stop_all() -> None:
    for cluster in list(_live):
        cluster.stop()

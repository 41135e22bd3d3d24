"""The paced transactional load of the cost benches: librdkafka transactional producers in processes
of their own (begin / one message / commit), each process a `bench/sidecar_cost.py load` command."""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

DATA_TOPIC = "load"
DATA_PARTITIONS = 8
# A load process is sidecar_cost.py's `load` command (load_main), whichever bench starts it.
_COMMAND = Path(__file__).with_name("sidecar_cost.py")


def load_main(args: argparse.Namespace) -> None:
    """A load process: `threads` transactional producers, each paced to rate/threads transactions
    per second (begin / one message / commit); prints the cumulative commits every second."""
    from confluent_kafka import Producer

    per_thread_interval = args.threads / args.rate
    commits = [0] * args.threads
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())

    def run(index: int) -> None:
        tid = f"{args.prefix}-{index}"
        producer = Producer({"bootstrap.servers": args.bootstrap, "transactional.id": tid, "linger.ms": 0})
        producer.init_transactions(60)
        payload = b"x" * 100
        partition = index % DATA_PARTITIONS
        due = time.monotonic()
        while not stop.is_set():
            producer.begin_transaction()
            producer.produce(DATA_TOPIC, payload, partition=partition)
            producer.commit_transaction(60)
            commits[index] += 1
            due += per_thread_interval
            delay = due - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            elif delay < -1.0:
                due = time.monotonic()  # behind by more than a second: the machine's limit, not a debt

    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(args.threads)]
    for thread in threads:
        thread.start()
    print("READY", flush=True)
    while not stop.wait(1.0):
        print(json.dumps({"t": time.time(), "commits": sum(commits)}), flush=True)
    for thread in threads:
        thread.join(10)


class Load:
    """The workload's processes and their last reports (time, commits so far)."""

    def __init__(self, bootstrap: str, rate: int, processes: int, threads: int, prefix: str) -> None:
        self._last: list[tuple[float, int]] = [(0.0, 0)] * processes
        self._procs = []
        for n in range(processes if rate > 0 else 0):  # rate 0: the idle exporter
            proc = subprocess.Popen(
                [
                    sys.executable,
                    str(_COMMAND),
                    "load",
                    "--bootstrap",
                    bootstrap,
                    "--rate",
                    str(rate / processes),
                    "--threads",
                    str(threads),
                    "--prefix",
                    f"{prefix}-{n}",
                ],
                stdout=subprocess.PIPE,
                text=True,
                stdin=subprocess.DEVNULL,
            )
            self._procs.append(proc)
            threading.Thread(target=self._read, args=(n, proc), daemon=True).start()

    def _read(self, n: int, proc: subprocess.Popen) -> None:
        assert proc.stdout is not None  # (started with a pipe)
        for line in proc.stdout:
            if line.startswith("{"):
                report = json.loads(line)
                self._last[n] = (report["t"], report["commits"])

    def reports(self) -> list[tuple[float, int]]:
        """Each process's last report (time, commits so far)."""
        return list(self._last)

    @staticmethod
    def commits_in(before: list[tuple[float, int]], after: list[tuple[float, int]], seconds: float) -> float:
        """The commits of `seconds`, at the rate each process reported between two reports() (by the
        reports' own times: a report a second, so counts alone would be off by up to a second's)."""
        return sum((c1 - c0) / (t1 - t0) * seconds for (t0, c0), (t1, c1) in zip(before, after) if t1 > t0)

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self._procs]

    def stop(self) -> None:
        for proc in self._procs:
            proc.terminate()
        for proc in self._procs:
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()


def settle_commits_rate(load: Load, seconds: float = 3.0) -> float:
    r0, t0 = load.reports(), time.monotonic()
    time.sleep(seconds)
    elapsed = time.monotonic() - t0
    return load.commits_in(r0, load.reports(), elapsed) / elapsed


def add_load_arguments(command: argparse.ArgumentParser) -> None:
    """The arguments of a load process's command line (Load's, and sidecar_memory's churn)."""
    command.add_argument("--bootstrap", required=True)
    command.add_argument("--rate", type=float, required=True)
    command.add_argument("--threads", type=int, required=True)
    command.add_argument("--prefix", required=True)

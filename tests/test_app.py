"""The exporter's assembly (exporter.app)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from exporter.app.broker_log_loop import BROKER_LOG_POLL_SECONDS, BROKER_LOG_QUIET_POLL_SECONDS, next_broker_log_wait
from exporter.contracts.events import BrokerLogStats, CoordinatorChanged

# In a fresh interpreter: every thread the exporter starts (its HTTP server's, its sources', its
# scan's) finds kafka-python imported, so no two of them import it at once (see import_kafka_python).
_CHECK = textwrap.dedent(
    """
    import socket, sys, threading, time
    from exporter.app import Exporter
    from exporter.config import Settings

    assert "kafka" not in sys.modules, "imported before the exporter starts: the check would prove nothing"
    started = []
    thread_start = threading.Thread.start
    def start(thread):
        started.append((thread.name, "kafka" in sys.modules))
        thread_start(thread)
    threading.Thread.start = start
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    exporter = Exporter(Settings(bootstrap_servers="127.0.0.1:9", listen=f"127.0.0.1:{port}"))
    exporter.start()
    stop = threading.Event()
    serving = threading.Thread(target=exporter.serve, args=(stop,), name="sources", daemon=True)
    serving.start()
    time.sleep(0.5)
    stop.set()
    serving.join(10)
    exporter.stop()
    print(started)
    assert started and all(imported for _, imported in started), started
    """
)


def test_kafka_python_is_imported_before_the_exporter_starts_a_thread() -> None:
    result = subprocess.run([sys.executable, "-c", _CHECK], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "hanging-scan" in result.stdout and "metrics-http" in result.stdout


def test_the_broker_log_is_read_again_soon_only_after_an_event() -> None:
    # At DEBUG the coordinator writes a line per transition, so a read that brought only the lines'
    # count (BrokerLogStats) backs off like one that brought nothing.
    quiet, soon = BROKER_LOG_QUIET_POLL_SECONDS, BROKER_LOG_POLL_SECONDS
    stats = BrokerLogStats(lines=560)
    assert next_broker_log_wait(soon, [stats]) == 2 * soon
    assert next_broker_log_wait(soon, []) == 2 * soon
    assert next_broker_log_wait(quiet, [stats]) == quiet
    assert next_broker_log_wait(quiet, [stats, CoordinatorChanged(3, True)]) == soon


_SELF_METRICS = textwrap.dedent(
    """
    from prometheus_client import generate_latest
    from exporter.app import Exporter
    from exporter.config import Settings

    exporter = Exporter(Settings(bootstrap_servers="127.0.0.1:9", listen="127.0.0.1:1"))
    print(generate_latest(exporter.registry).decode())
    """
)


def test_the_exporter_measures_its_own_process() -> None:
    """/metrics carries the process's CPU and memory, the Python runtime and its GC, as the client
    library's default registry would (the dashboards' "the exporter itself" rows read them)."""
    result = subprocess.run([sys.executable, "-c", _SELF_METRICS], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr[-3000:]
    samples = {line.split("{")[0].split(" ")[0] for line in result.stdout.splitlines() if not line.startswith("#")}
    for name in (
        "process_cpu_seconds_total",
        "process_resident_memory_bytes",
        "process_open_fds",
        "python_info",
        "python_gc_objects_collected_total",
    ):
        assert name in samples, name
    assert "txn_exporter_build_info" in samples

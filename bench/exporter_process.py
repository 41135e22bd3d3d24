"""The exporter as the cost benches run it: `txn-exporter run` in a process of its own, and what they
read of its /metrics."""

from __future__ import annotations

import subprocess
import sys
import time
import urllib.request
from pathlib import Path

VENV_BIN = Path(sys.executable).parent
# The coordinator's logger, at DEBUG for the exporter's --broker-log mode (its `succeeded` lines).
TSM_LOGGER = "kafka.coordinator.transaction.TransactionStateManager"


class Exporter:
    def __init__(self, executable: Path, bootstrap: str, port: int, extra: list[str], log: Path) -> None:
        self.url = f"http://127.0.0.1:{port}"
        self.proc = subprocess.Popen(
            [
                str(executable),
                "run",
                "--bootstrap-servers",
                bootstrap,
                "--listen",
                f"127.0.0.1:{port}",
                *extra,
            ],
            stdout=subprocess.DEVNULL,
            stderr=log.open("ab"),
            stdin=subprocess.DEVNULL,
            # Not this checkout's directory: another checkout's exporter started as `python -m exporter`
            # from here would import this checkout's package (the working directory comes first on
            # sys.path), and a side-by-side run would compare this checkout with itself.
            cwd=log.parent,
        )
        self.started = time.monotonic()

    def wait_ready(self, timeout: float = 120) -> float:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"exporter exited with {self.proc.returncode}")
            try:
                with urllib.request.urlopen(self.url + "/readyz", timeout=5) as r:
                    if r.status == 200:
                        return time.monotonic() - self.started
            except OSError:
                pass
            time.sleep(0.05)
        raise TimeoutError("exporter not ready")

    def metrics(self) -> str:
        with urllib.request.urlopen(self.url + "/metrics", timeout=10) as r:
            return r.read().decode()

    def stop(self) -> None:
        from txn_workshop.harness.processes import terminate

        terminate(self.proc, 20)


def latency_quantiles(metrics_text: str) -> dict[str, dict[str, float]]:
    """target_state -> quantile -> ms, from the exact quantile gauges."""
    from prometheus_client.parser import text_string_to_metric_families

    out: dict[str, dict[str, float]] = {}
    for family in text_string_to_metric_families(metrics_text):
        if family.name == "kafka_transaction_state_log_append_latency_quantile_seconds":
            for s in family.samples:
                out.setdefault(s.labels["target_state"], {})[s.labels["quantile"]] = s.value * 1000
    return out


def records_total(metrics_text: str) -> float:
    from prometheus_client.parser import text_string_to_metric_families

    return sum(
        s.value
        for f in text_string_to_metric_families(metrics_text)
        if f.name == "kafka_transaction_state_log_records"
        for s in f.samples
        if s.name.endswith("_total")
    )

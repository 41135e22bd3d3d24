"""`txn-exporter run` as a real process, scraped over HTTP, for integration tests."""

from __future__ import annotations

import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from txn_workshop.harness.processes import free_port

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


class ExporterProcess:
    def __init__(self, bootstrap: str, *args: str, log: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = log
        self._process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "exporter",
                "run",
                "--bootstrap-servers",
                bootstrap,
                "--listen",
                f"127.0.0.1:{self.port}",
                "--metadata-refresh-seconds",
                "1",
                *args,
            ],
            stdout=subprocess.DEVNULL,
            stderr=log.open("a"),
        )

    def get(self, path: str) -> tuple[int, str]:
        try:
            with urllib.request.urlopen(self.url + path, timeout=5) as response:
                return response.status, response.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()

    def wait_ready(self, timeout: float = 60) -> None:
        self.wait_for(lambda: self.get("/readyz")[0] == 200, timeout, "/readyz")

    def samples(self) -> Samples:
        status, body = self.get("/metrics")
        assert status == 200, body
        return {
            (s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(body)
            for s in family.samples
        }

    def value(self, name: str, **labels: str) -> float | None:
        return self.samples().get((name, tuple(sorted(labels.items()))))

    def wait_for(self, condition, timeout: float, what: str) -> None:
        """Polls `condition` until true; on timeout, fails with the last samples and the log tail."""
        deadline = time.monotonic() + timeout
        while True:
            assert self._process.poll() is None, f"exporter exited: {self.log.read_text()[-3000:]}"
            try:
                if condition():
                    return
            except (urllib.error.URLError, ConnectionError):
                pass  # not listening yet
            if time.monotonic() >= deadline:
                kafka_samples = {k: v for k, v in self.samples().items() if k[0].startswith("kafka_transaction")}
                raise AssertionError(
                    f"timed out waiting for {what}; samples: {kafka_samples}; log: {self.log.read_text()[-1500:]}"
                )
            time.sleep(0.25)

    def stop(self) -> int:
        self._process.terminate()
        return self._process.wait(20)

"""The real Prometheus and Alertmanager (Debian packages, installed by scripts/setup) as processes
of a test: own loopback port, own temporary storage, stopped at the end."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml

from txn_workshop.harness.processes import free_port


def require(tool: str) -> str:
    path = shutil.which(tool)
    if path is None:
        pytest.fail(f"{tool} is not on PATH: run scripts/setup (installs prometheus and prometheus-alertmanager)")
    return path


def http(url: str, data: bytes | None = None, timeout: float = 10) -> Any:
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"} if data else {})
    with urllib.request.urlopen(request, timeout=timeout) as response:
        body = response.read()
    return json.loads(body) if body else None


class _Process:
    name = ""
    ready_path = "/-/ready"

    def __init__(self, args: list[str], port: int, log: Path) -> None:
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        self.log = log
        self._process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=log.open("w"))
        self._wait_ready()

    def _wait_ready(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while True:
            if self._process.poll() is not None:
                raise RuntimeError(f"{self.name} exited: {self.log.read_text()[-3000:]}")
            try:
                with urllib.request.urlopen(self.url + self.ready_path, timeout=2) as response:
                    if response.status == 200:
                        return
            except (urllib.error.URLError, ConnectionError):
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.name} not ready after {timeout} s: {self.log.read_text()[-3000:]}")
            time.sleep(0.2)

    def stop(self) -> None:
        if self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(20)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()


class Prometheus(_Process):
    name = "prometheus"

    def __init__(self, config: dict, workdir: Path, features: tuple[str, ...] = ()) -> None:
        """`features`: --enable-feature flags, e.g. exemplar-storage."""
        workdir.mkdir(parents=True, exist_ok=True)
        config_path = workdir / "prometheus.yml"
        config_path.write_text(yaml.safe_dump(config, sort_keys=False))
        port = free_port()
        super().__init__(
            [
                require("prometheus"),
                f"--config.file={config_path}",
                f"--storage.tsdb.path={workdir / 'data'}",
                f"--web.listen-address=127.0.0.1:{port}",
                "--storage.tsdb.retention.time=1h",
                "--log.level=warn",
                *(f"--enable-feature={feature}" for feature in features),
            ],
            port,
            workdir / "prometheus.log",
        )

    def query(self, expr: str) -> list[dict]:
        """Instant query; raises on a PromQL error (HTTP 400/422)."""
        url = f"{self.url}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
        try:
            result = http(url)
        except urllib.error.HTTPError as e:
            raise AssertionError(f"query failed: {expr}\n{e.read().decode()}") from None
        assert result["status"] == "success", result
        return result["data"]["result"]

    def alerts(self) -> list[dict]:
        return http(f"{self.url}/api/v1/alerts")["data"]["alerts"]

    def exemplars(self, expr: str, start: float, end: float) -> list[dict]:
        """The stored exemplars of the series `expr`'s selectors select, between two Unix times, as
        /api/v1/query_exemplars returns them (Grafana's query for a panel with exemplars on): one
        {"seriesLabels", "exemplars": [{"labels", "value", "timestamp"}]} per series."""
        query = urllib.parse.urlencode({"query": expr, "start": start, "end": end})
        url = f"{self.url}/api/v1/query_exemplars?{query}"
        try:
            result = http(url)
        except urllib.error.HTTPError as e:
            raise AssertionError(f"exemplar query failed: {expr}\n{e.read().decode()}") from None
        assert result["status"] == "success", result
        return result["data"] or []

    def rule_health(self) -> list[tuple[str, str, str]]:
        groups = http(f"{self.url}/api/v1/rules")["data"]["groups"]
        return [(r["name"], r["health"], r.get("lastError", "")) for g in groups for r in g["rules"]]


class Alertmanager(_Process):
    name = "alertmanager"

    def __init__(self, config_file: Path, workdir: Path) -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        port = free_port()
        super().__init__(
            [
                require("prometheus-alertmanager"),
                f"--config.file={config_file}",
                f"--storage.path={workdir / 'data'}",
                f"--web.listen-address=127.0.0.1:{port}",
                "--cluster.listen-address=",
                "--log.level=warn",
            ],
            port,
            workdir / "alertmanager.log",
        )

    def post_alerts(self, alerts: list[dict]) -> None:
        http(f"{self.url}/api/v2/alerts", data=json.dumps(alerts).encode())

    def alerts(self) -> list[dict]:
        return http(f"{self.url}/api/v2/alerts")

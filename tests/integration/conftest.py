"""Fixtures of the real-broker integration tests."""

from __future__ import annotations

import pytest

from tests.integration.exporter_process import ExporterProcess


@pytest.fixture
def exporter(tmp_path):
    """Starts `txn-exporter run` processes (waiting until ready); stops them after the test."""
    started: list[ExporterProcess] = []

    def start(bootstrap: str, *args: str) -> ExporterProcess:
        process = ExporterProcess(bootstrap, *args, log=tmp_path / f"exporter-{len(started)}.log")
        started.append(process)
        process.wait_ready(120)
        return process

    yield start
    for process in started:
        process.stop()

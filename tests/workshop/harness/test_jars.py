"""What scripts/setup says it fetches (txn_workshop.harness.jars.missing), and the scripts that run
Kafka's tools from the cached jars (tool_scripts)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from exporter.pipeline import maven
from txn_workshop.harness import jars


def test_what_setup_fetches_for_the_demo_names_both_versions(tmp_path: Path, monkeypatch) -> None:
    """The demo's 4.4.0 brokers run their tools from 4.3.1's jars: two versions fetched, both said."""
    monkeypatch.setenv("TXN_EXPORTER_CACHE", str(tmp_path))
    assert jars.tools_version("4.4.0") == "4.3.1"
    assert jars.missing(["4.4.0"]) == "Kafka 4.4.0's jars, and 4.3.1's for its tools"
    (tmp_path / "kafka" / "4.4.0").mkdir(parents=True)
    (tmp_path / "kafka" / "4.4.0" / maven.MARKER).touch()
    assert jars.missing(["4.4.0"]) == "Kafka 4.3.1's for its tools"
    (tmp_path / "kafka" / "4.3.1").mkdir(parents=True)
    (tmp_path / "kafka" / "4.3.1" / maven.MARKER).touch()
    assert jars.missing(["4.4.0"]) == ""
    assert jars.missing(["4.3.1"]) == ""
    assert jars.missing(["3.9.2", "3.8.1"]) == "Kafka 3.9.2 and 3.8.1's jars"


@pytest.mark.tools
def test_the_tool_scripts_run_kafkas_tools(tmp_path: Path) -> None:
    scripts = jars.tool_scripts(tmp_path / "bin")
    for name in jars.TOOL_SCRIPTS:
        proc = subprocess.run([str(scripts / name), "--version"], capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0 and proc.stdout.startswith(jars.tools_version(jars.DEFAULT_KAFKA_VERSION)), (
            name,
            proc.stdout,
            proc.stderr,
        )

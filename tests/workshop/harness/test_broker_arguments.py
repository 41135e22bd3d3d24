"""What KafkaBroker makes of its arguments before any JVM starts."""

from __future__ import annotations

from pathlib import Path

from txn_workshop.harness.broker import KafkaBroker


def test_a_relative_logging_config_is_made_absolute(tmp_path, monkeypatch) -> None:
    # The broker's JVM runs in another directory: a relative -Dlog4j2.configurationFile would not be
    # found there, and log4j2 would log to the console, silently (bench/sidecar_cost.py was given one).
    monkeypatch.chdir(tmp_path)
    broker = KafkaBroker("4.4.0", workdir=tmp_path / "broker", logging_config=Path("deploy/log4j2.properties"))
    assert broker.logging_config == tmp_path / "deploy" / "log4j2.properties"

"""The Maven cache the harness resolves Kafka's and Spark's connector jars into: atomic, offline
once cached, one-line errors. Real mvn against the local repository scripts/setup filled."""

from __future__ import annotations

import pytest

from exporter.pipeline import connector_jars as connector_jars_module
from exporter.pipeline import maven
from exporter.pipeline.connector_jars import CONNECTOR_ARTIFACTS, SparkJarsError, connector_jars

pytestmark = pytest.mark.tools


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TXN_EXPORTER_CACHE", str(tmp_path))
    return tmp_path


def test_resolves_once_then_works_offline(cache, monkeypatch):
    jars = connector_jars("4.3.0")
    assert sorted(a for a in CONNECTOR_ARTIFACTS if any(j.name.startswith(a + "-") for j in jars)) == sorted(
        CONNECTOR_ARTIFACTS
    )
    assert maven.cached(cache / "spark-kafka" / "4.3.0")
    monkeypatch.setenv("PATH", "/nonexistent")  # no mvn: the cache alone answers
    assert connector_jars("4.3.0") == jars


def test_without_mvn_a_one_line_error(cache, monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(SparkJarsError) as e:
        connector_jars("4.3.0")
    assert (
        str(e.value)
        == f"Spark's Kafka connector 4.3.0 is not cached in {cache / 'spark-kafka' / '4.3.0'} and `mvn` is not on PATH"
    )


def test_a_rejected_result_leaves_no_cache_entry(cache, monkeypatch):
    monkeypatch.setattr(connector_jars_module, "_missing", lambda jars: "no such jar")
    with pytest.raises(SparkJarsError) as e:
        connector_jars("4.3.0")
    assert str(e.value).startswith("mvn failed to resolve Spark's Kafka connector 4.3.0 (no such jar):")
    assert list((cache / "spark-kafka").iterdir()) == []  # neither the entry nor its temp dir

"""The Java transactional workload's build: compiled once per Kafka version and source with the
machine's javac, then served from the cache (without javac); one-line errors. Its transactions are
checked against a real broker in tests/integration/test_java_tv2_client.py."""

from __future__ import annotations

import pytest

from exporter.pipeline import maven
from txn_workshop.harness import java_workload
from txn_workshop.harness.jars import DEFAULT_KAFKA_VERSION, kafka_libs
from txn_workshop.harness.java_workload import MAIN_CLASS, JavaWorkloadError, compiled_classes

pytestmark = pytest.mark.tools


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """An empty harness cache, but the Kafka jars of the shared one (resolving them again is slow)."""
    libs = {DEFAULT_KAFKA_VERSION: kafka_libs(DEFAULT_KAFKA_VERSION)}
    monkeypatch.setattr(java_workload, "kafka_libs", libs.__getitem__)
    monkeypatch.setenv("TXN_EXPORTER_CACHE", str(tmp_path))
    return tmp_path / "java-workload"


def test_compiles_once_then_needs_no_javac(cache, monkeypatch):
    classes = compiled_classes(DEFAULT_KAFKA_VERSION)
    assert (classes / f"{MAIN_CLASS}.class").is_file()
    (home,) = cache.iterdir()  # neither a second entry nor a temp dir left
    assert home.name.startswith(f"{DEFAULT_KAFKA_VERSION}-") and maven.cached(home)
    monkeypatch.setenv("PATH", "/nonexistent")
    assert compiled_classes(DEFAULT_KAFKA_VERSION) == classes


def test_without_javac_a_one_line_error(cache, monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(JavaWorkloadError) as e:
        compiled_classes(DEFAULT_KAFKA_VERSION)
    assert str(e.value) == (
        "`javac` is not on PATH: the Java transactional workload needs a JDK 17+ "
        "(apt-get install openjdk-17-jdk-headless)"
    )


def test_a_failed_compile_leaves_no_cache_entry(cache, monkeypatch, tmp_path):
    monkeypatch.setattr(java_workload, "kafka_libs", lambda version: tmp_path / "no-jars")
    with pytest.raises(JavaWorkloadError) as e:
        compiled_classes(DEFAULT_KAFKA_VERSION)
    assert str(e.value).startswith("javac failed on ") and "org.apache.kafka" in str(e.value)
    assert list(cache.iterdir()) == []

"""The version table (workshop/txn_workshop/harness/versions.py) against the jars it pins: every minor 3.6..4.4,
newest first, and each row's tool classes and logging backend as that version's jars have them."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from txn_workshop.harness import jars, zookeeper
from txn_workshop.harness.versions import (
    FULL_SUITE_VERSIONS,
    KAFKA_VERSIONS,
    VERSIONS,
    ZOOKEEPER_CHECK_VERSIONS,
    kafka_version,
)

MINORS = ["4.4", "4.3", "4.2", "4.1", "4.0", "3.9", "3.8", "3.7", "3.6"]


def _key(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in version.split("."))


def _classes(libs: Path) -> set[str]:
    names: set[str] = set()
    for jar in libs.glob("kafka*.jar"):
        with zipfile.ZipFile(jar) as z:
            names.update(n.removesuffix(".class").replace("/", ".") for n in z.namelist() if n.endswith(".class"))
    return names


def test_one_version_per_minor_newest_first():
    assert [v.rsplit(".", 1)[0] for v in KAFKA_VERSIONS] == MINORS
    assert list(KAFKA_VERSIONS) == sorted(KAFKA_VERSIONS, key=_key, reverse=True)
    assert jars.KAFKA_VERSIONS == KAFKA_VERSIONS and KAFKA_VERSIONS[0] == jars.DEFAULT_KAFKA_VERSION


def test_the_full_suite_runs_on_the_newest_3x_and_4x():
    newest = {major: next(v for v in KAFKA_VERSIONS if v.startswith(major)) for major in ("4.", "3.")}
    assert tuple(newest.values()) == FULL_SUITE_VERSIONS


def test_tools_come_from_the_same_or_an_older_version_of_the_same_major():
    for row in VERSIONS:
        assert _key(row.tools_version) <= _key(row.version)
        assert _key(row.version)[:1] == _key(row.tools_version)[:1]


def test_an_unpinned_version_is_a_clear_error():
    with pytest.raises(ValueError, match="not pinned"):
        kafka_version("3.5.2")
    with pytest.raises(jars.KafkaJarsError, match="not pinned"):
        jars.kafka_libs("3.5.2")


@pytest.mark.tools
@pytest.mark.parametrize("version", KAFKA_VERSIONS)
def test_the_row_names_classes_and_logging_its_jars_have(version):
    row = kafka_version(version)
    broker_libs, tools_libs = jars.kafka_libs(version), jars.tools_libs(version)
    assert jars.tools_version(version) == row.tools_version
    assert row.storage_tool_class in _classes(broker_libs)  # the harness formats with the broker's jars
    tools = _classes(tools_libs)
    for name in (
        "dump_log_segments_class",
        "reassign_partitions_class",
        "config_command_class",
        "jmx_tool_class",
        "transactions_command_class",
        "broker_api_versions_class",
    ):
        assert getattr(row, name) in tools, name
    binding = {1: "slf4j-reload4j-", 2: "log4j-slf4j-impl-"}[row.log4j]
    assert any(p.name.startswith(binding) for p in broker_libs.glob("*.jar"))
    assert (Path(jars.__file__).parent / row.log4j_config).exists()


@pytest.mark.tools
def test_the_jars_command_lists_every_version():
    out = subprocess.run(
        [sys.executable, "-m", "txn_workshop.harness.jars"], capture_output=True, text=True, check=True
    )
    listed = [line.split("\t")[0] for line in out.stdout.splitlines() if " tools" not in line.split("\t")[0]]
    assert listed == list(KAFKA_VERSIONS)


def test_the_demo_takes_every_version():
    out = subprocess.run(
        [sys.executable, "-m", "exporter", "demo", "--help"], capture_output=True, text=True, check=True
    )
    assert all(v in out.stdout for v in KAFKA_VERSIONS)


def test_a_broker_reads_the_row_of_the_version_it_runs(tmp_path):
    """A rolling upgrade changes a stopped broker's version: its tools are then the new version's."""
    from txn_workshop.harness.broker import KafkaBroker

    broker = KafkaBroker("3.9.2", workdir=tmp_path)
    assert broker.kafka == kafka_version("3.9.2")
    broker.version = "4.4.0"
    assert broker.kafka == kafka_version("4.4.0")


@pytest.mark.tools
def test_zookeeper_mode_is_the_3x_rows_and_its_checks_their_newest_and_oldest():
    """4.0 removed ZooKeeper mode (KIP-833): its jars have no ZooKeeper; every 3.x row's jars have the
    server the harness runs (harness.zookeeper)."""
    threes = [v.version for v in VERSIONS if v.zookeeper_mode]
    assert threes == [v for v in KAFKA_VERSIONS if v.startswith("3.")]
    assert (threes[0], threes[-1]) == ZOOKEEPER_CHECK_VERSIONS
    assert all(kafka_version(v).zookeeper_mode for v in ZOOKEEPER_CHECK_VERSIONS)
    for row in VERSIONS:
        server = [p.name for p in jars.kafka_libs(row.version).glob("zookeeper-*.jar")]
        assert bool(server) == row.zookeeper_mode, (row.version, server)
        if row.zookeeper_mode:
            with zipfile.ZipFile(jars.kafka_libs(row.version) / sorted(server)[0]) as z:
                assert zookeeper.MAIN_CLASS.replace(".", "/") + ".class" in z.namelist()

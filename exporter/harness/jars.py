"""Resolve the jars of a Kafka version from Maven Central into a cache outside git.

Layout: ``<cache>/kafka/<version>/libs/*.jar`` plus a ``.complete`` marker. The marker is written
last inside a temp dir which is then renamed into place, so an interrupted run never leaves a
half cache and later calls return at once without running mvn (they work offline).

CLI: ``python -m exporter.harness.jars [VERSION ...]`` (default: all pinned versions).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from importlib import resources
from pathlib import Path

KAFKA_VERSIONS = ("4.4.0", "3.9.2")
DEFAULT_KAFKA_VERSION = "4.4.0"

# kafka-tools and kafka-tools-api 4.4.0 are not on Maven Central (kafka_2.13 4.4.0 is, and lists
# kafka-tools-api 4.4.0 as a dependency, so it does not even resolve as published). Tools for 4.4.0
# run from the complete 4.3.1 classpath: kafka-tools 4.3.1 on 4.4.0's kafka-clients fails with
# NoSuchMethodError, and the 4.3 decoders know every record version 4.4 writes.
_TOOLS_VERSION = {"4.4.0": "4.3.1"}

_MARKER = ".complete"


class KafkaJarsError(RuntimeError):
    pass


def cache_root() -> Path:
    return Path(os.environ.get("TXN_EXPORTER_CACHE") or Path.home() / ".cache" / "kafka-txn-exporter")


def tools_version(version: str) -> str:
    return _TOOLS_VERSION.get(version, version)


def tools_libs(version: str = DEFAULT_KAFKA_VERSION) -> Path:
    """The classpath dir for Kafka's command-line tools against a ``version`` broker."""
    return kafka_libs(tools_version(version))


def uses_log4j2(version: str) -> bool:
    """Kafka 4.x logs through log4j2; 3.x through reload4j (log4j 1 API), as their tarballs do."""
    return int(version.split(".")[0]) >= 4


def kafka_libs(version: str = DEFAULT_KAFKA_VERSION) -> Path:
    """Return the directory holding every jar of ``version``; resolve it with mvn if not cached."""
    home = cache_root() / "kafka" / version
    libs = home / "libs"
    if (home / _MARKER).exists():
        return libs
    mvn = shutil.which("mvn")
    if mvn is None:
        raise KafkaJarsError(f"Kafka {version} jars are not cached in {home} and `mvn` is not on PATH")
    home.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{version}-", dir=home.parent))
    try:
        cmd = [
            mvn, "-B", "-q", "-f", str(resources.files(__package__) / "kafka-pom.xml"),
            f"-Dkafka.version={version}", "dependency:copy-dependencies", f"-DoutputDirectory={tmp / 'libs'}",
        ]
        profiles = ["tools"] if tools_version(version) == version else []
        if uses_log4j2(version):
            profiles.append("log4j2")
        if profiles:
            cmd.append("-P" + ",".join(profiles))
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if proc.returncode != 0 or not any((tmp / "libs").glob("kafka_2.13-*.jar")):
            tail = "\n".join(proc.stdout.splitlines()[-40:])
            raise KafkaJarsError(f"mvn failed to resolve Kafka {version} (exit {proc.returncode}):\n{tail}")
        (tmp / _MARKER).write_text(json.dumps({"kafka": version, "profiles": profiles}) + "\n")
        if home.exists():  # left by an older layout or a crashed run without marker
            shutil.rmtree(home)
        try:
            tmp.rename(home)
        except OSError:
            # Another process finished first; its copy is as good as ours.
            if not (home / _MARKER).exists():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return libs


def main(argv: list[str] | None = None) -> int:
    versions = (sys.argv[1:] if argv is None else argv) or list(KAFKA_VERSIONS)
    for version in versions:
        try:
            print(f"{version}\t{kafka_libs(version)}", flush=True)
            if tools_version(version) != version:
                print(f"{version} tools\t{tools_libs(version)}", flush=True)
        except KafkaJarsError as exc:
            print(exc, file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Resolve the jars of a Kafka version from Maven Central into a cache outside git.

Layout: ``<cache>/kafka/<version>/libs/*.jar`` plus a ``.complete`` marker, resolved and cached as
exporter.harness.maven does it (atomically; offline once cached).

CLI: ``python -m exporter.harness.jars [VERSION ...]`` (default: all pinned versions).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from exporter.harness import maven

KAFKA_VERSIONS = ("4.4.0", "3.9.2")
DEFAULT_KAFKA_VERSION = "4.4.0"

# kafka-tools and kafka-tools-api 4.4.0 are not on Maven Central (kafka_2.13 4.4.0 is, and lists
# kafka-tools-api 4.4.0 as a dependency, so it does not even resolve as published). Tools for 4.4.0
# run from the complete 4.3.1 classpath: kafka-tools 4.3.1 on 4.4.0's kafka-clients fails with
# NoSuchMethodError, and the 4.3 decoders know every record version 4.4 writes.
_TOOLS_VERSION = {"4.4.0": "4.3.1"}


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
    if not maven.cached(home):
        profiles = ["tools"] if tools_version(version) == version else []
        if uses_log4j2(version):
            profiles.append("log4j2")
        maven.resolve(
            home, "kafka-pom.xml", [f"-Dkafka.version={version}", *(["-P" + ",".join(profiles)] if profiles else [])],
            f"Kafka {version} jars",
            lambda jars: None if any(j.startswith("kafka_2.13-") for j in jars) else "no kafka_2.13 jar",
            {"kafka": version, "profiles": profiles}, KafkaJarsError,
        )  # fmt: skip
    return home / "libs"


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

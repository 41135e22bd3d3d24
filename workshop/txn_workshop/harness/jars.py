"""Resolve the jars of a Kafka version from Maven Central into a cache outside git.

Layout: ``<cache>/kafka/<version>/libs/*.jar`` plus a ``.complete`` marker, resolved and cached as
exporter.pipeline.maven does it (atomically; offline once cached).

CLI: ``python -m txn_workshop.harness.jars [--missing] [VERSION ...]`` (default: all pinned versions);
``--missing`` fetches nothing and prints what a run would fetch, in words (scripts/setup's line).
"""

from __future__ import annotations

import shlex
import sys
from importlib import resources
from pathlib import Path

from exporter.pipeline import maven
from txn_workshop.harness.versions import BY_VERSION, DEFAULT_KAFKA_VERSION, KAFKA_VERSIONS, VERSIONS

# Re-exported: callers import the pinned versions from here, as before the version table.
__all__ = [
    "DEFAULT_KAFKA_VERSION",
    "KAFKA_VERSIONS",
    "KafkaJarsError",
    "kafka_libs",
    "tool_scripts",
    "tools_libs",
    "tools_version",
]
# The scripts of a Kafka distribution that the transactions view's commands name, and their main
# class: the version table's field where the class moved between pinned versions, else the class.
TOOL_SCRIPTS: dict[str, str] = {
    "kafka-transactions.sh": "transactions_command_class",
    "kafka-topics.sh": "org.apache.kafka.tools.TopicCommand",
    "kafka-configs.sh": "config_command_class",
    "kafka-log-dirs.sh": "org.apache.kafka.tools.LogDirsCommand",
    "kafka-reassign-partitions.sh": "reassign_partitions_class",
}


class KafkaJarsError(RuntimeError):
    pass


def tools_version(version: str) -> str:
    """The version whose classpath runs the tools against a ``version`` broker (see versions.py)."""
    return BY_VERSION[version].tools_version if version in BY_VERSION else version


def tools_libs(version: str = DEFAULT_KAFKA_VERSION) -> Path:
    """The classpath dir for Kafka's command-line tools against a ``version`` broker."""
    return kafka_libs(tools_version(version))


def kafka_libs(version: str = DEFAULT_KAFKA_VERSION) -> Path:
    """Return the directory holding every jar of ``version``; resolve it with mvn if not cached."""
    home = maven.cache_root() / "kafka" / version
    if not maven.cached(home):
        profiles = _profiles(version)
        maven.resolve(
            home,
            resources.files(__package__) / "kafka-pom.xml",
            [f"-Dkafka.version={version}", *(["-P" + ",".join(profiles)] if profiles else [])],
            f"Kafka {version} jars",
            lambda jars: None if any(j.startswith("kafka_2.13-") for j in jars) else "no kafka_2.13 jar",
            {"kafka": version, "profiles": profiles},
            KafkaJarsError,
        )
    return home / "libs"


def tool_scripts(directory: Path, version: str = DEFAULT_KAFKA_VERSION) -> Path:
    """Writes into ``directory`` a script per TOOL_SCRIPTS name that runs that Kafka tool against a
    ``version`` broker from the cached jars (tools_libs), as a distribution's bin/ would: the demo
    installs no distribution, and with ``directory`` on PATH the commands it shows run as printed."""
    libs = tools_libs(version)
    row = BY_VERSION[version]
    directory.mkdir(parents=True, exist_ok=True)
    for name, main in TOOL_SCRIPTS.items():
        main_class = main if "." in main else getattr(row, main)
        script = directory / name
        script.write_text(
            "#!/bin/sh\n"
            f"# Kafka {tools_version(version)}'s {name} from the jars cached by kafka-txn-exporter's workshop.\n"
            f'exec java -Xmx256m -cp {shlex.quote(str(libs) + "/*")} {main_class} "$@"\n'
        )
        script.chmod(0o755)
    return directory


def _profiles(version: str) -> list[str]:
    """kafka-pom.xml's profiles for a pinned version, or for the tools classpath of one (4.2.1)."""
    row = BY_VERSION.get(version) or next((v for v in VERSIONS if v.tools_version == version), None)
    if row is None:
        raise KafkaJarsError(
            f"Kafka {version} is not pinned (workshop/txn_workshop/harness/versions.py): {', '.join(KAFKA_VERSIONS)}"
        )
    return (["tools"] if row.tools_version == version else []) + (["log4j2"] if row.log4j == 2 else [])


def missing(versions: list[str]) -> str:
    """What resolving ``versions`` would fetch, in words: "" when all is cached, else e.g. "Kafka
    4.4.0's jars, and 4.3.1's for its tools"."""
    home = maven.cache_root() / "kafka"
    brokers = [v for v in versions if not maven.cached(home / v)]
    tools = [
        t for t in dict.fromkeys(tools_version(v) for v in versions) if t not in versions and not maven.cached(home / t)
    ]
    if not brokers and not tools:
        return ""
    said = f"Kafka {_listed(brokers)}'s jars" if brokers else ""
    if tools:
        said += (
            ", and " if said else "Kafka "
        ) + f"{_listed(tools)}'s for {'its' if len(versions) == 1 else 'the'} tools"
    return said


def _listed(versions: list[str]) -> str:
    return versions[0] if len(versions) == 1 else ", ".join(versions[:-1]) + " and " + versions[-1]


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["--missing"]:
        print(missing(args[1:] or list(KAFKA_VERSIONS)))
        return 0
    versions = args or list(KAFKA_VERSIONS)
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

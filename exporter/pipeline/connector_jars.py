"""Resolve Spark's Kafka connector jars from Maven Central into a cache outside git.

The connector is not in the pyspark package. Four jars are missing, all on Maven Central:
spark-sql-kafka-0-10_2.13, spark-token-provider-kafka-0-10_2.13, kafka-clients and commons-pool2
(versions: the table below). The rest of what they need is already in pyspark/jars.

Layout: ``<cache>/spark-kafka/<spark version>/libs/*.jar`` plus a ``.complete`` marker, resolved
and cached as exporter.pipeline.maven does it (atomically; offline once cached).

CLI: ``python -m exporter.pipeline.connector_jars`` prints the four jar paths (scripts/setup runs it).
"""

from __future__ import annotations

import sys
from importlib import resources
from pathlib import Path

from exporter.pipeline import maven

# pyspark version -> (spark-sql-kafka, spark-token-provider-kafka, kafka-clients, commons-pool2).
# Maven Central has no Spark 4.3.0 artifact (nor 4.2.1), checked 2026-11: only PyPI has pyspark
# 4.3.0. The newest connector there is 4.2.0; its token provider stops at 4.0.0 (4.1+ never reached
# Central). kafka-clients and commons-pool2 are the versions spark-parent 4.2.0 pins. The mix is
# proven on pyspark 4.3.0 by tests/integration/test_pipeline.py (batch and streaming reads).
# For another pyspark, the same version everywhere, with 4.2.0's clients and pool.
_CONNECTOR_VERSIONS = {"4.3.0": ("4.2.0", "4.0.0", "3.9.2", "2.13.1")}


def connector_versions(spark: str) -> tuple[str, str, str, str]:
    return _CONNECTOR_VERSIONS.get(spark, (spark, spark, "3.9.2", "2.13.1"))


CONNECTOR_ARTIFACTS = (
    "spark-sql-kafka-0-10_2.13",
    "spark-token-provider-kafka-0-10_2.13",
    "kafka-clients",
    "commons-pool2",
)


_VERSION_PROPERTIES = ("connector.version", "token.provider.version", "kafka.clients.version", "commons.pool2.version")


class SparkJarsError(RuntimeError):
    pass


def spark_version() -> str:
    """The installed pyspark's version (without importing pyspark itself: that is slow)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("pyspark")
    except PackageNotFoundError:
        raise SparkJarsError("pyspark is not installed: pip install 'kafka-txn-exporter[spark]'") from None


def connector_jars(version: str | None = None) -> list[Path]:
    """The four connector jars for Spark ``version`` (default: the installed pyspark's), resolved
    with mvn on first use, from the cache afterwards."""
    version = version or spark_version()
    home = maven.cache_root() / "spark-kafka" / version
    if not maven.cached(home):
        maven.resolve(
            home,
            resources.files(__package__) / "spark-kafka-pom.xml",
            [f"-D{prop}={v}" for prop, v in zip(_VERSION_PROPERTIES, connector_versions(version))],
            f"Spark's Kafka connector {version}",
            _missing,
            {"spark": version, "versions": connector_versions(version)},
            SparkJarsError,
        )
    libs = home / "libs"
    jars = sorted(libs.glob("*.jar"))
    missing = _missing([j.name for j in jars])
    if missing:
        raise SparkJarsError(f"{libs}: {missing}: delete {home} and run again")
    return jars


def _missing(jars: list[str]) -> str | None:
    missing = [a for a in CONNECTOR_ARTIFACTS if not any(j.startswith(a + "-") for j in jars)]
    return f"no {', '.join(missing)} jar" if missing else None


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    try:
        for jar in connector_jars(args[0] if args else None):
            print(jar, flush=True)
    except SparkJarsError as exc:
        print(exc, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""One SparkSession for the whole test run (local[2], 2 shuffle partitions), stopped at exit.

Shared by tests/pipeline and tests/integration/test_pipeline*.py through `spark_session_for_tests()`
rather than a fixture in two conftest files (which pytest would instantiate twice)."""

from __future__ import annotations

import atexit

import pytest

_session = None


def spark_session_for_tests():
    global _session
    if _session is None:
        pytest.importorskip("pyspark")
        from exporter.pipeline.session import spark_session

        _session = spark_session(
            "local[2]",
            shuffle_partitions=2,
            progress=False,
            extra_conf={"spark.sql.execution.arrow.maxRecordsPerBatch": "5000"},
        )
        atexit.register(_session.stop)
    return _session

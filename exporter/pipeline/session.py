"""The SparkSession the pipeline runs on: local[*] by default, any master when asked.

Checks first what would otherwise surface as a page of JVM stack trace: pyspark installed, Java
17 to 22 found. Static settings (jars, driver memory) only apply before the process's first
SparkSession, which is why they are all set here.

With `log`, what the JVM prints goes to that file, not the terminal: its start-up lines (incubator
modules, the log4j profile, native-hadoop), Spark's own log and its Python workers' output; the
progress bar on a terminal is then drawn from here.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from exporter.pipeline.errors import PipelineError

# Java 23+ breaks Hadoop's login code (Subject.getSubject); Spark 4 needs 17+.
_JAVA_MIN, _JAVA_MAX = 17, 22
_KAFKA_PROVIDER = "org.apache.spark.sql.kafka010.KafkaSourceProvider"


def check_java() -> str:
    """The java binary Spark will start; raises PipelineError if missing or unsuitable."""
    home = os.environ.get("JAVA_HOME")
    java = os.path.join(home, "bin", "java") if home else shutil.which("java")
    if not java or not os.path.exists(java):
        where = f"JAVA_HOME={home}" if home else "PATH"
        raise PipelineError(
            f"Java {_JAVA_MIN}+ is needed to run Spark, and none was found on {where} (apt-get install openjdk-17-jre-headless)"
        )
    try:
        out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=60).stderr
    except (OSError, subprocess.TimeoutExpired) as e:
        raise PipelineError(f"cannot run {java}: {e}") from None
    match = re.search(r'version "(\d+)(?:\.(\d+))?', out)
    major = int(match.group(1)) if match else 0
    if major == 1 and match and match.group(2):  # "1.8.0_x"
        major = int(match.group(2))
    if not _JAVA_MIN <= major <= _JAVA_MAX:
        raise PipelineError(
            f"Spark needs Java {_JAVA_MIN} to {_JAVA_MAX}; {java} is Java {major or '?'} (set JAVA_HOME)"
        )
    return java


def spark_session(
    master: str | None = None,
    app_name: str = "txn-exporter pipeline",
    kafka: bool = True,
    shuffle_partitions: int | None = None,
    extra_conf: dict[str, str] | None = None,
    progress: bool | None = None,
    log: str | os.PathLike | None = None,
):
    """The process's SparkSession (created on first call with these settings; `log`: the file the
    JVM's output goes to when this call starts it)."""
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        raise PipelineError("pyspark is not installed: pip install 'kafka-txn-exporter[spark]'") from None
    check_java()
    # Workers must run this interpreter (it has pyarrow and the exporter package).
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    submitted = under_spark_submit()
    builder = SparkSession.builder.appName(app_name)
    if master or not submitted:
        builder = builder.master(master or "local[*]")
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    show_progress = progress if progress is not None else sys.stderr.isatty()
    log = None if submitted else log  # spark-submit started the JVM: its output goes where it says
    conf = {
        "spark.ui.enabled": "false",
        # With a log, Spark's bar would write there: drawn from here instead (_stage_progress).
        "spark.ui.showConsoleProgress": "true" if show_progress and log is None else "false",
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.execution.arrow.maxRecordsPerBatch": "20000",
        "spark.sql.sources.partitionOverwriteMode": "dynamic",
        # Spark's default (AdminClient) Kafka offset reader drops internal topics, so
        # `subscribe=__transaction_state` would silently read nothing: use the consumer-based one.
        "spark.sql.streaming.kafka.useDeprecatedOffsetFetching": "true",
        "spark.driver.memory": os.environ.get("TXN_EXPORTER_SPARK_DRIVER_MEMORY", "2g"),
    }
    if shuffle_partitions:
        conf["spark.sql.shuffle.partitions"] = str(shuffle_partitions)
    if kafka and not submitted:  # spark-submit's --jars/--packages put the connector there (see below)
        from exporter.pipeline.connector_jars import SparkJarsError, connector_jars

        try:
            jars = connector_jars()
        except SparkJarsError as e:
            raise PipelineError(str(e).splitlines()[0]) from None
        conf["spark.jars"] = ",".join(str(j) for j in jars)
    conf.update(extra_conf or {})
    for key, value in conf.items():
        builder = builder.config(key, value)
    if log is not None:
        with _output_to(Path(log)):
            spark = builder.getOrCreate()
        if show_progress:
            _stage_progress(spark)
    else:
        spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(os.environ.get("TXN_EXPORTER_SPARK_LOG_LEVEL", "WARN"))
    if kafka and submitted:
        _check_connector(spark)
    return spark


@contextmanager
def _output_to(log: Path) -> Iterator[None]:
    """This process's stdout and stderr are `log` meanwhile: a JVM started then inherits them."""
    try:
        log.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    except OSError as e:
        raise PipelineError(f"cannot write Spark's log {log}: {e.strerror}") from None
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    try:
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        yield
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for f in (fd, *saved):
            os.close(f)


def _stage_progress(spark, period_s: float = 0.5) -> None:
    """Spark's console progress bar, drawn from here: Spark's own writes to the JVM's stderr, the
    log. One line, `[Stage N: done + running / tasks]` per active stage, cleared when none is."""
    tracker = spark.sparkContext.statusTracker()

    def draw() -> None:
        shown = ""
        while True:
            time.sleep(period_s)
            try:
                stages = [tracker.getStageInfo(i) for i in sorted(tracker.getActiveStageIds())]
            except Exception:  # the session stopped, or the process is exiting
                return
            line = " ".join(
                f"[Stage {s.stageId}: {s.numCompletedTasks} + {s.numActiveTasks} / {s.numTasks}]"
                for s in stages
                if s is not None
            )
            if line != shown:
                sys.stderr.write("\r" + " " * len(shown) + "\r" + line)
                sys.stderr.flush()
                shown = line

    threading.Thread(target=draw, name="spark-progress", daemon=True).start()


def _check_connector(spark) -> None:
    """Under spark-submit the driver JVM started before this code ran: spark.jars set now would not
    reach its classpath (Spark would fail later with KAFKA_DATA_SOURCE_NOT_ENABLED, after minutes
    on a cluster), and would replace the jars spark-submit ships. So say what to add, at once."""
    jvm = spark.sparkContext._jvm
    try:
        jvm.java.lang.Class.forName(
            _KAFKA_PROVIDER, False, jvm.java.lang.Thread.currentThread().getContextClassLoader()
        )
    except Exception:
        raise PipelineError(
            "Spark's Kafka connector is not on this spark-submit's classpath: add "
            '--jars "$(python -m exporter.pipeline.connector_jars | paste -sd, -)" (see docs/pipeline.md, the pipeline on a cluster)'
        ) from None


def under_spark_submit() -> bool:
    """Under spark-submit, the master comes from there."""
    return "spark.master" in os.environ.get("PYSPARK_SUBMIT_ARGS", "") or bool(os.environ.get("SPARK_ENV_LOADED"))

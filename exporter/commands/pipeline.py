"""`txn-exporter pipeline`: the data pipeline on Spark (exporter.pipeline).

  pipeline build   --out DIR [--kafka CLUSTER=HOST:PORT]... [--segments CLUSTER=PATH]...
  pipeline stream  --out DIR --kafka CLUSTER=HOST:PORT... [--trigger available-now|continuous]
  pipeline backfill --out DIR --file history.om   (OpenMetrics for promtool tsdb create-blocks-from)
  pipeline report  --out DIR --html report.html

Spark runs local[*] unless --master says otherwise (or under spark-submit, which sets it).
Errors a user can fix (a bad path, an unreachable cluster, no Java, the `spark` extra not installed)
print one line and exit 2.

The pipeline's modules need the `spark` extra (pyspark and its Arrow stack), which the sidecar's
wheel and image leave out: this module imports them only once a step runs, after checking they are
there, so `txn-exporter --help` and every other command work without them.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from pathlib import Path

from exporter.pipeline.errors import PipelineError

_PROG = "txn-exporter pipeline"
# What pyproject.toml's `spark` extra installs, by import name (tests/commands/test_pipeline.py holds
# the two together).
SPARK_EXTRA = ("pyspark", "pyarrow", "pandas", "numpy", "matplotlib")
INSTALL_HINT = "pip install 'kafka-txn-exporter[spark]'"


def missing_spark_extra() -> list[str]:
    """The spark extra's modules that cannot be imported here."""
    return [name for name in SPARK_EXTRA if importlib.util.find_spec(name) is None]


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "pipeline",
        help="the data pipeline on Spark: lifecycles, pending history, forensics, backfill, report",
        description="Transaction lifecycles, pending-markers history and per-transactional-id forensics "
        "from __transaction_state (live clusters or segment files), on Spark (local[*] by default).",
    )
    # Not required of argparse: without a step, the missing extra is said first (_no_step).
    sub = parser.add_subparsers(dest="pipeline_command", metavar="STEP")
    parser.set_defaults(func=_guarded(lambda args: _no_step(parser)))

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument("--out", required=True, help="output directory (Parquet tables)")
        p.add_argument("--master", help="Spark master (default local[*], or spark-submit's)")
        p.add_argument("--quiet", action="store_true", help="no progress output")

    def inputs(p: argparse.ArgumentParser) -> None:
        p.add_argument(
            "--kafka",
            action="append",
            default=[],
            metavar="CLUSTER=HOST:PORT[,HOST:PORT]",
            help="a live cluster's __transaction_state (repeatable, one label each)",
        )
        p.add_argument(
            "--kafka-option",
            action="append",
            default=[],
            metavar="KEY=VALUE",
            help="extra Kafka source option for every cluster, e.g. kafka.security.protocol=SSL",
        )
        p.add_argument(
            "--pending-resolution-seconds", type=int, default=60, help="pending-history bucket (default 60: per minute)"
        )
        p.add_argument(
            "--late-markers-ms",
            type=int,
            default=60_000,
            help="markers slower than this make a transaction late/hanging (default 60000)",
        )

    build = sub.add_parser("build", help="batch: read everything, write every table")
    common(build)
    inputs(build)
    build.add_argument(
        "--segments",
        action="append",
        default=[],
        metavar="CLUSTER=PATH",
        help="segment files: a NNN.log, a __transaction_state-N dir or a broker log dir (repeatable)",
    )
    build.set_defaults(func=_build)

    stream = sub.add_parser(
        "stream", help="Structured Streaming from live clusters, open transactions kept across micro-batches"
    )
    common(stream)
    inputs(stream)
    stream.add_argument(
        "--trigger",
        choices=("available-now", "continuous"),
        default="available-now",
        help="available-now: what is there, then stop; continuous: every --interval until stopped",
    )
    stream.add_argument("--interval", default="30 seconds", help="micro-batch interval when continuous")
    stream.add_argument("--checkpoint", help="checkpoint dir (default OUT/checkpoint)")
    stream.add_argument("--max-offsets-per-trigger", type=int)
    stream.set_defaults(func=_stream)

    backfill = sub.add_parser(
        "backfill", help="OpenMetrics file of the history series, for promtool tsdb create-blocks-from openmetrics"
    )
    common(backfill)
    backfill.add_argument("--file", required=True, type=Path, help="the OpenMetrics file to write")
    backfill.set_defaults(func=_backfill)

    report = sub.add_parser("report", help="an HTML page with plots")
    common(report)
    report.add_argument("--html", required=True, type=Path, help="the HTML file to write")
    report.add_argument("--top", type=int, default=20, help="offending transactional ids to show")
    report.set_defaults(func=_report)


def run(args: argparse.Namespace) -> int:
    return args.func(args)


class _Progress:
    """One line per step on stderr, with elapsed time; on a terminal, a bar shows each stage's tasks."""

    def __init__(self, quiet: bool) -> None:
        self.quiet = quiet
        self.t0 = time.monotonic()
        self.clear = "\r\x1b[K" if sys.stderr.isatty() else ""  # the progress bar's line, if drawn

    def __call__(self, name: str) -> None:
        if not self.quiet:
            print(f"{self.clear}[{time.monotonic() - self.t0:7.1f}s] {name}", file=sys.stderr, flush=True)


def _no_step(parser: argparse.ArgumentParser) -> int:
    parser.print_usage(sys.stderr)
    print(f"{_PROG}: a STEP is required", file=sys.stderr)
    return 2


def _guarded(fn):
    def wrapper(args: argparse.Namespace) -> int:
        missing = missing_spark_extra()
        if missing:
            print(
                f"{_PROG}: needs the spark extra ({', '.join(missing)} not installed): {INSTALL_HINT}", file=sys.stderr
            )
            return 2
        try:
            return fn(args)
        except PipelineError as e:
            print(f"{_PROG}: {e}", file=sys.stderr)
            return 2

    return wrapper


def _labelled(specs: list[str], what: str) -> list[tuple[str, str]]:
    pairs = []
    for spec in specs:
        label, sep, value = spec.partition("=")
        if not sep or not label or not value:
            raise PipelineError(f"--{what} wants CLUSTER=VALUE, got {spec!r}")
        pairs.append((label, value))
    labels = [label for label, _ in pairs]
    if len(set(labels)) != len(labels):
        raise PipelineError(f"a cluster label is given twice: {labels}")
    return pairs


def _kafka_inputs(args: argparse.Namespace):
    from exporter.pipeline.sources import check_reachable
    from exporter.pipeline.tables import KafkaInput

    options: list[tuple[str, str]] = []
    for spec in args.kafka_option:
        key, sep, value = spec.partition("=")
        if not sep or not key:
            raise PipelineError(f"--kafka-option wants KEY=VALUE, got {spec!r}")
        options.append((key, value))
    inputs = [KafkaInput(c, b, tuple(options)) for c, b in _labelled(args.kafka, "kafka")]
    for k in inputs:
        check_reachable(k)
    return inputs


def _session(args: argparse.Namespace, kafka: bool, step: _Progress):
    """Spark, its JVM's output in OUT/logs/spark-STEP.log (under spark-submit: where it sends it)."""
    from exporter.pipeline.session import spark_session, under_spark_submit

    log = None if under_spark_submit() else Path(args.out).resolve() / "logs" / f"spark-{args.pipeline_command}.log"
    step("starting Spark" + (f" (Spark's log: {log})" if log else ""))
    return spark_session(args.master, kafka=kafka, progress=None if not args.quiet else False, log=log)


@_guarded
def _build(args: argparse.Namespace) -> int:
    from exporter.pipeline.sources import segment_input
    from exporter.pipeline.tables import build

    segments = [segment_input(c, p) for c, p in _labelled(args.segments, "segments")]
    kafka = _kafka_inputs(args)
    if not kafka and not segments:
        raise PipelineError("nothing to read: give --kafka CLUSTER=HOST:PORT and/or --segments CLUSTER=PATH")
    step = _Progress(args.quiet)
    spark = _session(args, kafka=bool(kafka), step=step)
    build(
        spark,
        kafka,
        segments,
        str(Path(args.out).resolve()),
        args.pending_resolution_seconds,
        args.late_markers_ms,
        step,
    )
    step(f"done: {args.out}")
    return 0


@_guarded
def _stream(args: argparse.Namespace) -> int:
    from exporter.pipeline.stream import run_stream

    kafka = _kafka_inputs(args)
    if not kafka:
        raise PipelineError("stream reads live clusters: give --kafka CLUSTER=HOST:PORT")
    step = _Progress(args.quiet)
    spark = _session(args, kafka=True, step=step)
    out = str(Path(args.out).resolve())
    run_stream(
        spark,
        kafka,
        out,
        checkpoint=args.checkpoint or f"{out}/checkpoint",
        trigger=args.trigger,
        interval=args.interval,
        max_offsets_per_trigger=args.max_offsets_per_trigger,
        resolution_s=args.pending_resolution_seconds,
        late_markers_ms=args.late_markers_ms,
        step=step,
    )
    step(f"done: {args.out}")
    return 0


def _require_tables(out: Path, *names: str) -> None:
    for name in names:
        if not (out / name).is_dir():
            raise PipelineError(f"{out / name} does not exist: run `{_PROG} build --out {out} ...` first")


@_guarded
def _backfill(args: argparse.Namespace) -> int:
    from exporter.pipeline.backfill import write_openmetrics

    out = Path(args.out).resolve()
    _require_tables(out, "pending_history", "lifecycles")
    step = _Progress(args.quiet)
    spark = _session(args, kafka=False, step=step)
    step("writing OpenMetrics")
    series = write_openmetrics(spark, str(out), args.file)
    if series:
        step(f"done: {args.file} ({series} samples)")
    else:  # the file is valid, its families empty
        step(f"done: {args.file} has no samples: no transaction was prepared, so no markers were ever pending")
    return 0


@_guarded
def _report(args: argparse.Namespace) -> int:
    from exporter.pipeline.report import write_report

    out = Path(args.out).resolve()
    _require_tables(out, "lifecycles", "pending_history", "transactional_ids", "candidates", "as_of")
    step = _Progress(args.quiet)
    spark = _session(args, kafka=False, step=step)
    step("writing report")
    write_report(spark, str(out), args.html, top=args.top)
    step(f"done: {args.html}")
    return 0

"""The pipeline's history as OpenMetrics, for `promtool tsdb create-blocks-from openmetrics FILE DIR`.

Series (one per cluster; the names are a contract):
  kafka_txn_history_pending_markers{cluster}          gauge: transactions with pending markers at
      the bucket's start (what the live exporter's kafka_transactions_with_pending_markers read then)
  kafka_txn_history_pending_markers_max{cluster}      gauge: the most within the bucket, at its start
  kafka_txn_history_transactions_total{cluster,result} counter: transactions completed (commit/abort)
      before the sample's time, counted from the start of the data
  kafka_txn_history_timed_out_transactions_total{cluster} counter: of those, aborted on timeout
Samples every bucket (--pending-resolution-seconds of the build, a minute by default), timestamps in
seconds. Families are written whole, series by series in time order, then `# EOF`. With no
history (no transaction was ever prepared) the families have no samples: a valid, empty file.
"""

from __future__ import annotations

from pathlib import Path

_PREFIX = "kafka_txn_history_"


def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def write_openmetrics(spark, out: str, path: Path) -> int:
    from pyspark.sql import functions as F

    from exporter.pipeline.tables import read_table

    history = read_table(spark, out, "pending_history").select("cluster", "time_ms", "pending", "pending_max")
    # The bucket size the build used: the step between a cluster's first two buckets (60 s if one).
    steps = (
        history.groupBy("cluster")
        .agg(F.sort_array(F.collect_list("time_ms")).alias("t"))
        .select("cluster", F.when(F.size("t") > 1, F.col("t")[1] - F.col("t")[0]).otherwise(60_000).alias("step"))
    )
    resolution = {r["cluster"]: r["step"] for r in steps.collect()}
    lc = read_table(spark, out, "lifecycles").where(F.col("complete_ms").isNotNull())
    completions: dict[tuple[str, str], dict[int, int]] = {}
    timeouts: dict[str, dict[int, int]] = {}
    for cluster, step in resolution.items():
        rows = (
            lc.where(F.col("cluster") == cluster)
            .groupBy(((F.floor(F.col("complete_ms") / step) + 1) * step).alias("t"), "result")
            .agg(F.count("*").alias("n"), F.sum(F.col("timed_out").cast("int")).alias("timed_out"))
            .collect()
        )
        for r in rows:
            completions.setdefault((cluster, r["result"]), {})[r["t"]] = r["n"]
            timeouts.setdefault(cluster, {})[r["t"]] = timeouts.get(cluster, {}).get(r["t"], 0) + (r["timed_out"] or 0)

    samples = 0
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as f:
        series: dict[str, list[tuple[int, int, int]]] = {}
        for row in history.orderBy("cluster", "time_ms").toLocalIterator():
            series.setdefault(row["cluster"], []).append((row["time_ms"], row["pending"], row["pending_max"]))
        for name, index, help_ in (
            (
                "pending_markers",
                1,
                "Transactions with pending markers at the sample time, from __transaction_state history.",
            ),
            (
                "pending_markers_max",
                2,
                "Most transactions with pending markers within the bucket starting at the sample time.",
            ),
        ):
            f.write(f"# HELP {_PREFIX}{name} {help_}\n# TYPE {_PREFIX}{name} gauge\n")
            for cluster, points in series.items():
                labels = f'{{cluster="{_label(cluster)}"}}'
                for point in points:
                    f.write(f"{_PREFIX}{name}{labels} {point[index]} {point[0] / 1000:.3f}\n")
                    samples += 1
        # Counters: cumulative, sampled at every bucket boundary of the cluster's history.
        f.write(
            f"# HELP {_PREFIX}transactions Transactions completed, by result, from __transaction_state history.\n"
            f"# TYPE {_PREFIX}transactions counter\n"
        )
        for cluster, points in series.items():
            for result in ("abort", "commit"):
                samples += _counter(
                    f,
                    f'{_PREFIX}transactions_total{{cluster="{_label(cluster)}",result="{result}"}}',
                    [t for t, _, _ in points] + [points[-1][0] + resolution[cluster]],
                    completions.get((cluster, result), {}),
                )
        f.write(
            f"# HELP {_PREFIX}timed_out_transactions Transactions the coordinator aborted on timeout (KIP-588).\n"
            f"# TYPE {_PREFIX}timed_out_transactions counter\n"
        )
        for cluster, points in series.items():
            samples += _counter(
                f,
                f'{_PREFIX}timed_out_transactions_total{{cluster="{_label(cluster)}"}}',
                [t for t, _, _ in points] + [points[-1][0] + resolution[cluster]],
                timeouts.get(cluster, {}),
            )
        f.write("# EOF\n")
    return samples


def _counter(f, series: str, times: list[int], increments: dict[int, int]) -> int:
    """Writes the cumulative count at each time (completions in buckets ending at or before it).
    Completions before the first sample count from the start."""
    total = sum(n for t, n in increments.items() if t <= times[0])
    ordered = sorted((t, n) for t, n in increments.items() if t > times[0])
    i = 0
    for t in times:
        while i < len(ordered) and ordered[i][0] <= t:
            total += ordered[i][1]
            i += 1
        f.write(f"{series} {total} {t / 1000:.3f}\n")
    return len(times)

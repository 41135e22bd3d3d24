"""`txn-exporter pipeline report`: one self-contained HTML page (plots inlined as PNG).

Sections: totals per cluster; transaction-duration distributions by result (log-scale histogram,
binned in Spark: only the bins reach the driver); the pending-markers history per cluster; the top
offending transactional ids (timeouts, then aborts, then p99 duration); the late/hanging candidates.
What there is none of (no late or hanging transaction, no abort, nothing prepared...) is said in words.
"""

from __future__ import annotations

import base64
import html
import io
from pathlib import Path

_BINS_PER_DECADE = 10


def _png(fig) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
    import matplotlib.pyplot as plt

    plt.close(fig)
    return f'<img alt="" src="data:image/png;base64,{base64.b64encode(buf.getvalue()).decode()}">'


def _table(rows: list[dict], columns: list[str]) -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape('' if r[c] is None else str(r[c]))}</td>" for c in columns) + "</tr>"
        for r in rows
    )
    return f"<table><tr>{head}</tr>{body}</table>"


def _words(text: str) -> str:
    return f"<p>{html.escape(text)}</p>"


def write_report(spark, out: str, path: Path, top: int = 20) -> None:
    """The report of OUT's tables. A section with nothing to show says so in words (a healthy
    cluster has no late or hanging transactions; a quiet one may have prepared nothing)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from pyspark.sql import functions as F

    from exporter.pipeline.tables import read_table

    lc = read_table(spark, out, "lifecycles")
    history = read_table(spark, out, "pending_history")
    ids = read_table(spark, out, "transactional_ids")
    sections = []

    # Every cluster read (as_of has one row per cluster with records), with or without transactions.
    per_cluster = {
        r["cluster"]: r.asDict()
        for r in lc.groupBy("cluster")
        .agg(
            F.count("*").alias("transactions"),
            F.sum(F.when(F.col("result") == "commit", 1).otherwise(0)).alias("commits"),
            F.sum(F.when(F.col("result") == "abort", 1).otherwise(0)).alias("aborts"),
            F.sum(F.col("timed_out").cast("int")).alias("timeouts"),
            F.sum(F.when(F.col("result").isNull(), 1).otherwise(0)).alias("open"),
            F.percentile("duration_ms", 0.99).alias("p99_duration_ms"),
        )
        .collect()
    }
    clusters = sorted(
        {r["cluster"] for r in read_table(spark, out, "as_of").select("cluster").collect()} | set(per_cluster)
    )
    zero = {"transactions": 0, "commits": 0, "aborts": 0, "timeouts": 0, "open": 0, "p99_duration_ms": None}
    totals = [per_cluster.get(c, {**zero, "cluster": c}) for c in clusters]
    if not clusters:
        sections.append(
            "<h2>Totals</h2>" + _words("No records were read: the input held no __transaction_state record.")
        )
    else:
        sections.append(
            "<h2>Totals</h2>"
            + _table(totals, ["cluster", "transactions", "commits", "aborts", "timeouts", "open", "p99_duration_ms"])
            + (
                ""
                if per_cluster
                else _words(
                    "No transactions in the records read: only producer ids given out (InitProducerId) or tombstones."
                )
            )
        )

    # Duration distribution: log10 bins computed in Spark.
    b = F.floor(F.log10(F.greatest(F.col("duration_ms"), F.lit(1))) * _BINS_PER_DECADE)
    kind = F.when(F.col("timed_out"), F.lit("timeout")).otherwise(F.col("result"))
    bins = lc.where(F.col("duration_ms").isNotNull()).groupBy(kind.alias("kind"), b.alias("bin")).count().collect()
    if not bins:
        sections.append("<h2>Duration distributions</h2>" + _words("No transaction completed: no durations to show."))
    else:
        fig, ax = plt.subplots(figsize=(9, 4))
        for k in sorted({r["kind"] for r in bins}):
            pts = sorted((r["bin"], r["count"]) for r in bins if r["kind"] == k)
            ax.step([10 ** (p / _BINS_PER_DECADE) for p, _ in pts], [c for _, c in pts], where="post", label=k)
        ax.set_xscale("log")
        ax.set_xlabel("transaction duration, begin to complete (ms)")
        ax.set_ylabel("transactions")
        ax.legend()
        kinds = {r["kind"] for r in bins}
        none = ([] if kinds & {"abort", "timeout"} else ["No transaction was aborted."]) + (
            [] if "timeout" in kinds else ["No transaction timed out."]
        )
        sections.append("<h2>Duration distributions</h2>" + _png(fig) + "".join(map(_words, none)))

    history_clusters = sorted(r["cluster"] for r in history.select("cluster").distinct().collect())
    if not history_clusters:
        sections.append(
            "<h2>Pending-markers history</h2>" + _words("No transaction was prepared: no markers were ever pending.")
        )
    else:
        fig, ax = plt.subplots(figsize=(9, 4))
        for cluster in history_clusters:
            pts = history.where(F.col("cluster") == cluster).orderBy("time_ms").select("time", "pending_max").collect()
            ax.step([r["time"] for r in pts], [r["pending_max"] for r in pts], where="post", label=cluster)
        ax.set_ylabel("transactions with pending markers (max per bucket)")
        ax.legend()
        fig.autofmt_xdate()
        sections.append("<h2>Pending-markers history</h2>" + _png(fig))

    worst = [
        r.asDict()
        for r in ids.orderBy(F.desc("timeouts"), F.desc("aborts"), F.desc("p99_duration_ms")).limit(top).collect()
    ]
    columns = [
        "cluster",
        "transactional_id",
        "transactions",
        "commits",
        "aborts",
        "timeouts",
        "fenced",
        "open",
        "p99_duration_ms",
        "max_duration_ms",
        "p99_markers_ms",
    ]
    if not worst:
        sections.append(
            "<h2>Offending transactional ids</h2>" + _words("No transactional ids: no transaction to rank.")
        )
    elif not any(r["aborts"] or r["timeouts"] for r in worst):
        sections.append(
            f"<h2>Top {len(worst)} transactional ids by p99 duration</h2>"
            + _words("No transactional id had an abort or a timeout: the slowest by p99 duration.")
            + _table(worst, columns)
        )
    else:
        fig, ax = plt.subplots(figsize=(9, max(2, 0.3 * len(worst))))
        labels = [f"{r['cluster']}/{r['transactional_id']}" for r in worst][::-1]
        ax.barh(labels, [r["timeouts"] for r in worst][::-1], label="timeouts")
        ax.barh(
            labels,
            [r["aborts"] - r["timeouts"] for r in worst][::-1],
            left=[r["timeouts"] for r in worst][::-1],
            label="other aborts",
        )
        ax.set_xlabel("transactions")
        ax.legend()
        sections.append(f"<h2>Top {len(worst)} offending transactional ids</h2>" + _png(fig) + _table(worst, columns))

    cand = [r.asDict() for r in read_table(spark, out, "candidates").orderBy(F.desc("age_ms")).limit(top).collect()]
    for r in cand:
        r["reasons"] = ", ".join(r["reasons"])
    sections.append(
        f"<h2>Late and hanging transactions (top {top} by age)</h2>"
        + (
            _table(
                cand,
                [
                    "cluster",
                    "transactional_id",
                    "kind",
                    "reasons",
                    "state",
                    "producer_id",
                    "producer_epoch",
                    "age_ms",
                    "transaction_timeout_ms",
                    "begin",
                ],
            )
            if cand
            else _words(
                "No late or hanging transactions: none completed past its timeout or with slow markers, and none is open "
                "past its timeout or with markers pending too long."
            )
        )
    )

    page = (
        "<!doctype html><html><head><meta charset='utf-8'><title>Kafka transactions report</title>"
        "<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}"
        "td,th{border:1px solid #ccc;padding:2px 6px;font-size:13px}</style></head><body>"
        f"<h1>Kafka transactions: {html.escape(out)}</h1>" + "".join(sections) + "</body></html>"
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(page)

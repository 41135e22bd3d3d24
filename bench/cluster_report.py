"""bench/cluster_cost.py's report: each window's line, the pairs' medians per broker, and the table
over rates, modes and variants."""

from __future__ import annotations

import statistics
from collections import Counter

from bench.bare_consumer import histogram_quantiles

# The request types printed first, in this order; any other whose median difference is not zero follows.
SHOWN = (
    "FetchConsumer",
    "Fetch",
    "FetchFollower",
    "Metadata",
    "ListOffsets",
    "OffsetForLeaderEpoch",
    "DescribeConfigs",
    "DescribeProducers",
    "ListTransactions",
    "DescribeTransactions",
    "ApiVersions",
    "FindCoordinator",
    "DescribeCluster",
    "Produce",
)


def print_window(w: dict) -> None:
    b = w["brokers"]
    exporters = (
        " exporters " + " ".join(f"{b[n]['exporter_cores']:.4f}" for n in b) + ";"
        if w["kind"] != "without"
        else " no exporters;"
    )
    print(
        f"  run {w['run']} pair {w['pair']} {w['kind']:>7}: brokers "
        + " ".join(f"{b[n]['cores']:.3f}" for n in b)
        + f" cores;{exporters} {w['transactions_per_s']:.0f} txn/s over {w['seconds']:.1f} s; "
        f"FetchConsumer/s " + " ".join(f"{b[n]['requests_per_s'].get('FetchConsumer', 0):.0f}" for n in b) + "; "
        f"load average {w['load_average'][0]:.2f}-{w['load_average'][1]:.2f}",
        flush=True,
    )


def summarize(windows: list[dict], variant: str) -> dict[str, dict]:
    """Per broker, over the pairs (run, pair) that have both a `variant` window and one without."""
    by_pair: dict[tuple[int, int], dict[str, dict]] = {}
    for w in windows:
        by_pair.setdefault((w["run"], w["pair"]), {})[w["kind"]] = w
    pairs = [p for p in by_pair.values() if variant in p and "without" in p]
    out = {}
    for n in pairs[0][variant]["brokers"] if pairs else []:
        on = [p[variant]["brokers"][n] for p in pairs]
        off = [p["without"]["brokers"][n] for p in pairs]
        alone = statistics.median(b["cores"] for b in off)
        with_ = statistics.median(b["cores"] for b in on)
        extra = statistics.median(a["cores"] - b["cores"] for a, b in zip(on, off, strict=True))
        exporter = statistics.median(b["exporter_cores"] for b in on)
        threads = {
            kind: round(statistics.median(b["exporter_threads"][kind] for b in on), 4)
            for kind in ("python", "librdkafka")
            if all(b.get("exporter_threads") for b in on)
        }
        kinds = sorted({k for b in on + off for k in b["requests_per_s"]})
        requests = {
            k: statistics.median(
                a["requests_per_s"].get(k, 0.0) - b["requests_per_s"].get(k, 0.0) for a, b in zip(on, off, strict=True)
            )
            for k in kinds
        }
        out[n] = {
            "pairs": len(pairs),
            "broker_alone_cores": round(alone, 4),
            "broker_with_cores": round(with_, 4),
            "broker_extra_cores": round(extra, 4),
            "broker_extra_of_medians_cores": round(with_ - alone, 4),
            "broker_extra_range": [
                round(min(a["cores"] - b["cores"] for a, b in zip(on, off, strict=True)), 4),
                round(max(a["cores"] - b["cores"] for a, b in zip(on, off, strict=True)), 4),
            ],
            "exporter_cores": round(exporter, 4),
            "exporter_pct": round(100 * exporter / alone, 2) if alone else None,
            "exporter_threads_cores": threads,
            "broker_extra_pct": round(100 * extra / alone, 2) if alone else None,
            "total_pct": round(100 * (exporter + extra) / alone, 2) if alone else None,
            "records_per_s": round(statistics.median(b["records_per_s"] for b in on), 1),
            "latency_ms": pooled_quantiles([b.get("latency_ms") for b in on]),
            "exporter_latency_ms": median_quantiles([b.get("exporter_latency_ms") for b in on]),
            "exporters_requests_per_s": {k: round(v, 2) for k, v in requests.items()},
        }
    return out


def pooled_quantiles(histograms: list[dict[int, int] | None]) -> dict[str, int] | None:
    """p50, p99 and max of the windows' receipt minus timestamp together (None for exporters)."""
    pooled: Counter[int] = Counter()
    for histogram in histograms:
        pooled.update(histogram or {})
    if not pooled:
        return None
    q = histogram_quantiles(pooled, (0.5, 0.99, 1.0))
    return {"p50": q[0.5], "p99": q[0.99], "max": q[1.0]}


def median_quantiles(windows: list[dict[str, dict[str, float]] | None]) -> dict[str, dict[str, float]] | None:
    """An exporter's quantiles by target state: the median over its windows of each."""
    by_state: dict[str, dict[str, list[float]]] = {}
    for quantiles in windows:
        for state, q in (quantiles or {}).items():
            for k, v in q.items():
                by_state.setdefault(state, {}).setdefault(k, []).append(v)
    if not by_state:
        return None
    return {state: {k: round(statistics.median(v), 1) for k, v in q.items()} for state, q in by_state.items()}


def shown_requests(requests: dict[str, float]) -> str:
    named = [k for k in SHOWN if k in requests]
    others = [k for k in sorted(requests) if k not in SHOWN and abs(requests[k]) >= 0.05]
    return ", ".join(f"{k} {requests[k]:+.1f}" for k in named + others)


def print_table(cells: list[dict], variants: list[str]) -> None:
    """Per rate, mode, run (and all runs pooled), variant and broker."""
    rows = []
    groups: dict[tuple[int, str], list[dict]] = {}
    for cell in cells:
        groups.setdefault((cell["rate"], cell["mode"]), []).append(cell)
    for (rate, mode), group in groups.items():
        runs = [(str(c["run"]), c["windows"]) for c in group]
        if len(runs) > 1:
            runs.append(("all", [w for c in group for w in c["windows"]]))
        for run, windows in runs:
            for variant in variants:
                for n, s in summarize(windows, variant).items():
                    rows.append((rate, mode, run, variant, n, s))
    print(
        "\nrate/broker  mode        run  variant  broker  alone   with    extra   exporter  exp%   extra%  total%  "
        "records/s  pairs"
    )
    for rate, mode, run, variant, n, s in rows:
        pct = [
            f"{s[k]:6.1f}" if s[k] is not None else "     -" for k in ("exporter_pct", "broker_extra_pct", "total_pct")
        ]
        print(
            f"{rate:>11}  {mode:<10}  {run:>3}  {variant:<7}  {n:>6}  {s['broker_alone_cores']:.3f}  "
            f"{s['broker_with_cores']:.3f}  {s['broker_extra_cores']:+.3f}  {s['exporter_cores']:.4f}    "
            f"{pct[0]}  {pct[1]}  {pct[2]}  {s['records_per_s']:9.1f}  {s['pairs']:5}"
        )
    print("\nrequests the exporters send each broker a second, by type (with minus without, median of the pairs):")
    for rate, mode, run, variant, n, s in rows:
        print(f"  {rate}/broker {mode} run {run} {variant} broker {n}: {shown_requests(s['exporters_requests_per_s'])}")
    print("\nthe exporters' cores by kind of thread (the median of their windows): Python's, librdkafka's")
    for rate, mode, run, variant, n, s in rows:
        if s["exporter_threads_cores"]:
            t = s["exporter_threads_cores"]
            print(f"  {rate}/broker {mode} run {run} {variant} broker {n}: {t['python']:.4f} {t['librdkafka']:.4f}")
    floors = [row for row in rows if row[5]["latency_ms"]]
    if floors:
        print("\nthe floors' receipt minus record timestamp, ms (all their windows):")
        for rate, mode, run, variant, n, s in floors:
            print(f"  {rate}/broker {mode} run {run} {variant} broker {n}: {s['latency_ms']}")
    exporters = [row for row in rows if row[5]["exporter_latency_ms"]]
    if exporters:
        print(
            "\nthe exporters' append-latency bound by target state, ms (the median over their windows of each quantile):"
        )
        for rate, mode, run, variant, n, s in exporters:
            shown = {
                state: {k: q[k] for k in ("0.5", "0.9", "0.99") if k in q}
                for state, q in s["exporter_latency_ms"].items()
            }
            print(f"  {rate}/broker {mode} run {run} {variant} broker {n}: {shown}")

"""bench/cluster_cost.py's report: each window's line, the blocks' medians per broker, the table over
rates and kinds, and the overview README's "What it costs" shows; also from a run's printed output:

    .venv/bin/python bench/cluster_report.py cluster-cost.txt
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.bare_consumer import histogram_quantiles

# A rate is carried when the transactions a second achieved are within this share of those asked.
CARRIED = 0.95
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
        if all(b[n]["exporter_cores"] is not None for n in b)
        else " no exporters;"
    )
    logged = " ".join(f"{b[n]['coordinator_log_bytes_per_s'] / 1024:.1f}" for n in b)
    profiled = (
        "; under the DEBUG log calls " + " ".join(f"{b[n]['logger_cores']:.4f}" for n in b) + " cores"
        if all(b[n].get("logger_cores") is not None for n in b)
        else ""
    )
    print(
        f"  run {w['run']} pair {w['pair']} {w['kind']:>7}: brokers "
        + " ".join(f"{b[n]['cores']:.3f}" for n in b)
        + f" cores;{exporters} {w['transactions_per_s']:.0f} txn/s over {w['seconds']:.1f} s; "
        f"FetchConsumer/s " + " ".join(f"{b[n]['requests_per_s'].get('FetchConsumer', 0):.0f}" for n in b) + "; "
        f"coordinator log KiB/s {logged}; "
        f"load average {w['load_average'][0]:.2f}-{w['load_average'][1]:.2f}{profiled}",
        flush=True,
    )


def summarize(
    windows: list[dict], variant: str, asked: float, prices: dict[str, float] | None = None
) -> dict[str, dict]:
    """Per broker, over the blocks (run, pair) that have both a `variant` window and one without;
    `asked` the transactions a second asked of the cluster. With `prices` (bench/request_cpu.py: µs of
    broker CPU a request, by type), the bill in place too (in_place)."""
    by_pair: dict[tuple[int, int], dict[str, dict]] = {}
    for w in windows:
        by_pair.setdefault((w["run"], w["pair"]), {})[w["kind"]] = w
    pairs = [p for p in by_pair.values() if variant in p and "without" in p]
    achieved = {
        kind: statistics.median(p[kind]["transactions_per_s"] for p in pairs) if pairs else 0.0
        for kind in (variant, "without")
    }
    carried = not asked or all(abs(a - asked) <= (1 - CARRIED) * asked for a in achieved.values())
    out = {}
    for n in pairs[0][variant]["brokers"] if pairs else []:
        on = [p[variant]["brokers"][n] for p in pairs]
        off = [p["without"]["brokers"][n] for p in pairs]
        # The shares' base: the brokers alone in the windows not sampled, where sampling ran (see ALONE).
        unsampled = [p["alone"]["brokers"][n] for p in pairs if "alone" in p]
        alone = statistics.median(b["cores"] for b in unsampled or off)
        with_ = statistics.median(b["cores"] for b in on)
        extra = statistics.median(a["cores"] - b["cores"] for a, b in zip(on, off, strict=True))
        exporter = statistics.median(b["exporter_cores"] or 0.0 for b in on)
        # A broker coordinates a third of the cluster's transactions (balanced_prefix).
        per_broker = [p[variant]["transactions_per_s"] / len(p[variant]["brokers"]) for p in pairs]
        logged = [b["coordinator_log_bytes_per_s"] for b in on]
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
        profiled = [b["logger_cores"] for b in on if b.get("logger_cores") is not None]
        logger = statistics.median(profiled) if profiled else None
        out[n] = {
            "broker_extra_threads": extra_by_thread(on, off),
            # Sampled in place (bench/broker_profile.py): the cores under its coordinator's DEBUG log calls.
            "logger_cores": round(logger, 4) if logger is not None else None,
            "logger_pct": round(100 * logger / alone, 2) if logger is not None and alone else None,
            "pairs": len(pairs),
            "carried": carried,
            "achieved_per_s": {kind: round(a, 1) for kind, a in achieved.items()},
            "coordinator_log_bytes_per_s": round(statistics.median(logged)),
            "coordinator_log_bytes_per_transaction": round(statistics.median(b / t for b, t in zip(logged, per_broker)))
            if asked
            else None,
            "broker_alone_cores": round(alone, 4),
            "broker_alone_sampled": not unsampled and any(b.get("logger_cores") is not None for b in off),
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
            "records_per_s": round(statistics.median(b["records_per_s"] or 0.0 for b in on), 1),
            "latency_ms": pooled_quantiles([b.get("latency_ms") for b in on]),
            "exporter_latency_ms": median_quantiles([b.get("exporter_latency_ms") for b in on]),
            "exporters_requests_per_s": {k: round(v, 2) for k, v in requests.items()},
        }
        out[n]["in_place"] = in_place(out[n], pairs[0][variant].get("level"), requests, alone, prices)
    return out


def in_place(
    s: dict, level: str | None, requests: dict[str, float], alone: float, prices: dict[str, float] | None
) -> dict | None:
    """The bill measured in place (issue 52): the exporter's whole process (/proc), the broker's CPU
    under its coordinator's DEBUG log calls (sampled; none at INFO) and the broker's CPU serving the
    exporter's requests (each priced type's extra requests a second times its µs a request); None
    without prices, or at DEBUG without the samples. Beside it, the difference of windows
    (exporter + broker's extra) and that difference's spread over the blocks, its cross-check."""
    debug = level == "DEBUG" or s["logger_cores"] is not None  # (a window recorded before its level was)
    if prices is None or (debug and s["logger_cores"] is None):
        return None
    serving = {k: max(requests.get(k, 0.0), 0.0) * us / 1e6 for k, us in prices.items()}
    cores = s["exporter_cores"] + (s["logger_cores"] or 0.0) + sum(serving.values())
    low, high = s["broker_extra_range"]
    return {
        "cores": round(cores, 4),
        "pct": round(100 * cores / alone, 2) if alone else None,
        "serving_cores": {k: round(v, 4) for k, v in serving.items()},
        # (RequestMetrics' `Fetch` is FetchConsumer and FetchFollower together: not a type of its own.)
        "unpriced_requests_per_s": {
            k: round(v, 2)
            for k, v in requests.items()
            if k not in prices and k != "Fetch" and v >= 0.5 and k.startswith(("Fetch", "List"))
        },
        "difference_cores": round(s["exporter_cores"] + s["broker_extra_cores"], 4),
        "difference_spread_cores": round((high - low) / 2, 4),
    }


def extra_by_thread(on: list[dict], off: list[dict]) -> dict[str, float]:
    """The broker's extra by kind of JVM thread (bench.proc_stats.thread_group_cores): the median of
    each block's difference, the kinds that moved by 0.0005 cores or more, largest first; empty for
    windows recorded without it."""
    if not all("threads" in b for b in on + off):
        return {}
    groups = sorted({g for b in on + off for g in b["threads"]})
    extra = {
        g: statistics.median(a["threads"].get(g, 0.0) - b["threads"].get(g, 0.0) for a, b in zip(on, off, strict=True))
        for g in groups
    }
    return {g: round(v, 4) for g, v in sorted(extra.items(), key=lambda kv: -abs(kv[1])) if abs(v) >= 0.0005}


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


def rows_of(
    cells: list[dict], variants: list[str], prices: dict[str, float] | None = None
) -> list[tuple[int, str, str, str, dict]]:
    """(rate, run, kind, broker, summary) per rate, run (and all runs pooled), kind and broker."""
    rows = []
    groups: dict[int, list[dict]] = {}
    for cell in cells:
        if cell.get("carried", True):
            groups.setdefault(cell["rate"], []).append(cell)
    for rate, group in groups.items():
        runs = [(str(c["run"]), c["windows"]) for c in group]
        if len(runs) > 1:
            runs.append(("all", [w for c in group for w in c["windows"]]))
        for run, windows in runs:
            for variant in variants:
                for n, s in summarize(windows, variant, rate * len(windows[0]["brokers"]), prices).items():
                    rows.append((rate, run, variant, n, s))
    return rows


def print_table(cells: list[dict], variants: list[str], prices: dict[str, float] | None = None) -> None:
    """Per rate, run (and all runs pooled), kind and broker; the rates not carried named."""
    rows = rows_of(cells, variants, prices)
    for cell in cells:
        if not cell.get("carried", True):
            print(
                f"\n{cell['rate']}/broker not carried in run {cell['run']}: {cell['achieved']}/s achieved by the load alone"
            )
    print(
        "\nrate/broker  run  kind     broker  alone   with    extra   exporter  exp%   extra%  total%  "
        "log B/txn  records/s  blocks  carried"
    )
    for rate, run, variant, n, s in rows:
        pct = [
            f"{s[k]:6.1f}" if s[k] is not None else "     -" for k in ("exporter_pct", "broker_extra_pct", "total_pct")
        ]
        per_txn = s["coordinator_log_bytes_per_transaction"]
        print(
            f"{rate:>11}  {run:>3}  {variant:<7}  {n:>6}  {s['broker_alone_cores']:.3f}  "
            f"{s['broker_with_cores']:.3f}  {s['broker_extra_cores']:+.3f}  {s['exporter_cores']:.4f}    "
            f"{pct[0]}  {pct[1]}  {pct[2]}  {per_txn if per_txn is not None else '-':>9}  "
            f"{s['records_per_s']:9.1f}  {s['pairs']:6}  {'yes' if s['carried'] else 'NO ' + str(s['achieved_per_s'])}"
        )
    print("\nrequests the exporters send each broker a second, by type (with minus without, median of the blocks):")
    for rate, run, variant, n, s in rows:
        print(f"  {rate}/broker run {run} {variant} broker {n}: {shown_requests(s['exporters_requests_per_s'])}")
    print("\nthe broker's extra by kind of JVM thread, cores (median of the blocks' differences, 0.0005 and over):")
    for rate, run, variant, n, s in rows:
        if s["broker_extra_threads"]:
            print(f"  {rate}/broker run {run} {variant} broker {n}: {s['broker_extra_threads']}")
    profiled = [row for row in rows if row[4].get("logger_cores") is not None]
    if profiled:
        print("\nthe cores under the coordinator's DEBUG log calls, sampled by async-profiler (median of the windows):")
        for rate, run, variant, n, s in profiled:
            print(
                f"  {rate}/broker run {run} {variant} broker {n}: {s['logger_cores']:.4f} ({s['logger_pct']}% of alone)"
            )
    placed = [row for row in rows if row[4].get("in_place")]
    if placed:
        print(
            "\nthe bill in place, cores: the exporter + under the DEBUG log calls + serving its requests (priced by "
            "type) = in all, % of alone; beside it the difference of windows (exporter + broker's extra) ± half its "
            "blocks' spread"
        )
        for rate, run, variant, n, s in placed:
            p = s["in_place"]
            print(
                f"  {rate}/broker run {run} {variant} broker {n}: {s['exporter_cores']:.4f} + "
                f"{s['logger_cores'] or 0:.4f} + {sum(p['serving_cores'].values()):.4f} {p['serving_cores']} = "
                f"{p['cores']:.4f} ({p['pct']}%); difference {p['difference_cores']:+.4f} ± {p['difference_spread_cores']:.4f}"
                + (f"; unpriced requests/s {p['unpriced_requests_per_s']}" if p["unpriced_requests_per_s"] else "")
            )
    print("\nthe exporters' cores by kind of thread (the median of their windows): Python's, librdkafka's")
    for rate, run, variant, n, s in rows:
        if s["exporter_threads_cores"]:
            t = s["exporter_threads_cores"]
            print(f"  {rate}/broker run {run} {variant} broker {n}: {t['python']:.4f} {t['librdkafka']:.4f}")
    floors = [row for row in rows if row[4]["latency_ms"]]
    if floors:
        print("\nthe floors' receipt minus record timestamp, ms (all their windows):")
        for rate, run, variant, n, s in floors:
            print(f"  {rate}/broker run {run} {variant} broker {n}: {s['latency_ms']}")
    exporters = [row for row in rows if row[4]["exporter_latency_ms"]]
    if exporters:
        print("\nthe exporters' append latency by target state, ms (the median over their windows of each quantile):")
        for rate, run, variant, n, s in exporters:
            shown = {
                state: {k: q[k] for k in ("0.5", "0.9", "0.99") if k in q}
                for state, q in s["exporter_latency_ms"].items()
            }
            print(f"  {rate}/broker run {run} {variant} broker {n}: {shown}")


def print_overview(cells: list[dict], variants: list[str], prices: dict[str, float] | None = None) -> dict:
    """README's table: per rate and kind, over each run's per-broker medians (three brokers, every
    run), the median and min-max of the exporter's cores, the broker's extra and the total as % of the
    broker alone; and the cores and % against the goal (issue 40: total at most 8% at 10 a broker and
    5% above, the exporter's own 5% and 3%; idle at most 0.002 cores each)."""
    rows = [row for row in rows_of(cells, variants, prices) if row[1] != "all"]
    out: dict = {}
    print("\noverview: median [min-max] over every run's per-broker medians")
    print(
        "rate/broker  kind     exporter cores          broker extra cores       total % of broker   carried"
        "  in place: cores, % of broker"
    )
    for rate in sorted({row[0] for row in rows}):
        for variant in variants:
            mine = [s for r, _, v, _, s in rows if r == rate and v == variant]
            if not mine:
                continue
            figures: dict[str, Any] = {
                key: spread([s[key] for s in mine if s[key] is not None])
                for key in ("exporter_cores", "broker_extra_cores", "total_pct", "exporter_pct")
            }
            placed = [s["in_place"] for s in mine if s.get("in_place")]
            figures["in_place_cores"] = spread([p["cores"] for p in placed])
            figures["in_place_pct"] = spread([p["pct"] for p in placed if p["pct"] is not None])
            figures["difference_cores"] = spread([p["difference_cores"] for p in placed])
            figures["difference_spread_cores"] = spread([p["difference_spread_cores"] for p in placed])
            figures["carried"] = all(s["carried"] for s in mine)
            figures["log_bytes_per_transaction"] = spread(
                [s["coordinator_log_bytes_per_transaction"] for s in mine if s["coordinator_log_bytes_per_transaction"]]
            )
            out.setdefault(str(rate), {})[variant] = figures
            e, x, t = figures["exporter_cores"], figures["broker_extra_cores"], figures["total_pct"]
            print(
                f"{rate:>11}  {variant:<7}  {shown(e, 4):<22}  {shown(x, 4, signed=True):<23}  {shown(t, 1):<18}  "
                f"{'yes' if figures['carried'] else 'NO '}      "
                f"{shown(figures['in_place_cores'], 4)} {shown(figures['in_place_pct'], 1)}"
            )
    for cell in cells:
        if not cell.get("carried", True):
            out.setdefault(str(cell["rate"]), {})["not_carried"] = cell["achieved"]
    if any(f.get("in_place_cores") for by_kind in out.values() for f in by_kind.values() if isinstance(f, dict)):
        print("\nREADME's table (the bill in place; the difference of windows beside it):")
        print("\n".join(readme_rows(out)))
        print(
            f"the difference of windows above the bill in place by more than its noise: {beyond_noise(out) or 'none'}"
        )
    return out


def beyond_noise(overview: dict) -> list[str]:
    """The (rate, kind) cells whose difference of windows exceeds the bill in place by more than the
    blocks' half-spread (medians): what the in-place sum would leave out (issue 52)."""
    return [
        f"{rate}/{kind}"
        for rate, by_kind in overview.items()
        for kind, f in by_kind.items()
        if kind != "not_carried"
        and f.get("in_place_cores")
        and f["difference_cores"]["median"] - f["in_place_cores"]["median"] > f["difference_spread_cores"]["median"]
    ]


MODES = {"clock": "coordinator's clock (`--broker-log`, DEBUG)", "fetch": "fetch-timed (no broker log)"}


def readme_rows(overview: dict) -> list[str]:
    """README's "What it costs" rows: per rate and kind, the bill in place in cores, median (min-max)
    over every run's per-broker medians, then as a share of the broker alone; the exporter's own; and
    the difference of windows, "within noise (±x)" where its median is within its blocks' half-spread."""
    rows = [
        "| transactions/s a broker | mode | in all, cores | of the broker alone | the exporter's own, cores "
        "| cross-check: difference of windows, cores |",
        "|---|---|---|---|---|---|",
    ]
    for rate, by_kind in sorted(overview.items(), key=lambda kv: int(kv[0])):
        for kind, f in by_kind.items():
            if kind == "not_carried" or not f.get("in_place_cores"):
                continue
            c, p, e = f["in_place_cores"], f["in_place_pct"], f["exporter_cores"]
            d, noise = f["difference_cores"], f["difference_spread_cores"]["median"]
            difference = (
                f"within noise (±{noise:.3f})" if abs(d["median"]) <= noise else f"{d['median']:+.3f} (±{noise:.3f})"
            )
            rows.append(
                f"| {rate if rate != '0' else '0 (idle)'} | {MODES.get(kind, kind)} | {c['median']:.4f} "
                f"({c['min']:.4f}-{c['max']:.4f}) | {p['median']:.1f}% ({p['min']:.1f}-{p['max']:.1f}) | "
                f"{e['median']:.4f} | {difference} |"
            )
    return rows


def load_prices(path: str) -> dict[str, float]:
    """bench/request_cpu.py's --json: µs of broker CPU a request, by type."""
    return {t: r["us_per_request"] for t, r in json.loads(Path(path).read_text())["per_request"].items()}


def spread(values: list[float]) -> dict[str, float] | None:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)} if values else None


def shown(s: dict[str, float] | None, digits: int, signed: bool = False) -> str:
    if s is None:
        return "-"
    f = f"{{:{'+' if signed else ''}.{digits}f}}"
    return f"{f.format(s['median'])} [{f.format(s['min'])}, {f.format(s['max'])}]"


# A window's line as print_window writes it, and a rate's header as cluster_cost prints it.
_WINDOW = re.compile(
    r"^  run (\d+) pair (\d+) +(\S+): brokers ([\d. ]+) cores; (?:exporters ([\d. ]+)|no exporters);"
    r" (\d+) txn/s over ([\d.]+) s; FetchConsumer/s [\d ]+; coordinator log KiB/s ([\d. ]+);"
)
_RATE = re.compile(r"^== run (\d+): (\d+) transactions/s a broker asked, (\d+)/s achieved")


def cells_from_output(text: str) -> list[dict]:
    """The cells of a run from its printed output (a run cut short, or one whose --json was not
    asked): each window's line, to the digits it prints; the requests by type are not in it."""
    cells: list[dict] = []
    for line in text.splitlines():
        rate = _RATE.match(line)
        if rate:
            cells.append({"run": int(rate[1]), "rate": int(rate[2]), "windows": [], "achieved": float(rate[3])})
        elif line.startswith("   not carried") and cells:
            cells[-1] = {**cells[-1], "carried": False}
        elif (window := _WINDOW.match(line)) and cells:
            brokers = [float(x) for x in window[4].split()]
            exporters = [float(x) for x in window[5].split()] if window[5] else [None] * len(brokers)
            logged = [float(x) * 1024 for x in window[8].split()]
            cells[-1]["windows"].append(
                {
                    "kind": window[3],
                    "run": int(window[1]),
                    "pair": int(window[2]),
                    "transactions_per_s": float(window[6]),
                    "brokers": {
                        str(n): {
                            "cores": cores,
                            "exporter_cores": exporter,
                            "exporter_threads": None,
                            "records_per_s": None,
                            "latency_ms": None,
                            "exporter_latency_ms": None,
                            "requests_per_s": {},
                            "coordinator_log_bytes_per_s": log_bytes,
                        }
                        for n, (cores, exporter, log_bytes) in enumerate(zip(brokers, exporters, logged), 1)
                    },
                }
            )
    return [c for c in cells if not c.get("carried", True) or c["windows"]]


def main() -> None:
    parser = argparse.ArgumentParser(description="bench/cluster_cost.py's table and overview, from its printed output")
    parser.add_argument("output", type=Path, help="what bench/cluster_cost.py printed, or its --json")
    parser.add_argument("--request-cpu", type=load_prices, help="bench/request_cpu.py's --json: the bill in place too")
    parser.add_argument("--json", type=Path, help="write the overview here too")
    args = parser.parse_args()
    text = args.output.read_text()
    cells = json.loads(text)["cells"] if args.output.suffix == ".json" else cells_from_output(text)
    kinds = list(
        dict.fromkeys(w["kind"] for c in cells for w in c.get("windows", []) if w["kind"] not in ("without", "alone"))
    )
    print_table(cells, kinds, args.request_cpu)
    overview = print_overview(cells, kinds, args.request_cpu)
    if args.json:
        args.json.write_text(json.dumps(overview, indent=1))


if __name__ == "__main__":
    main()

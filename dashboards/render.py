"""Renders the overview dashboard's key panels to a PNG from real Prometheus data (Grafana is not
needed): the same PromQL as the dashboard JSON, drawn with matplotlib (`pip install -e '.[docs]'`).

    python -m dashboards.render --demo 240 --out docs/overview.png
        # runs `txn-exporter demo` and a Prometheus (Debian binary, 1 s scrapes) scraping it for
        # 240 s, then draws the last 240 s
    python -m dashboards.render --prometheus http://prometheus:9090 --minutes 60 --out overview.png
        # from your own Prometheus
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path

from dashboards.overview import OVERVIEW
from dashboards.panels import Panel
from exporter import defaults
from txn_workshop.harness.processes import free_port

KEY_PANELS = (
    "Transactions with pending markers, by broker",
    "Oldest pending markers age, by broker",
    "p99 append latency by target state",
    "Marker retries by error",
    "State transitions by target state",
    "p99 prepare-to-complete by result",
)
_UNITS = {"s": "seconds", "ops": "per second", "short": ""}


def _get(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=30) as response:
        return json.loads(response.read())


def _legend(template: str, labels: dict[str, str]) -> str:
    if template in ("", "__auto"):
        return ", ".join(f"{k}={v}" for k, v in labels.items() if k != "__name__") or "value"
    for key, value in labels.items():
        template = template.replace("{{" + key + "}}", value)
    return template


def query_range(prometheus: str, expr: str, start: float, end: float, step: float) -> list[dict]:
    params = urllib.parse.urlencode({"query": expr, "start": start, "end": end, "step": step})
    return _get(f"{prometheus}/api/v1/query_range?{params}")["data"]["result"]


def render(prometheus: str, start: float, end: float, out: Path, rate_interval: str = "30s") -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels: dict[str, Panel] = {p.title: p for p in OVERVIEW.panels()}
    fig, axes = plt.subplots(3, 2, figsize=(14, 10), sharex=True)
    step = max(1.0, (end - start) / 300)
    for ax, title in zip(axes.flat, KEY_PANELS):
        panel = panels[title]
        for query in panel.queries:
            expr = (
                query.expr.replace("$cluster", ".*")
                .replace("$instance", ".*")
                .replace("$__rate_interval", rate_interval)
            )
            for series in query_range(prometheus, expr, start, end, step):
                xs = [float(t) - end for t, _ in series["values"]]
                ys = [float(v) for _, v in series["values"]]
                ax.plot(xs, ys, linewidth=1.2, label=_legend(query.legend, series["metric"]))
        ax.set_title(title, fontsize=10)
        ax.set_ylabel(_UNITS.get(panel.unit, panel.unit), fontsize=8)
        ax.grid(alpha=0.3)
        ax.tick_params(labelsize=8)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7, loc="upper left")
        else:
            why = f"\n({panel.expected_empty})" if panel.expected_empty else ""
            ax.text(
                0.5,
                0.5,
                "No data" + why,
                ha="center",
                va="center",
                transform=ax.transAxes,
                color="grey",
                fontsize=8,
                wrap=True,
            )
    for ax in axes[-1]:
        ax.set_xlabel("seconds before the end of the run", fontsize=8)
    fig.suptitle(f"{OVERVIEW.title} — key panels (kafka-txn-exporter demo data, rendered from Prometheus)", fontsize=11)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=90)
    print(f"wrote {out}")


def demo(seconds: float, out: Path) -> None:
    """`txn-exporter demo` plus a Prometheus scraping it; then render its last ``seconds``."""
    prometheus_bin = shutil.which("prometheus")
    if prometheus_bin is None:
        sys.exit("prometheus is not on PATH (scripts/setup installs it)")
    workdir = Path(tempfile.mkdtemp(prefix="txn-exporter-render-"))
    exporter_port, prometheus_port = free_port(), free_port()
    config = workdir / "prometheus.yml"
    config.write_text(
        json.dumps(
            {  # JSON is YAML
                "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
                "scrape_configs": [
                    {
                        "job_name": defaults.SCRAPE_JOB,
                        "static_configs": [{"targets": [f"127.0.0.1:{exporter_port}"], "labels": {"cluster": "demo"}}],
                    }
                ],
            }
        )
    )
    prometheus = subprocess.Popen(
        [
            prometheus_bin,
            f"--config.file={config}",
            f"--storage.tsdb.path={workdir / 'data'}",
            f"--web.listen-address=127.0.0.1:{prometheus_port}",
            "--log.level=warn",
        ],
        stdout=subprocess.DEVNULL,
        stderr=(workdir / "prometheus.log").open("w"),
    )
    try:
        start = time.time()
        subprocess.run(
            [
                sys.executable,
                "-m",
                "exporter",
                "demo",
                "--listen",
                f"127.0.0.1:{exporter_port}",
                "--duration",
                str(seconds),
            ],
            check=True,
        )
        end = time.time()
        render(f"http://127.0.0.1:{prometheus_port}", max(start, end - seconds), end, out)
    finally:
        prometheus.terminate()
        prometheus.wait(30)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dashboards.render", description=__doc__.splitlines()[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--demo", type=float, metavar="SECONDS", help="run the demo this long and render it")
    source.add_argument("--prometheus", metavar="URL", help="render from this Prometheus")
    parser.add_argument("--minutes", type=float, default=60, help="with --prometheus: how far back")
    parser.add_argument("--out", type=Path, default=Path("docs/overview.png"))
    args = parser.parse_args(argv)
    if args.demo:
        demo(args.demo, args.out)
    else:
        end = time.time()
        render(args.prometheus.rstrip("/"), end - args.minutes * 60, end, args.out, rate_interval="1m")
    return 0


if __name__ == "__main__":
    sys.exit(main())

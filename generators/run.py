"""Runs every generator in order: `make generate`, which is `python -m generators` (rewrites every
generated file that changed); with `--check` it exits 1 naming the stale ones instead
(tests/generators/test_drift.py calls `check()`). It stands above everything it runs; what the
generators share (queries/) is below them, and none of them imports this package.

`make generate` regenerates every generated file from its one source;
tests/generators/test_drift.py fails naming that command when a committed file differs. The steps,
in order:

1. dashboards/generate.py  -> mixin/dashboards/*.json (the Grafana dashboards; the one copy)
2. alerts/generate.py      -> alerts/kafka-txn-exporter.rules.yml
3. deploy/generate.py      -> deploy/monitoring/prometheusrule.yaml, mixin/dashboards/kustomization.yaml
4. mixin/generate.py       -> mixin/config.libsonnet, mixin/rules/rules.libsonnet,
                              mixin/alerts/alerts.libsonnet, mixin/dashboards/queries.libsonnet
5. generators/docs.py      -> docs/metrics.md's metric table
6. workshop/txn_workshop/architecture.py -> docs/architecture.md (the floors, drawn from the imports)

Each step builds from Python sources only (the metric catalogue, exporter/metrics/catalogue.py, the
dashboards' and rules' definitions, the code's imports), never from another step's output, so no
order of runs can leave a file stale; the order is that of their imports.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

from generators import docs
from generators.output import COMMAND, relative, stale, write


class Step(NamedTuple):
    name: str
    outputs: Callable[[], dict[Path, str]]
    owned: tuple[str, ...] = ()  # globs of files only this step writes (a stray one is removed)


def steps() -> tuple[Step, ...]:
    from alerts import generate as alerts
    from dashboards import generate as dashboards
    from deploy import generate as deploy
    from mixin import generate as mixin
    from txn_workshop import architecture

    return (
        Step("dashboards", dashboards.outputs, dashboards.OWNED),
        Step("alerts", alerts.outputs),
        Step("deploy", deploy.outputs),
        Step("mixin", mixin.outputs),
        Step("docs", docs.outputs),
        Step("architecture", lambda: {architecture.DOC: architecture.document(architecture.graph())}),
    )


def outputs() -> dict[Path, str]:
    """Every generated file and its text."""
    return {path: text for step in steps() for path, text in step.outputs().items()}


def check() -> list[Path]:
    """The generated files that are missing, differ, or are no longer generated."""
    return [path for step in steps() for path in stale(step.outputs(), step.owned)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m generators", description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 naming the files that are not up to date")
    args = parser.parse_args(argv)
    if args.check:
        files = check()
        if files:
            print(f"out of date (run {COMMAND}):", *map(relative, files), file=sys.stderr)
            return 1
        return 0
    for step in steps():
        changed = write(step.outputs(), step.owned)
        print(f"{step.name}: " + (", ".join(map(relative, changed)) if changed else "up to date"))
    return 0

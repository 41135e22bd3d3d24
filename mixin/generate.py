"""Generates mixin/templates.json, the rules and dashboards of mixin/mixin.libsonnet with the parts
that `_config` sets marked, from the generated files themselves (alerts/kafka-txn-exporter.rules.yml,
dashboards/json/*.json):

    python -m mixin.generate            # rewrites mixin/templates.json
    python -m mixin.generate --check    # exit 1 if the committed file differs

A templated string becomes ``{"$parts": [...]}``: literal text, ``{"config": key}`` (a `_config`
value), ``{"metric": name, "matchers": [...]}`` (an exporter series, to which `_config.selector`
adds its matchers) and ``{"threshold": alert}``. What is marked: the `cluster` label wherever a
query names it (by-lists, matchers, label_values, ``$labels.cluster``), every exporter series
(catalogue metrics; not the brokers' JMX ones, not recorded series), `up`'s job matcher, each
alert's trailing ``> N`` and ``for`` (`_config.thresholds`, `_config.forDurations`), and the runbook and Grafana base URLs.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

import yaml

from alerts.generate import DEFAULT_GRAFANA_URL, DEFAULT_RUNBOOK_URL, EXPORTER_JOB, RULES_PATH
from dashboards.generate import DASHBOARDS, path_of
from dashboards.generated import write_or_check
from dashboards.metrics import JmxMetric, resolve

TEMPLATES_PATH = Path(__file__).parent / "templates.json"
CLUSTER_LABEL = "cluster"

_TOKEN = re.compile(
    r"""
    (?P<string>"(?:[^"\\]|\\.)*")
  | (?P<range>\[[^\]]*\])
  | (?P<name>(?<![\w$.:])[a-zA-Z_:][\w:]*)(?P<matchers>\{[^}]*\})?
  | (?P<bare>\{[^}]*\})
""",
    re.VERBOSE,
)


def _exporter_metric(name: str) -> bool:
    try:
        return not isinstance(resolve(name), JmxMetric)
    except KeyError:
        return False


def _join(parts: list) -> list:
    """Adjacent literals merged, so templates stay readable."""
    out: list = []
    for part in parts:
        if isinstance(part, str) and out and isinstance(out[-1], str):
            out[-1] += part
        elif part != "":
            out.append(part)
    return out


def _query(text: str) -> list:
    parts: list = []
    position = 0
    for match in _TOKEN.finditer(text):
        parts.append(text[position : match.start()])
        position = match.end()
        name, matchers = match.group("name"), match.group("matchers")
        if match.group("string") or match.group("range"):
            parts.append(match.group(0))
        elif match.group("bare"):
            parts += ["{", *_query(match.group("bare")[1:-1]), "}"]
        elif name == "up" and matchers == f'{{job="{EXPORTER_JOB}"}}':
            parts += ["up{", {"config": "jobSelector"}, "}"]
        elif _exporter_metric(name):
            parts.append({"metric": name, "matchers": _join(_query(matchers[1:-1])) if matchers else []})
        else:
            parts.append({"config": "clusterLabel"} if name == CLUSTER_LABEL else name)
            if matchers:
                parts += ["{", *_query(matchers[1:-1]), "}"]
    parts.append(text[position:])
    return _join(parts)


def _templated(parts: list, original: str):
    return original if parts == [original] else {"$parts": parts}


def _annotation(text: str) -> dict | str:
    """Queries in backticks and ``$labels.cluster``; the prose around them as it is."""
    parts: list = []
    for i, piece in enumerate(re.split(r"(`[^`]*`)", text)):
        if i % 2:
            parts += ["`", *_query(piece[1:-1]), "`"]
        else:
            for j, bit in enumerate(re.split(r"(\$labels\.cluster\b)", piece)):
                parts += ["$labels.", {"config": "clusterLabel"}] if j % 2 else [bit]
    for base, key in ((DEFAULT_RUNBOOK_URL, "runbookURL"), (DEFAULT_GRAFANA_URL, "grafanaURL")):
        if isinstance(parts[0], str) and parts[0].startswith(base):
            parts[0:1] = [{"config": key}, parts[0][len(base) :]]
    return _templated(_join(parts), text)


def rules_templates() -> tuple[dict, dict]:
    """(the rules with their parts marked, the default thresholds and `for`s by alert)."""
    groups = yaml.safe_load(RULES_PATH.read_text())["groups"]
    thresholds: dict[str, float] = {}
    durations: dict[str, str | None] = {}
    for group in groups:
        for rule in group["rules"]:
            expr = rule["expr"]
            name = rule.get("alert")
            threshold = re.search(r" > ([0-9.]+)$", expr) if name else None
            parts = _query(expr[: threshold.start()] if threshold else expr)
            if threshold:
                thresholds[name] = json.loads(threshold.group(1))
                parts = _join([*parts, " > ", {"threshold": name}])
            rule["expr"] = _templated(parts, expr)
            if name:
                durations[name] = rule.pop("for", None)  # mixin.libsonnet adds it back from _config
                rule["annotations"] = {k: _annotation(v) for k, v in rule["annotations"].items()}
    return {"groups": groups}, {"thresholds": thresholds, "forDurations": durations}


def _dashboard(value, key: str = ""):
    if isinstance(value, dict):
        return {k: _dashboard(v, k) for k, v in value.items()}
    if isinstance(value, list):
        return [_dashboard(v) for v in value]
    if isinstance(value, str) and key in ("expr", "query"):
        return _templated(_query(value), value)
    return value


def templates() -> dict:
    rules, defaults = rules_templates()
    dashboards = {path_of(spec).name: _dashboard(json.loads(path_of(spec).read_text())) for spec in DASHBOARDS}
    return {
        "defaults": {
            "jobSelector": f'job="{EXPORTER_JOB}"',
            "selector": "",
            "clusterLabel": CLUSTER_LABEL,
            "runbookURL": DEFAULT_RUNBOOK_URL,
            "grafanaURL": DEFAULT_GRAFANA_URL,
            **defaults,
        },
        "rules": rules,
        "dashboards": dashboards,
    }


def render() -> str:
    return json.dumps(templates(), indent=1, sort_keys=True) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mixin.generate", description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the committed file is not up to date")
    args = parser.parse_args(argv)
    return write_or_check({TEMPLATES_PATH: render()}, "python -m mixin.generate", args.check)


if __name__ == "__main__":
    sys.exit(main())

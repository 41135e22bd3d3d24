"""mixin/mixin.libsonnet built by the real jsonnet (PyPI's bindings of the C++ jsonnet): laid out as
monitoring mixins are and whole on its own (as jsonnet-bundler vendors it: mixin/ alone); the
default _config gives exactly the committed rules and dashboards; a changed _config changes the
selectors, the cluster label, thresholds, `for`s and links everywhere, and the result still passes
promtool."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import _jsonnet
import pytest
import yaml

from alerts.generate import RULES_PATH
from dashboards.generate import DASHBOARDS, path_of

ROOT = Path(__file__).resolve().parents[2]
MIXIN = ROOT / "mixin"
CHANGED = """{
  _config+:: {
    selector: 'namespace="kafka"',
    jobSelector: 'job="txn"',
    clusterLabel: 'kafka_cluster',
    thresholds+:: { TxnExporterLagging: 5000, KafkaTransactionMarkerRetriesSustained: 0.5 },
    forDurations+:: { KafkaTransactionsLate: '15m', TxnExporterDecodeErrors: '1m' },
    runbookURL: 'https://wiki.example.org/runbooks',
    grafanaURL: 'https://grafana.example.org',
  },
}"""


def build(overrides: str = "{}", root: Path = ROOT) -> dict:
    snippet = f"""local mixin = (import 'mixin/mixin.libsonnet') + {overrides};
{{rules: mixin.prometheusRules, alerts: mixin.prometheusAlerts, dashboards: mixin.grafanaDashboards}}"""
    # Named inside root: jsonnet looks for an import beside the importing file first, then in jpathdir.
    return json.loads(_jsonnet.evaluate_snippet(str(root / "test.jsonnet"), snippet, jpathdir=[str(root)]))


def _rules(built: dict) -> dict[str, dict]:
    return {
        r.get("alert") or r["record"]: r
        for g in built["rules"]["groups"] + built["alerts"]["groups"]
        for r in g["rules"]
    }


def _exprs(dashboard) -> list[str]:
    if isinstance(dashboard, dict):
        return [v for k, v in dashboard.items() if k in ("expr", "query") and isinstance(v, str)] + [
            e for v in dashboard.values() for e in _exprs(v)
        ]
    if isinstance(dashboard, list):
        return [e for v in dashboard for e in _exprs(v)]
    return []


def test_laid_out_as_monitoring_mixins_are() -> None:
    for path in (
        "mixin.libsonnet",
        "config.libsonnet",
        "alerts/alerts.libsonnet",
        "rules/rules.libsonnet",
        "dashboards/dashboards.libsonnet",
    ):
        assert (MIXIN / path).is_file(), path
    jsonnetfile = json.loads((MIXIN / "jsonnetfile.json").read_text())
    assert jsonnetfile["version"] == 1 and jsonnetfile["dependencies"] == []


def test_whole_on_its_own(tmp_path: Path) -> None:
    """jsonnet-bundler vendors mixin/ alone: nothing in it may import from outside it."""
    shutil.copytree(MIXIN, tmp_path / "mixin", ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    assert build(root=tmp_path) == build()


def test_default_config_gives_exactly_the_generated_rules_and_dashboards() -> None:
    built = build()
    assert [g["name"] for g in built["rules"]["groups"]] == ["kafka-txn-exporter.recording"]
    assert [g["name"] for g in built["alerts"]["groups"]] == ["kafka-txn-exporter.alerts"]
    assert built["rules"]["groups"] + built["alerts"]["groups"] == yaml.safe_load(RULES_PATH.read_text())["groups"]
    assert built["dashboards"] == {path_of(s).name: json.loads(path_of(s).read_text()) for s in DASHBOARDS}


def test_changed_config_changes_selectors_thresholds_and_links_everywhere() -> None:
    default, changed = _rules(build()), _rules(build(CHANGED))
    assert changed.keys() == default.keys()
    for name, rule in changed.items():
        assert not re.search(r"(?<![$\w])cluster\b", rule["expr"]), name
        for annotation in rule.get("annotations", {}).values():
            assert not re.search(r"\$labels\.cluster\b", annotation), name
            for query in re.findall(r"`([^`]*)`", annotation):  # the annotations' own queries
                assert 'kafka_cluster="%s"' in query, name
                # (a bare selector, such as the broker's version info, has no function to split off)
                assert 'namespace="kafka"' in query or query.split("(")[1].startswith("cluster_"), (name, query)
        if "record" in rule:
            assert 'namespace="kafka"' in rule["expr"] and "kafka_cluster" in rule["expr"], name
    assert changed["TxnExporterDown"]["expr"] == 'up{job="txn"} == 0'
    assert changed["TxnExporterLagging"]["expr"].endswith(" > 5000")
    assert changed["KafkaTransactionMarkerRetriesSustained"]["expr"].endswith(" > 0.5")
    assert changed["KafkaTransactionsLate"]["for"] == "15m" and changed["TxnExporterDecodeErrors"]["for"] == "1m"
    assert "for" not in default["TxnExporterDecodeErrors"]
    assert changed["TxnExporterSourceDown"]["expr"] == 'txn_exporter_source_up{namespace="kafka"} == 0'
    assert changed["TxnExporterReplayStuck"]["expr"].startswith(
        'txn_exporter_partitions_followed{phase="replaying", namespace="kafka"}'
    )
    for rule in (r for r in changed.values() if "alert" in r):
        assert rule["annotations"]["runbook_url"].startswith("https://wiki.example.org/runbooks#")
        assert rule["annotations"]["dashboard_url"].startswith("https://grafana.example.org/d/")
        assert "$labels.kafka_cluster" in rule["annotations"]["dashboard_url"]
    for name, dashboard in build(CHANGED)["dashboards"].items():
        for expr in _exprs(dashboard):
            if expr == "prometheus":  # the datasource variable's query
                continue
            assert not re.search(r"(?<![$\w])cluster\b", expr), (name, expr)
            assert "kafka_cluster" in expr, (name, expr)
            # The brokers' JMX series are scraped under the brokers' job: no exporter selector.
            broker_jmx = re.search(r"kafka_server_|kafka_coordinator_", expr)
            assert broker_jmx or 'namespace="kafka"' in expr, (name, expr)


@pytest.mark.tools
def test_changed_rules_pass_promtool(tmp_path: Path) -> None:
    promtool = shutil.which("promtool") or pytest.fail("promtool is not on PATH: run scripts/setup")
    built = build(CHANGED)
    path = tmp_path / "rules.yml"
    path.write_text(yaml.safe_dump({"groups": built["rules"]["groups"] + built["alerts"]["groups"]}))
    done = subprocess.run([promtool, "check", "rules", str(path)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr

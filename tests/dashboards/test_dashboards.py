"""The committed dashboards are what the generator makes, provisioning-ready, and use only metric
names the exporter's catalogue has (or BROKER_JMX, the brokers' own). That the committed JSON is
what the generator makes: tests/generators/test_drift.py."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from alerts import generate as alerts_generate
from alerts import rules as alerts_rules
from dashboards import drilldown, generate, overview, panels
from exporter import defaults
from exporter.metrics.catalogue import CATALOGUE, LOAD_DURATION
from queries import metrics

# A metric name in PromQL: our prefixes, or a recording rule (level:metric:operations).
PROVISIONING = Path(generate.__file__).parent / "provisioning"
_NAME = re.compile(
    r"(?<![\w:])((?:kafka|txn_exporter|process|python|scrape)_[a-z0-9_]+|[a-z_]+:[a-z0-9_]+:[a-z0-9_]+)\b"
)


def _committed(spec: panels.Dashboard) -> dict:
    return json.loads(generate.path_of(spec).read_text())


def _panels(dashboard: dict) -> list[dict]:
    return [p for p in dashboard["panels"] if p["type"] != "row"]


def metric_names(expr: str) -> set[str]:
    return set(_NAME.findall(expr))


@pytest.mark.parametrize("spec", generate.DASHBOARDS, ids=lambda s: s.uid)
def test_provisioning_ready(spec):
    dashboard = _committed(spec)
    assert dashboard["uid"] == spec.uid and "id" not in dashboard
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
    assert {"cluster", "instance"} <= set(variables)
    for name in set(variables) - {"datasource"}:
        assert variables[name]["datasource"]["uid"] == "${datasource}"
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    for panel in _panels(dashboard):
        assert panel["description"].strip(), panel["title"]
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, panel["title"]
        assert panel["fieldConfig"]["defaults"]["unit"], panel["title"]
        assert panel["targets"], panel["title"]
        for target in panel["targets"]:
            assert target["datasource"]["uid"] == "${datasource}"
            assert 'cluster=~"$cluster"' in target["expr"], (panel["title"], target["expr"])


def test_overview_answers_what_is_wrong_now():
    titles = " | ".join(p["title"] for p in _panels(_committed(overview.OVERVIEW))).lower()
    for needed in (
        "pending markers",
        "oldest pending",
        "append errors",
        "marker retries by error",
        "late",
        "hanging",
        "p99 append latency by target state",
    ):
        assert needed in titles, needed
    rows = [p["title"] for p in _committed(overview.OVERVIEW)["panels"] if p["type"] == "row"]
    assert any("JMX" in r for r in rows)
    jmx_row = next(r for r in overview.OVERVIEW.rows if "JMX" in r.title)
    jmx_names = {m.name for m in metrics.BROKER_JMX}
    used = set().union(*(metric_names(q.expr) for p in jmx_row.panels for q in p.queries))
    assert used == jmx_names


def test_drilldown_by_broker_and_partition():
    dashboard = _committed(drilldown.DRILLDOWN)
    assert "partition" in {v["name"] for v in dashboard["templating"]["list"]}
    exprs = [t["expr"] for p in _panels(dashboard) for t in p["targets"]]
    assert any("by (instance" in e for e in exprs)
    assert any('partition=~"$partition"' in e and "by (instance, partition)" in e for e in exprs)


def _all_exprs() -> list[str]:
    exprs = [t["expr"] for spec in generate.DASHBOARDS for p in _panels(_committed(spec)) for t in p["targets"]]
    exprs += [
        v["query"]["query"]
        for spec in generate.DASHBOARDS
        for v in _committed(spec)["templating"]["list"]
        if isinstance(v.get("query"), dict)
    ]
    document = yaml.safe_load(alerts_generate.RULES_PATH.read_text())
    for group in document["groups"]:
        for rule in group["rules"]:
            exprs.append(rule["expr"])
            exprs += rule.get("annotations", {}).values()
    return exprs


def test_every_metric_name_is_in_the_catalogue_or_listed():
    """Drift: a name must be in the catalogue, or in BROKER_JMX or PROCESS (queries/metrics.py), or
    be one of our recording rules."""
    unknown = set()
    for expr in _all_exprs():
        for name in metric_names(expr):
            if name in alerts_rules.RECORDING_NAMES:
                continue
            try:
                metrics.resolve(name)
            except KeyError:
                unknown.add(name)
    assert unknown == set()


def test_broker_jmx_names_are_not_the_exporters():
    assert not {m.name for m in metrics.BROKER_JMX} & {spec.name for spec in CATALOGUE}


def test_every_catalogue_metric_of_interest_is_on_a_dashboard():
    used = set().union(*(metric_names(e) for e in _all_exprs()))
    used_families = {metrics.resolve(n).name for n in used if n not in alerts_rules.RECORDING_NAMES}
    missing = {spec.name for spec in CATALOGUE} - used_families
    assert missing == set(), "catalogue metrics on no dashboard or alert"


def test_a_new_counter_or_gauge_gets_a_panel_without_dashboard_code():
    """The drill-down's last row graphs every counter and gauge no other panel does."""
    rows = (*overview.OVERVIEW.rows, *drilldown.DRILLDOWN_ROWS)
    assert [p.title for p in drilldown.other_metrics_row(rows).panels] == [
        "kafka transaction state log unknown tagged fields",
        "txn exporter unwritten state records",
        "txn exporter broker log unplaced lines",
        "txn exporter broker log utc offset seconds",
        "txn exporter append clock unmatched",
        "txn exporter append latency negative",
        "txn exporter broker affected by known bug",
    ]
    without = tuple(
        panels.Row(r.title, tuple(p for p in r.panels if "kafka_transactions_late" not in p.queries[0].template))
        for r in rows
    )
    assert "kafka transactions late" in [p.title for p in drilldown.other_metrics_row(without).panels]


def test_grafana_provisioning_file():
    provider = yaml.safe_load((PROVISIONING / "dashboards.yaml").read_text())
    assert provider["apiVersion"] == 1
    (entry,) = provider["providers"]
    assert entry["type"] == "file" and entry["options"]["path"]


def test_latency_panels_ask_for_exemplars_and_the_data_source_links_them_to_the_view():
    # The histograms whose buckets carry exemplars: the latency recorders' (a load is a partition's, not
    # a transaction's: exporter.metrics.prometheus renders its buckets without).
    histograms = {spec.name for spec in CATALOGUE if spec.type == "histogram"} - {LOAD_DURATION.name}
    with_exemplars = without = 0
    for spec in generate.DASHBOARDS:
        for panel in _panels(_committed(spec)):
            for target in panel["targets"]:
                names = {
                    metrics.resolve(n).name
                    for n in metric_names(target["expr"])
                    if n not in alerts_rules.RECORDING_NAMES
                }
                if names & histograms:
                    assert target.get("exemplar") is True, panel["title"]
                    assert "exemplars" in panel["description"], panel["title"]
                    with_exemplars += 1
                else:
                    assert "exemplar" not in target, panel["title"]
                    without += 1
    assert with_exemplars >= 4 and without > with_exemplars
    titles = {
        p["title"]
        for s in generate.DASHBOARDS
        for p in _panels(_committed(s))
        if any(t.get("exemplar") for t in p["targets"])
    }
    assert {"p99 append latency by target state", "p99 prepare-to-complete by result"} <= titles

    source = yaml.safe_load((PROVISIONING / "datasource.example.yaml").read_text())
    (link,) = source["datasources"][0]["jsonData"]["exemplarTraceIdDestinations"]
    assert link["name"] == "transactional_id"
    assert link["url"] == "http://$${__data.fields.instance}/transactions"  # $$: not an environment variable


def test_the_exporters_own_process_is_on_both_dashboards_selected_by_its_job():
    """Its CPU on the overview's health row; CPU, memory, scrape duration, source lag and the clock
    timing the appends in the drill-down's row of its own. A broker's JMX agent exports process_* too: every query of them, and
    the CPU alert, selects the exporter's job."""
    process = {m.name for m in metrics.PROCESS}
    health = next(r for r in overview.OVERVIEW.rows if r.title == "Exporter health")
    assert any("process_cpu_seconds_total" in q.expr for p in health.panels for q in p.queries)
    itself = next(r for r in drilldown.DRILLDOWN.rows if r.title.startswith("The exporter itself"))
    used = set().union(*(metric_names(q.expr) for p in itself.panels for q in p.queries))
    assert used == process | {
        "txn_exporter_partition_consumer_lag_records",
        "txn_exporter_append_latency_clock_info",
        "txn_exporter_append_latency_transitions_total",
    }
    job = f'job="{defaults.SCRAPE_JOB}"'
    checked = 0
    for expr in _all_exprs():
        for name in metric_names(expr) & process:
            assert re.search(rf"{name}\{{{re.escape(job)}", expr), expr
            checked += 1
    assert checked >= 5
    (cpu,) = [a for a in alerts_rules.ALERTS if "process_cpu_seconds_total" in a.expr]
    assert cpu.above is not None and 0 < cpu.above < 1 and cpu.component == "exporter"

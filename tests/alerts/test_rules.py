"""The rules file (generated: tests/generators/test_drift.py): promtool-clean with lint fatal, every alert unit
tested firing and not firing, every alert with its labels, annotations, runbook and dashboard."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
import yaml

from alerts import generate
from alerts import rules as alerts_rules
from dashboards.generate import DASHBOARDS
from tests.alerts.tools import require

ALERTS_DIR = Path(generate.__file__).parent
RULES = ALERTS_DIR / "kafka-txn-exporter.rules.yml"
UNIT_TESTS = sorted((ALERTS_DIR / "tests").glob("*.yml"))


def _alerting_rules() -> list[dict]:
    document = yaml.safe_load(RULES.read_text())
    return [rule for group in document["groups"] for rule in group["rules"] if "alert" in rule]


@pytest.mark.tools
def test_promtool_check_rules_with_lint_fatal():
    result = subprocess.run(
        [require("promtool"), "check", "rules", "--lint=all", "--lint-fatal", str(RULES)],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.tools
def test_promtool_unit_tests_pass():
    result = subprocess.run(
        [require("promtool"), "test", "rules", *map(str, UNIT_TESTS)], capture_output=True, text=True, cwd=ALERTS_DIR
    )
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.tools
def test_every_alert_has_a_firing_and_a_not_firing_unit_test():
    firing: set[str] = set()
    quiet: set[str] = set()
    for path in UNIT_TESTS:
        for case in yaml.safe_load(path.read_text())["tests"]:
            for check in case.get("alert_rule_test", []):
                (firing if check.get("exp_alerts") else quiet).add(check["alertname"])
    names = {rule["alert"] for rule in _alerting_rules()}
    assert names - firing == set(), "alerts without a firing unit test"
    assert names - quiet == set(), "alerts without a not-firing unit test"


@pytest.mark.parametrize("rule", _alerting_rules(), ids=lambda r: r["alert"])
def test_alert_labels_and_annotations(rule):
    labels, annotations = rule["labels"], rule["annotations"]
    assert labels["severity"] in ("critical", "warning")
    assert labels["team"] in (alerts_rules.TEAM_KAFKA, alerts_rules.TEAM_OBSERVABILITY)
    assert labels["component"] in ("transactions", "exporter")
    assert set(annotations) - {"transactions_url"} == {"summary", "description", "runbook_url", "dashboard_url"}
    assert "{{" in annotations["description"], "the description shows the values that matter"
    if labels["component"] == "transactions":  # which transactions: the view of the exporter that fired
        url = annotations["transactions_url"]
        assert url.startswith("http://{{ $labels.instance }}/transactions")
        assert annotations["description"].endswith(f" Which transactions: {url}")
    else:
        assert "transactions_url" not in annotations
    anchor = annotations["runbook_url"].rsplit("#", 1)[1]
    assert anchor == rule["alert"].lower()
    uid = re.search(r"/d/([\w-]+)", annotations["dashboard_url"]).group(1)
    assert uid in {d.uid for d in DASHBOARDS}


def test_every_alert_has_a_runbook_section_with_confirm_and_fix():
    text = (ALERTS_DIR / "runbooks.md").read_text()
    sections = dict(re.findall(r"^## (\w+)\n(.*?)(?=^## |\Z)", text, flags=re.M | re.S))
    for rule in _alerting_rules():
        section = sections.get(rule["alert"])
        assert section, f"runbooks.md has no section for {rule['alert']}"
        assert "Confirm" in section and "Fix" in section, rule["alert"]
    for command in ("find-hanging", "describe", "list", "txn-exporter hanging"):
        assert command in text


def test_transaction_view_links_filter_on_what_each_alert_is_about():
    views = {rule["alert"]: rule["annotations"].get("transactions_url", "") for rule in _alerting_rules()}
    assert views["KafkaTransactionMarkersPendingTooLong"].endswith("?state=PREPARE_COMMIT,PREPARE_ABORT&min_age=30")
    assert views["KafkaTransactionsLate"].endswith("?state=ONGOING")
    assert views["KafkaHangingTransactions"].endswith("?state=HANGING")
    behind_tls = generate.rules(exporter_url="https://{{ $labels.instance }}/")
    (rule,) = [r for g in behind_tls["groups"] for r in g["rules"] if r.get("alert") == "KafkaHangingTransactions"]
    assert rule["annotations"]["transactions_url"] == "https://{{ $labels.instance }}/transactions?state=HANGING"


def test_transaction_view_links_to_the_cluster_page():
    urls = {
        r["alert"]: r["annotations"].get("transactions_url")
        for g in generate.rules(cluster_view=True)["groups"]
        for r in g["rules"]
        if "alert" in r
    }
    assert urls["KafkaHangingTransactions"] == "http://{{ $labels.instance }}/transactions?state=HANGING&scope=cluster"
    assert urls["KafkaTransactionStateLogAppendErrors"] == "http://{{ $labels.instance }}/transactions?scope=cluster"
    assert urls["TxnExporterDown"] is None


def test_short_for_override_keeps_everything_else():
    document = generate.rules()
    short = generate.with_short_for(document, "5s")
    for group, short_group in zip(document["groups"], short["groups"]):
        for rule, short_rule in zip(group["rules"], short_group["rules"]):
            assert {k: v for k, v in rule.items() if k != "for"} == {k: v for k, v in short_rule.items() if k != "for"}
            assert short_rule.get("for") in (None, "5s")

"""alertmanager.example.yml with the real amtool and Alertmanager: valid, routes each severity and
team to its receiver, and the exporter-down alerts inhibit the symptoms they cause."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from alerts import generate, rules
from tests.alerts.tools import Alertmanager, require

CONFIG = Path(generate.__file__).parent / "alertmanager.example.yml"
pytestmark = pytest.mark.tools


def test_amtool_check_config():
    result = subprocess.run([require("amtool"), "check-config", str(CONFIG)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize(
    ("labels", "receiver"),
    [
        ({"team": "kafka", "severity": "critical"}, "kafka-pager"),
        ({"team": "kafka", "severity": "warning"}, "kafka-tickets"),
        ({"team": "observability", "severity": "critical"}, "observability-pager"),
        ({"team": "observability", "severity": "warning"}, "observability-tickets"),
        ({"team": "payments", "severity": "critical"}, "default-pager"),
        ({"team": "payments", "severity": "warning"}, "default-tickets"),
        ({"severity": "warning"}, "default-tickets"),
    ],
)
def test_routes(labels, receiver):
    result = subprocess.run(
        [
            require("amtool"),
            "config",
            "routes",
            "test",
            f"--config.file={CONFIG}",
            f"--verify.receivers={receiver}",
            *(f"{k}={v}" for k, v in labels.items()),
        ],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0 and result.stdout.strip() == receiver, result.stdout + result.stderr


def test_every_alert_of_the_rules_reaches_its_teams_receiver():
    for alert in rules.ALERTS:
        result = subprocess.run(
            [
                require("amtool"),
                "config",
                "routes",
                "test",
                f"--config.file={CONFIG}",
                f"alertname={alert.name}",
                f"team={alert.team}",
                f"severity={alert.severity}",
            ],
            capture_output=True,
            text=True,
        )
        kind = "pager" if alert.severity == "critical" else "tickets"
        assert result.stdout.strip() == f"{alert.team}-{kind}", (alert.name, result.stdout, result.stderr)


def _alert(name: str, instance: str, component: str) -> dict:
    return {
        "labels": {
            "alertname": name,
            "cluster": "c1",
            "instance": instance,
            "component": component,
            "severity": "critical" if component == "transactions" else "warning",
        }
    }


@pytest.mark.parametrize("source", ["TxnExporterDown", "TxnExporterSourceDown", "TxnExporterLagging"])
def test_exporter_alerts_inhibit_the_transaction_alerts_of_their_instance(source, tmp_path):
    manager = Alertmanager(CONFIG, tmp_path / "am")
    try:
        manager.post_alerts(
            [
                _alert(source, "b1:9464", "exporter"),
                _alert("KafkaTransactionMarkersPendingTooLong", "b1:9464", "transactions"),
                _alert("KafkaTransactionMarkersPendingTooLong", "b2:9464", "transactions"),  # another exporter
            ]
        )
        # Alertmanager lists a posted alert at once, but its inhibitor learns of a source alert on a
        # subscription of its own, a moment later: until then the API shows the target unsuppressed.
        target = ("KafkaTransactionMarkersPendingTooLong", "b1:9464")
        deadline = time.monotonic() + 20
        while True:
            status = {(a["labels"]["alertname"], a["labels"]["instance"]): a["status"] for a in manager.alerts()}
            if (len(status) == 3 and status[target]["inhibitedBy"]) or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert len(status) == 3, status
        assert status[("KafkaTransactionMarkersPendingTooLong", "b1:9464")]["inhibitedBy"]
        assert status[("KafkaTransactionMarkersPendingTooLong", "b1:9464")]["state"] == "suppressed"
        assert not status[("KafkaTransactionMarkersPendingTooLong", "b2:9464")]["inhibitedBy"]
        assert status[(source, "b1:9464")]["state"] == "active"
    finally:
        manager.stop()

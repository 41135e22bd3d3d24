"""The commands and runbook links (exporter.view.diagnosis.commands): quoted ids, the runbook's
sections and URL, a hanging transaction's advice."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from alerts.generate import DEFAULT_RUNBOOK_URL
from exporter.contracts import runbooks
from exporter.contracts.runbooks import HANGING
from exporter.view.diagnosis.assembly import diagnose
from exporter.view.diagnosis.commands import CONFIRM, FIX, hanging_advice
from tests.view.diagnosis.builders import BOOTSTRAP, HELD, NOW, ORDERS_MIN_ISR_2, error, row, snapshot


def test_commands_quote_what_clients_chose():
    tid = "pay; rm -rf / $(id)"
    diag = diagnose(
        row(transactional_id=tid, marker_errors=[error("orders-0", "NOT_ENOUGH_REPLICAS")]),
        snapshot(HELD, ORDERS_MIN_ISR_2),
        NOW,
        BOOTSTRAP,
        True,
    )
    describe = diag["commands"][0]["command"]
    assert shlex.split(describe)[-1] == tid and "'pay; rm -rf / $(id)'" in describe


def test_runbook_sections_exist_and_the_url_is_the_alerts_one():
    assert runbooks.RUNBOOK_URL == DEFAULT_RUNBOOK_URL
    headings = re.findall(
        r"^## (\S+)$", (Path(__file__).parents[3] / "alerts" / "runbooks.md").read_text(), re.MULTILINE
    )
    assert set(runbooks.DIAGNOSED) <= set(headings)


def test_hanging_advice():
    finding = {
        "topic": "orders",
        "partition": 3,
        "producer_id": 9,
        "epoch": 0,
        "start_offset": 1234,
        "abort_command": "kafka-transactions.sh --bootstrap-server kafka-1:9092 abort --topic orders"
        " --partition 3 --start-offset 1234",
    }
    advice = hanging_advice(finding, BOOTSTRAP)
    assert advice["runbook"]["section"] == HANGING
    assert [c["purpose"] for c in advice["commands"]] == [CONFIRM, FIX]
    assert advice["commands"][0]["command"] == (
        "kafka-transactions.sh --bootstrap-server kafka-1:9092 describe-producers --topic orders --partition 3"
    )
    assert advice["commands"][1]["command"] == finding["abort_command"]

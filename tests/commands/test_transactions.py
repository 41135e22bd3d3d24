"""`txn-exporter transactions --url URL` against the exporter's real HTTP server, over HTTPS with basic auth."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from pathlib import Path

import bcrypt
import pytest
from prometheus_client import CollectorRegistry

from exporter.cli import main
from exporter.contracts.events import MarkerWriteRetried, PartitionAssigned, PartitionReplayed
from exporter.http_server import MetricsServer
from exporter.metrics import LatencyRecorders
from exporter.model import CoordinatorModel
from exporter.view.endpoint import PATH, TransactionsEndpoint
from tests.model.builders import S, log_event
from tests.test_web_security import CA

PASSWORD = "cli-pw-77"


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[MetricsServer, Path, Path]]:
    """(server, CA file, password file): TLS and basic auth, a model with two in-flight transactions."""
    directory = tmp_path_factory.mktemp("cli-pki")
    ca = CA(directory)
    cert, key = ca.issue("server", server=True)
    web = directory / "web.yml"
    hashed = bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(4)).decode()
    web.write_text(
        f"tls_server_config:\n  cert_file: {cert}\n  key_file: {key}\nbasic_auth_users:\n  ops: '{hashed}'\n"
    )
    password_file = directory / "password"
    password_file.write_text(PASSWORD + "\n")
    now = int(time.time() * 1000)
    model = CoordinatorModel(LatencyRecorders().sinks())
    model.apply(PartitionAssigned(0))
    model.apply(PartitionReplayed(0))
    model.apply(log_event("writer-\x1b[31mred", S.ONGOING, timestamp_ms=now - 5_000))
    model.apply(log_event("held", S.ONGOING, offset=1, timestamp_ms=now - 70_000))
    model.apply(log_event("held", S.PREPARE_COMMIT, offset=2, timestamp_ms=now - 65_000))
    model.apply(MarkerWriteRetried("NOT_ENOUGH_REPLICAS", "held", "orders-0", now - 100))
    server = MetricsServer(
        "127.0.0.1",
        0,
        CollectorRegistry(),
        healthy=lambda: True,
        ready=lambda: True,
        web_config_file=str(web),
        routes={PATH: TransactionsEndpoint(model, 300, "kafka:9092", broker_log=True)},
    )
    server.start()
    yield server, ca.file, password_file
    server.stop()


def cli(capsys, *args: str) -> tuple[int, str, str]:
    status = main(["transactions", *args])
    out, err = capsys.readouterr()
    return status, out, err


def test_table_over_https_with_basic_auth(tls, capsys):
    server, ca, password = tls
    status, out, err = cli(
        capsys,
        "--url",
        f"https://localhost:{server.port}",
        "--ca-file",
        str(ca),
        "--username",
        "ops",
        "--password-file",
        str(password),
    )
    assert status == 0, err
    header, first, second, *_rest = out.splitlines()
    columns = header.split()
    assert columns[:5] == ["TRANSACTIONAL_ID", "STATE", "FLAG", "IN_STATE", "DURATION"]
    held = dict(zip(columns, first.split()))
    assert (held["TRANSACTIONAL_ID"], held["STATE"], held["PRODUCER_ID"], held["EPOCH"]) == (
        "held",
        "PREPARE_COMMIT",
        "4000",
        "2",
    )
    assert held["FLAG"] == "-" and held["IN_STATE"].startswith("1min") and held["DURATION"].startswith("1min")
    # The marker error keeps its spaces (the last column).
    assert re.search(r"  orders-0: NOT_ENOUGH_REPLICAS x1, last \d+\.\d s ago$", first), first
    assert second.startswith("writer-\\x1b[31mred ")  # a terminal escape in an id is shown, not sent
    assert "\x1b" not in out
    assert "2 in flight match, 2 shown, oldest first" in out
    # Its diagnosis, the cluster unknown (this endpoint has no cluster lookup): the row still says why.
    assert "\nDiagnosis:\n\nheld (PREPARE_COMMIT, coordinator broker ?, __transaction_state-0):" in out
    assert "  orders-0: leader, replicas and ISR unknown (metadata: not looked up" in out
    assert "  confirm: kafka-transactions.sh --bootstrap-server kafka:9092 describe --transactional-id held" in out


def test_json_filters_and_credentials_in_the_url(tls, capsys):
    server, ca, _ = tls
    status, out, err = cli(
        capsys,
        "--url",
        f"https://ops:{PASSWORD}@localhost:{server.port}{PATH}",
        "--ca-file",
        str(ca),
        "--json",
        "--state",
        "PREPARE_COMMIT",
        "--min-age",
        "1m",
        "--limit",
        "5",
    )
    assert status == 0, err
    doc = json.loads(out)
    assert [r["transactional_id"] for r in doc["transactions"]] == ["held"]
    assert doc["query"] == {"states": ["PREPARE_COMMIT"], "min_age_seconds": 60.0, "limit": 5}


def test_errors_are_one_line(tls, capsys, monkeypatch):
    server, ca, _ = tls
    url = f"https://localhost:{server.port}"
    status, _, err = cli(capsys, "--url", url, "--ca-file", str(ca))
    assert status == 2
    assert err == "txn-exporter transactions: 401 Unauthorized (give --username and --password-file): Unauthorized\n"
    monkeypatch.setenv("TXN_EXPORTER_PASSWORD", PASSWORD)
    status, _, err = cli(capsys, "--url", url, "--ca-file", str(ca), "--username", "ops", "--limit", "0")
    assert status == 2
    assert err == "txn-exporter transactions: 400 Bad Request: limit: '0' is not a number from 1 to 1000\n"
    status, _, err = cli(capsys, "--url", url, "--username", "ops")  # the system's CAs do not know ours
    assert status == 2 and "CERTIFICATE_VERIFY_FAILED" in err and len(err.splitlines()) == 1
    assert cli(capsys, "--url", url, "--username", "ops", "--insecure")[0] == 0
    status, _, err = cli(capsys, "--url", "http://127.0.0.1:1")
    assert status == 2 and err.startswith("txn-exporter transactions: cannot reach http://127.0.0.1:1/transactions?")

"""`txn-exporter transactions` against the exporter's real HTTP server, over HTTPS with basic auth: one
exporter (`--url URL`), and several merged (`--url` repeated), with every way an exporter can fail
to answer shown as a line naming it."""

from __future__ import annotations

import json
import re
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import bcrypt
import pytest
from prometheus_client import CollectorRegistry

from exporter.cli import main
from exporter.commands import transactions
from exporter.contracts.events import MarkerWriteRetried, PartitionAssigned, PartitionReplayed
from exporter.http_server import MetricsServer
from exporter.metrics import LatencyRecorders
from exporter.model import CoordinatorModel
from exporter.sources.peer_exporters import SourceError, fetch_view
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
        routes={PATH: TransactionsEndpoint(model, 300, "kafka:9092", broker_log=True, broker_id=lambda: 1)},
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
    assert "\nDiagnosis:\n\nheld (PREPARE_COMMIT, coordinator broker 1, __transaction_state-0):" in out
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


def _server(routes: dict, web_config: Path | None = None) -> MetricsServer:
    server = MetricsServer(
        "127.0.0.1",
        0,
        CollectorRegistry(),
        healthy=lambda: True,
        ready=lambda: True,
        web_config_file=str(web_config) if web_config else None,
        routes=routes,
    )
    server.start()
    return server


@pytest.fixture(scope="module")
def peers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """Base URLs: `plain`, a second exporter (broker 2, plain HTTP) that also lists `held`, as the
    exporter of a coordinator's old leader would for a moment; and exporters failing every way."""
    now = int(time.time() * 1000)
    model = CoordinatorModel(LatencyRecorders().sinks())
    model.apply(PartitionAssigned(1))
    model.apply(PartitionReplayed(1))
    model.apply(log_event("other", S.ONGOING, partition=1, timestamp_ms=now - 30_000))
    model.apply(log_event("held", S.ONGOING, partition=1, offset=1, timestamp_ms=now - 70_000))
    plain = _serve_plain(model)

    def html(query: str, accept: str, authorization: str | None) -> tuple[int, dict[str, str], bytes]:
        return 200, {"Content-Type": "text/html"}, b"<html>a login page</html>"

    def crash(query: str, accept: str, authorization: str | None) -> tuple[int, dict[str, str], bytes]:
        raise RuntimeError("boom")

    def moved(query: str, accept: str, authorization: str | None) -> tuple[int, dict[str, str], bytes]:
        return 302, {"Location": "http://elsewhere.example/steal"}, b""

    def prometheus(query: str, accept: str, authorization: str | None) -> tuple[int, dict[str, str], bytes]:
        return 200, {"Content-Type": "application/json"}, b'{"status": "success", "data": []}'

    odd = _server(
        {"/html" + PATH: html, "/crash" + PATH: crash, "/moved" + PATH: moved, "/prometheus" + PATH: prometheus}
    )
    directory = tmp_path_factory.mktemp("other-pki")
    other = CA(directory, "another CA")
    cert, key = other.issue("stranger", server=True)
    web = directory / "web.yml"
    web.write_text(f"tls_server_config:\n  cert_file: {cert}\n  key_file: {key}\n")
    stranger = _server({PATH: TransactionsEndpoint(model, 300, "kafka:9092", broker_log=True)}, web)
    silent = socket.create_server(("127.0.0.1", 0))  # accepts connections (the backlog), never answers
    refused = socket.create_server(("127.0.0.1", 0))
    refused_port = refused.getsockname()[1]
    refused.close()
    yield {
        "plain": f"http://127.0.0.1:{plain.port}",
        "html": f"http://127.0.0.1:{odd.port}/html",
        "crash": f"http://127.0.0.1:{odd.port}/crash",
        "missing": f"http://127.0.0.1:{odd.port}/missing",
        "moved": f"http://127.0.0.1:{odd.port}/moved",
        "prometheus": f"http://127.0.0.1:{odd.port}/prometheus",
        "stranger": f"https://127.0.0.1:{stranger.port}",
        "silent": f"http://127.0.0.1:{silent.getsockname()[1]}",
        "refused": f"http://127.0.0.1:{refused_port}",
    }
    silent.close()
    for server in (plain, odd, stranger):
        server.stop()


def _serve_plain(model: CoordinatorModel) -> MetricsServer:
    return _server({PATH: TransactionsEndpoint(model, 300, "broker-2:9092", broker_log=False, broker_id=lambda: 2)})


def test_two_exporters_merged_oldest_first_naming_their_brokers(tls, peers, capsys):
    server, ca, _ = tls
    status, out, err = cli(
        capsys,
        "--url",
        f"https://ops:{PASSWORD}@localhost:{server.port}",
        "--url",
        peers["plain"],
        "--ca-file",
        str(ca),
    )
    assert (status, err) == (0, "")
    lines = out.splitlines()
    assert lines[0].split()[:4] == ["BROKER", "TRANSACTIONAL_ID", "STATE", "FLAG"]
    # `held`, listed by both: once, as the exporter with the newer state (PREPARE_COMMIT) has it.
    assert [line.split()[:3] for line in lines[1:4]] == [
        ["1", "held", "PREPARE_COMMIT"],
        ["2", "other", "ONGOING"],
        ["1", "writer-\\x1b[31mred", "ONGOING"],
    ]
    assert "3 in flight match, 3 shown, oldest first" in out
    assert lines[-2:] == ["2 of 2 exporters answered.", "No hanging-transaction scan has completed on these exporters."]


def test_every_exporter_that_does_not_answer_is_a_line(tls, peers, capsys):
    server, ca, _ = tls
    urls = [f"https://ops:{PASSWORD}@localhost:{server.port}", *peers.values()]
    # Plain HTTP to the TLS exporter, and a wrong password, are two more ways to fail.
    urls += [f"http://127.0.0.1:{server.port}", f"https://ops:wrong@localhost:{server.port}/transactions"]
    args = [arg for url in urls for arg in ("--url", url)]
    status, out, err = cli(capsys, *args, "--ca-file", str(ca), "--timeout", "1", "--json")
    assert status == 1 and err == ""
    doc = json.loads(out)
    assert [r["transactional_id"] for r in doc["transactions"]] == ["held", "other", "writer-\x1b[31mred"]
    assert [r["exporter"]["broker_id"] for r in doc["transactions"]] == [1, 2, 1]
    assert [s["ok"] for s in doc["sources"]] == [True, True] + [False] * 10
    assert [s["broker"] for s in doc["sources"][:2]] == [
        {"id": 1, "bootstrap_servers": "kafka:9092"},
        {"id": 2, "bootstrap_servers": "broker-2:9092"},
    ]
    by_url = {s["url"]: s["error"] for s in doc["sources"]}
    assert by_url[peers["html"] + PATH].startswith("not JSON (Expecting value")
    assert by_url[peers["html"] + PATH].endswith("not a transactions view")
    assert by_url[peers["crash"] + PATH] == f"500 Internal Server Error: /crash{PATH} failed"
    assert by_url[peers["missing"] + PATH] == "404 Not Found: not found; try /metrics, /healthz or /readyz"
    # A redirect is not followed (the password would go along).
    assert by_url[peers["moved"] + PATH] == "302 Found: redirected to http://elsewhere.example/steal; give that URL"
    assert by_url[peers["prometheus"] + PATH] == "JSON without a 'transactions' list: not a transactions view"
    assert "CERTIFICATE_VERIFY_FAILED" in by_url[peers["stranger"] + PATH]
    assert by_url[peers["silent"] + PATH] == "no answer within 1 s"
    assert by_url[peers["refused"] + PATH] == "Connection refused"
    assert by_url[f"http://127.0.0.1:{server.port}{PATH}"] in (
        "closed the connection without an answer (plain HTTP to a TLS port?)",
        "Connection reset by peer",
    )
    assert by_url[f"https://localhost:{server.port}{PATH}"].startswith("401 Unauthorized (give --username")

    status, out, _ = cli(capsys, *args, "--ca-file", str(ca), "--timeout", "1")
    assert status == 1
    lines = out.splitlines()
    assert lines[0].split()[0] == "BROKER" and "held" in lines[1]
    assert lines[-12] == "2 of 12 exporters answered."
    assert all(line.startswith(("NOT ANSWERING: 127.0.0.1:", "NOT ANSWERING: localhost:")) for line in lines[-11:-1])
    refused = peers["refused"].removeprefix("http://")
    assert f"NOT ANSWERING: {refused} ({peers['refused']}{PATH}): Connection refused" in lines


def test_no_exporter_answering_is_status_2_with_its_line(peers, capsys):
    status, out, err = cli(capsys, "--url", peers["refused"], "--url", peers["missing"])
    assert status == 2 and err == ""
    assert "No in-flight transaction matches." in out and "0 of 2 exporters answered." in out
    assert out.count("NOT ANSWERING") == 2


def test_neither_url_nor_prometheus_asks_the_exporter_on_this_machine(peers, capsys, monkeypatch):
    """The demo's exporter (and a sidecar's, from its pod) is at DEFAULT_URL: no flag needed."""
    assert transactions.DEFAULT_URL == "http://127.0.0.1:9464"
    monkeypatch.setattr(transactions, "DEFAULT_URL", peers["plain"])
    status, out, err = cli(capsys)
    assert status == 0 and err == "" and "held" in out, (out, err)


def test_an_answer_too_large_is_no_view(peers):
    with pytest.raises(SourceError) as caught:
        fetch_view(peers["html"] + PATH, {}, None, 5, max_bytes=10)
    assert str(caught.value) == "an answer over 10 bytes: not a transactions view"

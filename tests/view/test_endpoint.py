"""GET /transactions on the exporter's real HTTP server: JSON or HTML, 400 on bad filters, basic auth,
and the page as Debian's chromium loads it (untrusted ids stay text)."""

from __future__ import annotations

import base64
import json
import logging
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import bcrypt
import pytest
from prometheus_client import CollectorRegistry

from exporter.contracts.events import PartitionAssigned, PartitionReplayed
from exporter.http_server import MetricsServer
from exporter.metrics import LatencyRecorders
from exporter.model import CoordinatorModel
from exporter.view.endpoint import PATH, TransactionsEndpoint
from tests.model.builders import S, log_event
from tests.view import chromium

PASSWORD = "view-pw-31"
EVIL = "<script>document.title='owned'</script>\x1b[2J&amp;"


@pytest.fixture(scope="module")
def model() -> CoordinatorModel:
    now = int(time.time() * 1000)
    model = CoordinatorModel(LatencyRecorders().sinks())
    model.apply(PartitionAssigned(0))
    model.apply(PartitionReplayed(0))
    model.apply(log_event("orders-writer-1", S.ONGOING, timestamp_ms=now - 5_000))
    model.apply(log_event(EVIL, S.ONGOING, offset=1, timestamp_ms=now - 9_000))
    model.apply(log_event(EVIL, S.PREPARE_COMMIT, offset=2, timestamp_ms=now - 8_000))
    return model


def _serve(model: CoordinatorModel, web_config: Path | None = None) -> MetricsServer:
    routes = {PATH: TransactionsEndpoint(model, 300, "kafka:9092", broker_log=False)}
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
def server(model: CoordinatorModel) -> Iterator[MetricsServer]:
    server = _serve(model)
    yield server
    server.stop()


@pytest.fixture(scope="module")
def auth_server(model: CoordinatorModel, tmp_path_factory: pytest.TempPathFactory) -> Iterator[MetricsServer]:
    web = tmp_path_factory.mktemp("web") / "web.yml"
    web.write_text(f"basic_auth_users:\n  ops: '{bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(4)).decode()}'\n")
    server = _serve(model, web)
    yield server
    server.stop()


def get(
    server: MetricsServer, query: str = "", accept: str | None = None, user: str | None = None
) -> tuple[int, dict[str, str], str]:
    request = urllib.request.Request(f"http://127.0.0.1:{server.port}{PATH}{query}")
    if accept:
        request.add_header("Accept", accept)
    if user:
        request.add_header("Authorization", "Basic " + base64.b64encode(f"{user}:{PASSWORD}".encode()).decode())
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, dict(response.headers), response.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read().decode()


def test_json_unless_a_browser_asks_and_format_forces_either(server):
    status, headers, body = get(server)
    assert status == 200 and headers["Content-Type"] == "application/json"
    assert [r["transactional_id"] for r in json.loads(body)["transactions"]] == [EVIL, "orders-writer-1"]
    browser = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"
    assert get(server, accept=browser)[1]["Content-Type"] == "text/html; charset=utf-8"
    assert get(server, "?format=json", accept=browser)[1]["Content-Type"] == "application/json"
    status, headers, page = get(server, "?format=html")
    assert status == 200 and headers["Content-Type"] == "text/html; charset=utf-8"
    policy = headers["Content-Security-Policy"]
    assert "script-src" not in policy and "default-src 'none'" in policy
    assert '<meta name="viewport"' in page and '<meta http-equiv="refresh"' in page
    assert "<script" not in page
    assert "&lt;script&gt;document.title=&#x27;owned&#x27;&lt;/script&gt;\\x1b[2J&amp;amp;" in page


def test_bad_filter_is_a_400_with_one_line(server):
    status, headers, body = get(server, "?limit=5000", accept="text/html")
    assert (status, headers["Content-Type"], body) == (
        400,
        "text/plain; charset=utf-8",
        "limit: '5000' is not a number from 1 to 1000\n",
    )


def test_basic_auth_as_every_other_path(auth_server):
    assert get(auth_server)[0] == 401
    status, _, body = get(auth_server, "?state=ONGOING", user="ops")
    assert status == 200 and [r["transactional_id"] for r in json.loads(body)["transactions"]] == ["orders-writer-1"]


@pytest.mark.tools
def test_the_page_in_headless_chromium_with_and_without_credentials(auth_server):
    url = f"http://127.0.0.1:{auth_server.port}{PATH}?state=ONGOING,PREPARE_COMMIT"
    dom = chromium.dump_dom(url.replace("http://", f"http://ops:{PASSWORD}@"))
    assert "<title>In-flight transactions - kafka-txn-exporter</title>" in dom
    assert dom.count('data-label="Transactional id"') == 2 and "orders-writer-1" in dom
    # The id is text: no script ran (the title is ours), and the DOM holds no script element.
    assert "owned" not in dom.split("</title>")[0] and "<script" not in dom
    assert "&lt;script&gt;" in dom and "PREPARE_COMMIT" in dom
    assert "orders-writer-1" not in chromium.dump_dom(url)  # no credentials: 401, nothing shown


@pytest.mark.parametrize(
    "query",
    [
        "?limit=%C2%B2",
        "?limit=%D9%A1%D9%A2",
        "?limit=" + "9" * 5000,
        "?min_age=1e999",
        "?min_age=1e308h",
        "?min_age=" + "9" * 5000,
        "?state=" + "A" * 60_000,
        "?limit=5&" + "y" * 60_000,
        "?" + "&".join(["limit=5"] * 40),
        "?scope=" + "x" * 60_000,
        "?scope=cluster&" + "&".join(["limit=5"] * 40),
        "?scope=cluster&limit=%C2%B2",
    ],
)
def test_any_query_is_a_400_of_one_short_line_and_no_traceback(server, query, caplog):
    with caplog.at_level(logging.DEBUG):
        status, headers, body = get(server, query)
    assert status == 400 and headers["Content-Type"] == "text/plain; charset=utf-8"
    assert body.endswith("\n") and body.count("\n") == 1 and len(body) < 200
    assert headers["X-Content-Type-Options"] == "nosniff"
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING or r.exc_info]

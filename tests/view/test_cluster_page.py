"""`/transactions?scope=cluster` on the exporter's real HTTP server: its own view merged with its
configured peers' (real HTTP servers), a silent or refusing peer a line within the timeout, the
visitor's credentials passed on only where they stay encrypted, only the configured peers ever
asked (with filters re-encoded, never a client's URL), answers cached, requests never queued behind
a gathering, and the page as Debian's chromium loads it."""

from __future__ import annotations

import base64
import json
import socket
import ssl
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import bcrypt
import pytest
from prometheus_client import CollectorRegistry

from exporter.contracts.events import PartitionAssigned, PartitionReplayed
from exporter.contracts.peers import PeersBusy
from exporter.http_server import MetricsServer
from exporter.metrics import LatencyRecorders
from exporter.model import CoordinatorModel
from exporter.sources import peer_exporters
from exporter.view.endpoint import PATH, TransactionsEndpoint
from tests.model.builders import S, log_event
from tests.test_web_security import CA
from tests.view import chromium

PASSWORD = "peer-pw-5"
BROWSER = "text/html,application/xhtml+xml"


def model_of(partition: int, *rows: tuple[str, S, int]) -> CoordinatorModel:
    now = int(time.time() * 1000)
    model = CoordinatorModel(LatencyRecorders().sinks())
    model.apply(PartitionAssigned(partition))
    model.apply(PartitionReplayed(partition))
    for offset, (tid, state, age_ms) in enumerate(rows):
        model.apply(log_event(tid, state, partition=partition, offset=offset, timestamp_ms=now - age_ms))
    return model


class Recorded:
    """A route that records the query strings and Authorization headers it was asked with."""

    def __init__(self, route) -> None:
        self.route = route
        self.asked: list[tuple[str, str | None]] = []

    def __call__(self, query: str, accept: str, authorization: str | None):
        self.asked.append((query, authorization))
        return self.route(query, accept, authorization)


def serve(route, web_config: Path | None = None) -> MetricsServer:
    server = MetricsServer(
        "127.0.0.1",
        0,
        CollectorRegistry(),
        healthy=lambda: True,
        ready=lambda: True,
        web_config_file=str(web_config) if web_config else None,
        routes={PATH: route},
    )
    server.start()
    return server


def users(directory: Path, password: str = PASSWORD, tls: tuple[Path, Path] | None = None) -> Path:
    web = directory / f"web-{password}-{bool(tls)}.yml"
    hashed = bcrypt.hashpw(password.encode(), bcrypt.gensalt(4)).decode()
    server = f"tls_server_config:\n  cert_file: {tls[0]}\n  key_file: {tls[1]}\n" if tls else ""
    web.write_text(f"{server}basic_auth_users:\n  ops: '{hashed}'\n")
    return web


def endpoint(
    model: CoordinatorModel, broker_id: int, peers: peer_exporters.Peers | None = None
) -> TransactionsEndpoint:
    return TransactionsEndpoint(
        model,
        300,
        f"b{broker_id}:9092",
        broker_log=True,
        broker_id=lambda: broker_id,
        peers=peers,
        name=f"b{broker_id}",
    )


def peers(
    *urls: str, timeout: float = 1.0, plain: bool = True, context: ssl.SSLContext | None = None
) -> peer_exporters.Peers:
    return peer_exporters.Peers(list(urls), PATH, timeout, context or ssl.create_default_context(), lambda: plain)


def get(url: str, accept: str = "application/json", password: str | None = None) -> tuple[int, dict, str]:
    request = urllib.request.Request(url, headers={"Accept": accept})
    if password:
        request.add_header("Authorization", "Basic " + base64.b64encode(f"ops:{password}".encode()).decode())
    context = ssl.create_default_context()
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    try:
        with urllib.request.urlopen(request, timeout=10, context=context) as response:
            return response.status, dict(response.headers), response.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read().decode()


@pytest.fixture(scope="module")
def pair() -> Iterator[tuple[MetricsServer, Recorded, str]]:
    """(exporter b1 with peers b2, a silent one and a refusing one; b2's recorded route; b2's URL)."""
    b2 = Recorded(endpoint(model_of(1, ("other", S.ONGOING, 30_000), ("held", S.ONGOING, 90_000)), 2))
    second = serve(b2)
    silent = socket.create_server(("127.0.0.1", 0))
    refused = socket.create_server(("127.0.0.1", 0))
    refused_url = f"http://127.0.0.1:{refused.getsockname()[1]}"
    refused.close()
    b2_url = f"http://127.0.0.1:{second.port}"
    first_model = model_of(
        0, ("held", S.ONGOING, 70_000), ("held", S.PREPARE_COMMIT, 65_000), ("mine", S.ONGOING, 5_000)
    )
    first = serve(endpoint(first_model, 1, peers(b2_url, f"http://127.0.0.1:{silent.getsockname()[1]}", refused_url)))
    yield first, b2, b2_url
    for server in (first, second):
        server.stop()
    silent.close()


def test_the_cluster_in_one_json_document(pair):
    first, b2, b2_url = pair
    start = time.monotonic()
    status, _, body = get(f"http://127.0.0.1:{first.port}{PATH}?scope=cluster&state=ONGOING,PREPARE_COMMIT&limit=5")
    assert time.monotonic() - start < 3  # the silent peer waited for 1 s (+0.5), no more
    assert status == 200
    doc = json.loads(body)
    # `held`, listed by b2 too (a coordinator's old leader): once, as PREPARE_COMMIT from b1.
    assert [(r["transactional_id"], r["state"], r["exporter"]["broker_id"]) for r in doc["transactions"]] == [
        ("held", "PREPARE_COMMIT", 1),
        ("other", "ONGOING", 2),
        ("mine", "ONGOING", 1),
    ]
    assert doc["peers"] == 3 and doc["duplicates"] == 1 and doc["in_flight_matching"] == 3
    assert [(s["name"], s["ok"]) for s in doc["sources"]] == [
        ("b1", True),
        (b2_url.removeprefix("http://"), True),
        (doc["sources"][2]["name"], False),
        (doc["sources"][3]["name"], False),
    ]
    assert doc["sources"][2]["error"] == "no answer within 1 s"
    assert doc["sources"][3]["error"] == "Connection refused"
    # b2 was asked for the view alone (no scope: no peer ever fans out again), with the filters re-encoded.
    query, authorization = b2.asked[-1]
    assert urllib.parse.parse_qs(query) == {
        "state": ["ONGOING,PREPARE_COMMIT"],
        "limit": ["5"],
        "format": ["json"],
    }
    assert authorization is None


def test_a_client_chooses_filters_never_a_url(pair):
    first, b2, _ = pair
    before = len(b2.asked)
    base = f"http://127.0.0.1:{first.port}{PATH}"
    assert get(f"{base}?scope=cluster&url=http://169.254.169.254/")[0:3:2] == (
        400,
        "unknown parameter 'url'; known: state, min_age, limit, format\n",
    )
    assert get(f"{base}?scope=everything")[0:3:2] == (400, "scope: 'everything' is neither broker nor cluster\n")
    assert len(b2.asked) == before
    status, _, body = get(f"{base}?state=HANGING")  # scope=broker: this exporter's own view
    assert status == 200 and "sources" not in json.loads(body) and len(b2.asked) == before
    assert json.loads(body)["broker"] == {"id": 1, "bootstrap_servers": "b1:9092"} and json.loads(body)["peers"] == 3


def test_answers_are_cached_and_requests_never_queue():
    clock = [100.0]
    gate, inside = threading.Event(), threading.Event()
    b2 = Recorded(endpoint(model_of(1, ("other", S.ONGOING, 1_000)), 2))

    def slow(query: str, accept: str, authorization: str | None):
        inside.set()
        gate.wait(5)
        return b2(query, accept, authorization)

    server = serve(slow)
    try:
        group = peer_exporters.Peers(
            [f"http://127.0.0.1:{server.port}"], PATH, 5, None, lambda: True, clock=lambda: clock[0]
        )
        first = threading.Thread(target=group.answers, args=("limit=5", None))
        first.start()
        assert inside.wait(5)
        with pytest.raises(PeersBusy):  # nothing kept for these filters: retry, no waiting
            group.answers("limit=5", None)
        gate.set()
        first.join(5)
        assert group.answers("limit=5", None)[0].document is not None and len(b2.asked) == 1  # cached
        clock[0] += peer_exporters.CACHE_SECONDS
        gate.clear()
        inside.clear()
        again = threading.Thread(target=group.answers, args=("limit=5", None))
        again.start()
        assert inside.wait(5)
        assert group.answers("limit=5", None)[0].document is not None  # stale, while it is gathered again
        with pytest.raises(PeersBusy):
            group.answers("limit=5", "Basic other-user")  # another visitor's credentials: not theirs
        gate.set()
        again.join(5)
        assert len(b2.asked) == 2
    finally:
        gate.set()
        server.stop()


def test_credentials_passed_on_only_where_they_stay_encrypted(tmp_path):
    ca = CA(tmp_path)
    cert, key = ca.issue("server", server=True)
    context = ssl.create_default_context(cafile=str(ca.file))
    tls_peer = Recorded(endpoint(model_of(1, ("over-tls", S.ONGOING, 2_000)), 2))
    plain_peer = Recorded(endpoint(model_of(2, ("in-clear", S.ONGOING, 3_000)), 3))
    wrong_peer = Recorded(endpoint(model_of(3, ("other-users", S.ONGOING, 4_000)), 4))
    servers = [
        serve(tls_peer, users(tmp_path, tls=(cert, key))),
        serve(plain_peer, users(tmp_path)),
        serve(wrong_peer, users(tmp_path, "another-password", tls=(cert, key))),
    ]
    urls = [f"https://localhost:{servers[0].port}", f"http://127.0.0.1:{servers[1].port}"]
    urls.append(f"https://localhost:{servers[2].port}")
    try:
        # This exporter serves TLS: the visitor's password goes to the https peers, not the http one.
        own = endpoint(model_of(0, ("own", S.ONGOING, 1_000)), 1, peers(*urls, plain=False, context=context))
        servers.append(serve(own, users(tmp_path, tls=(cert, key))))
        base = f"https://localhost:{servers[3].port}{PATH}?scope=cluster"
        assert get(base)[0] == 401  # its own basic auth first
        status, _, body = get(base, password=PASSWORD)
        assert status == 200
        doc = json.loads(body)
        assert {r["transactional_id"] for r in doc["transactions"]} == {"over-tls", "own"}
        errors = [s["error"] for s in doc["sources"]]
        assert errors[:2] == [None, None]
        assert errors[2].startswith("401 Unauthorized") and errors[3].startswith("401 Unauthorized")
        assert tls_peer.asked[-1][1] is not None and plain_peer.asked == [] and wrong_peer.asked == []

        # A plain-HTTP exporter passes it on to an http peer too (it came in clear anyway).
        plain_own = endpoint(model_of(0, ("own", S.ONGOING, 1_000)), 1, peers(urls[1], plain=True))
        servers.append(serve(plain_own, users(tmp_path)))
        status, _, body = get(f"http://127.0.0.1:{servers[4].port}{PATH}?scope=cluster", password=PASSWORD)
        assert status == 200 and {r["transactional_id"] for r in json.loads(body)["transactions"]} == {
            "own",
            "in-clear",
        }
    finally:
        for server in servers:
            server.stop()


@pytest.mark.tools
def test_the_cluster_page_in_headless_chromium(pair):
    first, _, _ = pair
    url = f"http://127.0.0.1:{first.port}{PATH}?scope=cluster"
    status, headers, page = get(url, accept=BROWSER)
    assert status == 200 and headers["Content-Type"] == "text/html; charset=utf-8"
    assert '<input type="hidden" name="scope" value="cluster">' in page
    assert "format=json&amp;scope=cluster" in page and ">This exporter only</a>" in page
    dom = chromium.dump_dom(url)
    assert "In-flight transactions of the cluster" in dom
    assert dom.count('data-label="Broker"') == 3 and dom.count('data-label="Transactional id"') == 3
    assert '<td data-label="Broker">2</td><td data-label="Transactional id" class="id">other</td>' in dom
    assert "2 of 4 exporters answered." in dom and dom.count('<p class="error">NOT ANSWERING: ') == 2
    # This exporter's own page links the whole cluster.
    own = get(f"http://127.0.0.1:{first.port}{PATH}", accept=BROWSER)[2]
    assert '<a href="?scope=cluster">Whole cluster (4 exporters)</a>' in own and 'data-label="Broker"' not in own


def test_without_peers_the_cluster_scope_is_this_exporter_alone():
    server = serve(endpoint(model_of(0, ("alone", S.ONGOING, 1_000)), 7))
    try:
        url = f"http://127.0.0.1:{server.port}{PATH}?scope=cluster"
        doc = json.loads(get(url)[2])
        assert [r["exporter"] for r in doc["transactions"]] == [{"name": "b7", "broker_id": 7}]
        assert doc["peers"] == 0 and [s["ok"] for s in doc["sources"]] == [True]
        page = get(url, accept=BROWSER)[2]
        assert "This exporter has no peers (--peer): its own view only." in page
        assert "Whole cluster" not in get(url.partition("?")[0], accept=BROWSER)[2]
    finally:
        server.stop()

from __future__ import annotations

import gzip
import http.client
import logging
import socket
from collections.abc import Iterator

import pytest
from prometheus_client import CollectorRegistry, Counter

from exporter.http_server import ListenError, MetricsServer

PROMETHEUS_TEXT = "text/plain; version=0.0.4; charset=utf-8"
OPENMETRICS = "application/openmetrics-text; version=1.0.0"  # then charset (and escaping, by version)


class Probes:
    def __init__(self) -> None:
        self.healthy = True
        self.ready = False
        self.detail = "replaying partition 7 (12 of 40 records)"


@pytest.fixture
def registry() -> CollectorRegistry:
    registry = CollectorRegistry()
    Counter("txn_test_commits", "commits seen", registry=registry).inc(3)
    return registry


@pytest.fixture
def probes() -> Probes:
    return Probes()


@pytest.fixture
def server(registry: CollectorRegistry, probes: Probes) -> Iterator[MetricsServer]:
    server = MetricsServer("127.0.0.1", 0, registry, healthy=lambda: probes.healthy,
                           ready=lambda: probes.ready, readiness_detail=lambda: probes.detail)
    server.start()
    yield server
    server.stop()


def _request(server: MetricsServer, path: str, method: str = "GET",
             headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
    try:
        connection.request(method, path, headers=headers or {})
        response = connection.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        connection.close()


def test_url_and_port(server: MetricsServer) -> None:
    assert server.port > 0
    assert server.url == f"http://127.0.0.1:{server.port}/metrics"


def test_metrics_prometheus_text_by_default(server: MetricsServer) -> None:
    status, headers, body = _request(server, "/metrics")
    assert status == 200
    assert headers["content-type"] == PROMETHEUS_TEXT
    assert "txn_test_commits_total 3.0" in body.decode()
    assert "# EOF" not in body.decode()


def test_metrics_openmetrics_when_accepted(server: MetricsServer) -> None:
    accept = "application/openmetrics-text; version=1.0.0,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"
    status, headers, body = _request(server, "/metrics", headers={"Accept": accept})
    assert status == 200
    assert headers["content-type"].startswith(OPENMETRICS)
    assert "txn_test_commits_total 3.0" in body.decode()
    assert body.endswith(b"# EOF\n")


def test_metrics_gzip_when_accepted(server: MetricsServer) -> None:
    status, headers, body = _request(server, "/metrics", headers={"Accept-Encoding": "gzip"})
    assert status == 200
    assert headers["content-encoding"] == "gzip"
    assert int(headers["content-length"]) == len(body)
    assert b"txn_test_commits_total 3.0" in gzip.decompress(body)


def test_metrics_query_string_ignored(server: MetricsServer) -> None:
    assert _request(server, "/metrics?x=1")[0] == 200


def test_healthz(server: MetricsServer, probes: Probes) -> None:
    assert _request(server, "/healthz")[::2] == (200, b"ok\n")
    probes.healthy = False
    assert _request(server, "/healthz")[0] == 503


def test_readyz_flips_from_503_with_reason_to_200(server: MetricsServer, probes: Probes) -> None:
    status, headers, body = _request(server, "/readyz")
    assert status == 503
    assert headers["content-type"].startswith("text/plain")
    assert body == b"not ready: replaying partition 7 (12 of 40 records)\n"
    probes.ready = True
    assert _request(server, "/readyz")[::2] == (200, b"ready\n")


def test_readyz_without_detail_callable(registry: CollectorRegistry) -> None:
    server = MetricsServer("127.0.0.1", 0, registry, healthy=lambda: True, ready=lambda: False)
    server.start()
    try:
        assert _request(server, "/readyz")[::2] == (503, b"not ready: starting\n")
    finally:
        server.stop()


def test_a_raising_probe_is_a_failing_probe(registry: CollectorRegistry) -> None:
    def broken() -> bool:
        raise RuntimeError("boom")

    server = MetricsServer("127.0.0.1", 0, registry, healthy=broken, ready=broken)
    server.start()
    try:
        assert _request(server, "/healthz")[0] == 503
        assert _request(server, "/readyz")[0] == 503
    finally:
        server.stop()


def test_unknown_path_is_404(server: MetricsServer) -> None:
    assert _request(server, "/")[0] == 404
    assert _request(server, "/metrics/extra")[0] == 404


def test_head_has_headers_but_no_body(server: MetricsServer) -> None:
    status, headers, body = _request(server, "/metrics", method="HEAD")
    assert (status, body) == (200, b"")
    assert headers["content-type"] == PROMETHEUS_TEXT
    assert int(headers["content-length"]) > 0
    assert _request(server, "/readyz", method="HEAD")[::2] == (503, b"")
    assert _request(server, "/nope", method="HEAD")[0] == 404


def test_port_in_use_is_a_clear_error(registry: CollectorRegistry) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        server = MetricsServer("127.0.0.1", port, registry, healthy=lambda: True, ready=lambda: True)
        with pytest.raises(ListenError, match=rf"^cannot listen on 127\.0\.0\.1:{port}: address already in use$"):
            server.start()


def test_stop_frees_the_port(server: MetricsServer, registry: CollectorRegistry) -> None:
    port = server.port
    server.stop()
    with pytest.raises(OSError):
        _request_port(port)
    again = MetricsServer("127.0.0.1", port, registry, healthy=lambda: True, ready=lambda: True)
    again.start()
    try:
        assert again.port == port
        assert _request(again, "/healthz")[0] == 200
    finally:
        again.stop()
    server.stop()  # a second stop is harmless


def _request_port(port: int) -> None:
    with socket.create_connection(("127.0.0.1", port), timeout=5):
        pass


def test_ipv6_listen() -> None:
    if not socket.has_ipv6:
        pytest.skip("no IPv6")
    server = MetricsServer("::1", 0, CollectorRegistry(), healthy=lambda: True, ready=lambda: True)
    try:
        server.start()
    except ListenError:
        pytest.skip("::1 not available")
    try:
        assert server.url == f"http://[::1]:{server.port}/metrics"
        connection = http.client.HTTPConnection("::1", server.port, timeout=5)
        connection.request("GET", "/healthz")
        assert connection.getresponse().status == 200
        connection.close()
    finally:
        server.stop()


def test_requests_are_logged_at_debug_only(server: MetricsServer, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG, logger="exporter.http_server"):
        _request(server, "/healthz")
    [record] = [r for r in caplog.records if r.name == "exporter.http_server"]
    assert record.levelno == logging.DEBUG
    assert '"GET /healthz HTTP/1.1" 200' in record.getMessage()

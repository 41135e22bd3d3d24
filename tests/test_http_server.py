from __future__ import annotations

import functools
import gzip
import http.client
import logging
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator

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
    server = MetricsServer(
        "127.0.0.1",
        0,
        registry,
        healthy=lambda: probes.healthy,
        ready=lambda: probes.ready,
        readiness_detail=lambda: probes.detail,
    )
    server.start()
    yield server
    server.stop()


def _request(
    server: MetricsServer, path: str, method: str = "GET", headers: dict[str, str] | None = None
) -> tuple[int, dict[str, str], bytes]:
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


def _reset(connection: socket.socket) -> None:
    """Close with a TCP reset, as a client that crashes or gives up does."""
    connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    connection.close()


def _wait_for(condition: Callable[[], bool], what: str, seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def _accepted(port: int, connection: socket.socket) -> bool:
    """Whether the process listening on `port` accepted `connection`: the kernel's table (Linux's
    /proc/net/tcp) shows the server's end of it with an inode (of the socket the server's accept
    returned) once accepted, 0 while it waits in the listen queue."""
    client_port = connection.getsockname()[1]
    with open("/proc/net/tcp") as table:
        for row in list(table)[1:]:
            local, remote, inode = (row.split()[i] for i in (1, 2, 9))
            if int(local.rpartition(":")[2], 16) == port and int(remote.rpartition(":")[2], 16) == client_port:
                return inode != "0"
    return False


def test_a_client_leaving_mid_request_is_logged_at_debug_not_printed(
    server: MetricsServer, capfd: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.DEBUG, logger="exporter.http_server"):
        for partial in (b"GE", b"GET /metrics HTTP/1.1\r\nHost: x\r\n"):
            connection = socket.create_connection(("127.0.0.1", server.port), timeout=5)
            connection.sendall(partial)
            _wait_for(functools.partial(_accepted, server.port, connection), "the server to take the connection")
            time.sleep(0.2)  # the server's read is waiting on the rest
            _reset(connection)
        _wait_for(lambda: sum("reset" in r.getMessage() for r in caplog.records) == 2, "two DEBUG lines")
        assert _request(server, "/healthz")[0] == 200
    assert capfd.readouterr().err == ""
    assert all(r.levelno == logging.DEBUG for r in caplog.records if r.name == "exporter.http_server")


def test_a_flood_of_idle_and_slow_connections_leaves_threads_bounded_and_scrapes_answered(
    registry: CollectorRegistry, capfd: pytest.CaptureFixture[str]
) -> None:
    limit = 16
    server = MetricsServer("127.0.0.1", 0, registry, healthy=lambda: True, ready=lambda: True, max_connections=limit)
    server.start()
    threads_before = threading.active_count()
    flood: list[socket.socket] = []
    try:
        for n in range(400):
            connection = socket.create_connection(("127.0.0.1", server.port), timeout=10)
            if n % 2:  # slowloris: headers started, never finished
                connection.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Slow: ")
            flood.append(connection)
        for _ in range(3):
            status, _, body = _request(server, "/metrics")
            assert status == 200 and b"txn_test_commits_total 3.0" in body
        _wait_for(lambda: server.rejected_connections >= 400 - limit, "the idle connections to be shed")
        _wait_for(lambda: threading.active_count() <= threads_before + limit, "the handler threads to end")
    finally:
        for connection in flood:
            connection.close()
        server.stop()
    assert capfd.readouterr().err == ""


def test_new_connections_are_refused_and_counted_while_every_slot_answers_a_request(
    registry: CollectorRegistry,
) -> None:
    entered, release = threading.Event(), threading.Event()

    def slow_probe() -> bool:
        entered.set()
        release.wait(30)
        return True

    server = MetricsServer("127.0.0.1", 0, registry, healthy=slow_probe, ready=lambda: True, max_connections=1)
    server.start()
    try:
        busy = threading.Thread(target=_request, args=(server, "/healthz"))
        busy.start()
        assert entered.wait(30)
        with pytest.raises((ConnectionError, http.client.RemoteDisconnected)):
            _request(server, "/readyz")
        assert server.rejected_connections == 1
        release.set()
        busy.join(30)

        # The slot frees a moment after the client has its answer (the handler marks the connection
        # idle after writing the response, or drops it when the client's close arrives), so a new
        # connection made at once may still be refused: what is promised is that one soon is not.
        def answered() -> bool:
            try:
                return _request(server, "/readyz")[0] == 200
            except (ConnectionError, http.client.RemoteDisconnected):
                return False

        _wait_for(answered, "a connection admitted once the slow answer is done", seconds=10)
    finally:
        release.set()
        server.stop()


def test_a_request_head_over_64_kib_is_refused_without_a_traceback(
    server: MetricsServer, capfd: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    with (
        caplog.at_level(logging.DEBUG, logger="exporter.http_server"),
        socket.create_connection(("127.0.0.1", server.port), timeout=10) as connection,
    ):
        connection.sendall(b"GET /metrics HTTP/1.1\r\n")
        try:
            for n in range(100):  # 100 headers of 2 KiB: the stdlib's limits allow them
                connection.sendall(f"X-{n}: {'a' * 2048}\r\n".encode())
        except ConnectionError:
            pass  # dropped before the end: the point
        try:
            assert connection.recv(1024).startswith(b"HTTP/1.0 431 ")  # answered, then closed
        except ConnectionError:
            pass  # closed with our bytes unread: a reset may overtake the answer
    _wait_for(lambda: any("request head over 65536 bytes" in r.getMessage() for r in caplog.records), "the DEBUG line")
    assert _request(server, "/metrics")[0] == 200
    assert capfd.readouterr().err == ""


SECURITY_HEADERS = {"x-content-type-options": "nosniff", "cache-control": "no-store", "referrer-policy": "no-referrer"}


def _raw(server: MetricsServer, request: bytes) -> tuple[int, dict[str, str], bytes]:
    """Sends `request` as it is; the response, read to the end of the connection."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as connection:
        try:
            connection.sendall(request)
        except ConnectionError:
            pass  # the server answered and closed before reading it all
        response = http.client.HTTPResponse(connection)
        response.begin()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()


def _secure(headers: dict[str, str]) -> bool:
    return all(headers.get(k) == v for k, v in SECURITY_HEADERS.items()) and "frame-ancestors 'none'" in headers.get(
        "content-security-policy", ""
    )


def _routed(registry: CollectorRegistry, routes) -> MetricsServer:
    server = MetricsServer("127.0.0.1", 0, registry, healthy=lambda: True, ready=lambda: False, routes=routes)
    server.start()
    return server


def test_every_response_error_or_not_carries_the_security_headers(registry: CollectorRegistry) -> None:
    def broken(query: str, accept: str, authorization: str | None = None):
        raise RuntimeError("a bug")

    routes = {"/page": lambda q, a, auth=None: (200, {"Content-Type": "text/html"}, b"<p>hi</p>"), "/broken": broken}
    server = _routed(registry, routes)
    try:
        for path in ("/metrics", "/healthz", "/readyz", "/nope", "/page", "/broken"):
            for method in ("GET", "HEAD"):
                status, headers, _ = _request(server, path, method)
                assert _secure(headers), (path, method, status, headers)
        too_many_headers = b"GET /metrics HTTP/1.1\r\n" + b"X: y\r\n" * 200 + b"\r\n"
        for request in (
            b"POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n",
            b"GET /metrics HTTP/9.9\r\n\r\n",
            b"GARBAGE\r\n\r\n",
            too_many_headers,
        ):
            status, headers, _ = _raw(server, request)
            assert status >= 400 and _secure(headers), (request[:30], status, headers)
    finally:
        server.stop()


def test_a_routes_own_policy_is_kept_and_gets_frame_ancestors(registry: CollectorRegistry) -> None:
    policy = "default-src 'none'; style-src 'unsafe-inline'"
    server = _routed(registry, {"/page": lambda q, a, auth=None: (200, {"Content-Security-Policy": policy}, b"x")})
    try:
        assert _request(server, "/page")[1]["content-security-policy"] == policy + "; frame-ancestors 'none'"
    finally:
        server.stop()


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "OPTIONS", "PATCH", "TRACE", "BREW"])
def test_methods_other_than_get_and_head_get_405_with_allow(server: MetricsServer, method: str) -> None:
    status, headers, body = _request(server, "/metrics", method)
    assert (status, headers["allow"], headers["content-type"]) == (405, "GET, HEAD", "text/plain; charset=utf-8")
    assert body == f"method {method} not allowed; use GET or HEAD\n".encode()
    assert _request(server, "/metrics")[0] == 200


def test_the_server_header_names_no_python_version(server: MetricsServer) -> None:
    for response in (_request(server, "/metrics"), _request(server, "/nope"), _raw(server, b"BAD\r\n\r\n")):
        assert response[1]["server"] == "txn-exporter"


def test_an_oversized_request_line_gets_414_and_oversized_headers_431(
    server: MetricsServer, capfd: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.DEBUG, logger="exporter.http_server"):
        status, headers, body = _raw(server, b"GET /metrics?" + b"a" * 70_000 + b" HTTP/1.1\r\n\r\n")
        assert (status, headers["connection"], body) == (414, "close", b"request line over 65536 bytes\n")
        many = b"".join(f"X-{n}: {'a' * 2048}\r\n".encode() for n in range(40))
        status, headers, body = _raw(server, b"GET /metrics HTTP/1.1\r\nHost: x\r\n" + many + b"\r\n")
        assert (status, headers["connection"], body) == (431, "close", b"request header fields over 65536 bytes\n")
    assert _request(server, "/metrics")[0] == 200
    assert capfd.readouterr().err == ""
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING or r.exc_info]


def test_error_bodies_are_one_bounded_line_whatever_a_route_or_a_client_sends(registry: CollectorRegistry) -> None:
    routes = {
        "/echo": lambda q, a, auth=None: (400, {"Content-Type": "text/plain; charset=utf-8"}, q.encode() + b"\nmore\n")
    }
    server = _routed(registry, routes)
    try:
        status, headers, body = _request(server, "/echo?" + "e" * 60_000)
        assert status == 400 and len(body) <= 1024 and body.endswith(b"...\n") and body.count(b"\n") == 1
        assert int(headers["content-length"]) == len(body)
        status, headers, body = _raw(server, b"GET /metrics HTTP/1.1" + b"x" * 30_000 + b"\r\n\r\n")
        assert status == 400 and len(body) <= 1024 and body.count(b"\n") == 1
        assert headers["content-type"] == "text/plain; charset=utf-8" and b"<" not in body
    finally:
        server.stop()

"""The exporter's HTTP endpoints: /metrics, /healthz, /readyz.

A stdlib threaded server rather than prometheus_client.start_http_server because the probes need
their own routes and the bind error must reach the caller instead of dying in a thread.
"""

from __future__ import annotations

import errno
import gzip
import logging
import socket
import threading
from collections.abc import Callable
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder, gzip_accepted

log = logging.getLogger(__name__)

_TEXT = "text/plain; charset=utf-8"


class ListenError(OSError):
    """The server could not bind its address (in use, not local, no permission)."""


class MetricsServer:
    def __init__(
        self,
        host: str,
        port: int,
        registry: CollectorRegistry,
        healthy: Callable[[], bool],
        ready: Callable[[], bool],
        readiness_detail: Callable[[], str] | None = None,
    ) -> None:
        self._host = host
        self._requested_port = port
        self.registry = registry
        self.healthy = healthy
        self.ready = ready
        self.readiness_detail = readiness_detail
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Bind and serve in a daemon thread; ListenError if the address cannot be bound."""
        if self._server is not None:
            raise RuntimeError("MetricsServer already started")
        try:
            self._server = _Server((self._host, self._requested_port), self)
        except OSError as e:
            in_use = e.errno == errno.EADDRINUSE
            reason = "address already in use" if in_use else (e.strerror or str(e))
            address = _hostport(self._host, self._requested_port)
            raise ListenError(f"cannot listen on {address}: {reason}") from e
        # serve_forever checks for shutdown once per poll: 0.1 s keeps stop() quick at no real cost.
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.1,),
                                        name="metrics-http", daemon=True)
        self._thread.start()

    @property
    def port(self) -> int:
        """The bound port (the kernel's choice when constructed with port 0)."""
        if self._server is None:
            raise RuntimeError("MetricsServer not started")
        return self._server.server_address[1]

    @property
    def url(self) -> str:
        return f"http://{_hostport(self._host, self.port)}/metrics"

    def stop(self) -> None:
        """Stop serving and release the port; a no-op if not started."""
        if self._server is None:
            return
        self._server.shutdown()
        self._server.server_close()
        assert self._thread is not None
        self._thread.join()
        self._server = self._thread = None


def _hostport(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


class _Server(ThreadingHTTPServer):
    daemon_threads = True  # a stuck scrape must not keep the process alive

    def __init__(self, address: tuple[str, int], app: MetricsServer) -> None:
        # TCPServer reads address_family during __init__, so it is chosen before binding.
        self.address_family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
        self.app = app
        super().__init__(address, _Handler)


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    timeout = 30  # seconds a silent client may hold a thread

    def do_GET(self) -> None:
        self._respond(send_body=True)

    def do_HEAD(self) -> None:
        self._respond(send_body=False)

    def _respond(self, send_body: bool) -> None:
        app = self.server.app
        path = self.path.split("?", 1)[0]
        headers: dict[str, str] = {"Content-Type": _TEXT}
        if path == "/metrics":
            try:
                body, headers = self._metrics(app.registry)
                status = HTTPStatus.OK
            except Exception:
                log.exception("collecting metrics failed")
                status, body = HTTPStatus.INTERNAL_SERVER_ERROR, b"collecting metrics failed\n"
        elif path == "/healthz":
            status, body = (HTTPStatus.OK, b"ok\n") if _ask(app.healthy) else \
                (HTTPStatus.SERVICE_UNAVAILABLE, b"unhealthy\n")
        elif path == "/readyz":
            if _ask(app.ready):
                status, body = HTTPStatus.OK, b"ready\n"
            else:
                detail = _detail(app.readiness_detail)
                status, body = HTTPStatus.SERVICE_UNAVAILABLE, f"not ready: {detail}\n".encode()
        else:
            status, body = HTTPStatus.NOT_FOUND, b"not found; try /metrics, /healthz or /readyz\n"
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if send_body:
            self.wfile.write(body)

    def _metrics(self, registry: CollectorRegistry) -> tuple[bytes, dict[str, str]]:
        encoder, content_type = choose_encoder(self.headers.get("Accept", ""))
        body = encoder(registry)
        headers = {"Content-Type": content_type}
        if gzip_accepted(self.headers.get("Accept-Encoding", "")):
            body = gzip.compress(body)
            headers["Content-Encoding"] = "gzip"
        return body, headers

    def log_message(self, format: str, *args: object) -> None:
        # Every scrape would otherwise print a line to stderr.
        log.debug("%s - " + format, self.address_string(), *args)


def _ask(check: Callable[[], bool]) -> bool:
    # A probe that raises is a failing probe, not a dropped connection.
    try:
        return bool(check())
    except Exception:
        log.exception("health check %r failed", check)
        return False


def _detail(readiness_detail: Callable[[], str] | None) -> str:
    if readiness_detail is None:
        return "starting"
    try:
        return readiness_detail()
    except Exception:
        log.exception("readiness detail failed")
        return "unknown"

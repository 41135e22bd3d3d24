"""The exporter's HTTP endpoints: /metrics, /healthz, /readyz, and the pages it is given (`routes`).

A stdlib threaded server rather than prometheus_client.start_http_server because the probes need
their own routes and the bind error must reach the caller instead of dying in a thread.

With a web config file (exporter.web_config: exporter-toolkit's format) the listener speaks TLS
only and every path needs basic auth, /healthz and /readyz included, as the toolkit does (see
deploy/README.md for probes). The files are re-read when they change (certificate rotation,
users added), checked at most once a second; a change that does not load is logged and the last
good configuration stays. The TLS handshake runs in the request's thread, so a client that stalls
it holds only that thread, for at most the handler timeout.

Clients are untrusted, so what they do is bounded: at most `max_connections` connections hold a
thread each (64 by default); when all are taken, the one idle longest (connected, or in its TLS
handshake, but without a complete request yet: slowloris, a port scan, a stuck client) is closed to
make room, and when none is idle the new connection is closed at once; both are counted
(txn_exporter_http_rejected_connections_total). So a flood of idle or slow connections cannot use up
threads or memory (a request head is read up to 64 KiB: a longer request line is answered 414, longer
headers 431, and the connection closed), and scrapes, which send their request as soon as they
connect, go on being answered. A peer resetting or dropping its connection mid-request is logged at
DEBUG, never printed to stderr as socketserver does.

The rules every response follows are enforced here, whatever the route (`_Handler._send`): the
security headers (`SECURITY_HEADERS`; a route's own Content-Security-Policy is kept and gets
frame-ancestors 'none'), an error's body is one line of at most 1 KiB of text/plain (client input a
route or the stdlib echoes is cut), methods other than GET and HEAD get 405 with Allow, the 401 names
a realm, and the Server header names the exporter only (no Python version).
"""

from __future__ import annotations

import base64
import binascii
import errno
import gzip
import hashlib
import io
import logging
import os
import selectors
import socket
import ssl
import sys
import threading
import time
from collections.abc import Callable, Mapping
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import bcrypt
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder, gzip_accepted

from exporter import web_config

log = logging.getLogger(__name__)

_TEXT = "text/plain; charset=utf-8"
# On every response, error or not; a route's own value wins (the page's Content-Security-Policy,
# which gets frame-ancestors 'none' when it lacks one).
SECURITY_HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "Content-Security-Policy": "default-src 'none'; frame-ancestors 'none'",
    "Cache-Control": "no-store",
    "Referrer-Policy": "no-referrer",
}
_FRAME_ANCESTORS = "frame-ancestors 'none'"
ALLOWED_METHODS = ("GET", "HEAD")
REALM = "txn-exporter"
SERVER_NAME = "txn-exporter"
# An error's body: one line of at most this many bytes (the rest cut, "..." in its place).
MAX_ERROR_BODY = 1024
_BCRYPT_MAX_BYTES = 72  # bcrypt checks no more (and refuses to be given more)
# Request line and headers of one connection, in all: a scrape's are well under 1 KiB. (The stdlib
# alone allows 100 headers of 64 KiB each, 6.4 MiB a connection.)
_MAX_REQUEST_HEAD = 64 * 1024


# A page: (query string, Accept header, Authorization header or None) -> (status, headers, body). The
# Authorization header has been checked already; a page may pass it on (exporter.sources.peer_exporters.Peers).
Route = Callable[[str, str, str | None], tuple[int, dict[str, str], bytes]]


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
        web_config_file: web_config.WebConfig | str | None = None,
        max_connections: int = 64,
        routes: Mapping[str, Route] | None = None,
    ) -> None:
        """`web_config_file`: the web config as read already (Settings.web_config), or its file's path, read
        here (WebConfigError if it does not load)."""
        self._host = host
        self._requested_port = port
        self.registry = registry
        self.healthy = healthy
        self.ready = ready
        self.readiness_detail = readiness_detail
        self.routes = dict(routes or {})
        if isinstance(web_config_file, str):
            web_config_file = web_config.load(web_config_file)
        self.web = _WebConfigSource(web_config_file) if web_config_file is not None else None
        self.max_connections = max_connections
        self._rejected_before = 0  # of servers stopped earlier, so the counter never goes back
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
        self._server.max_connections = self.max_connections
        self._thread = threading.Thread(target=self._server.serve_until_stopped, name="metrics-http", daemon=True)
        self._thread.start()

    @property
    def port(self) -> int:
        """The bound port (the kernel's choice when constructed with port 0)."""
        if self._server is None:
            raise RuntimeError("MetricsServer not started")
        return self._server.server_address[1]

    @property
    def rejected_connections(self) -> int:
        """Connections closed to stay within max_connections (txn_exporter_http_rejected_connections_total)."""
        server = self._server
        return self._rejected_before + (server.rejected_connections if server is not None else 0)

    @property
    def url(self) -> str:
        scheme = "https" if self.web is not None and self.web.tls else "http"
        return f"{scheme}://{_hostport(self._host, self.port)}/metrics"

    def stop(self) -> None:
        """Stop serving and release the port; a no-op if not started."""
        if self._server is None:
            return
        assert self._thread is not None
        self._server.stop_serving()
        self._thread.join()  # before closing: a closed socket leaves the selector without a wake-up
        self._server.server_close()
        self._rejected_before += self._server.rejected_connections
        self._server = self._thread = None


def _hostport(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


class _WebConfigSource:
    """The web config and its TLS context, reloaded when one of its files changes."""

    _CHECK_SECONDS = 1.0
    _FAKE_HASH = b"$2b$10$E64SA5qCunTl9tHebvfN.OZBSyy0K/7blH5WfH28.GjzkA4.1pgfi"  # checked for unknown users

    def __init__(self, config: web_config.WebConfig) -> None:
        self._path = config.path
        self._lock = threading.Lock()
        self._bcrypt_lock = threading.Lock()  # one bcrypt at a time: it is CPU-heavy by design
        self._verified: dict[bytes, bool] = {}
        self._config, self._context = config, self._context_of(config)
        self._stamp = self._stamps()
        self._next_check = time.monotonic() + self._CHECK_SECONDS

    @property
    def tls(self) -> bool:
        return self._context is not None

    def _load(self) -> tuple[web_config.WebConfig, ssl.SSLContext | None]:
        config = web_config.load(self._path)
        return config, self._context_of(config)

    @staticmethod
    def _context_of(config: web_config.WebConfig) -> ssl.SSLContext | None:
        return config.tls.context() if config.tls else None

    def _stamps(self) -> tuple[tuple[int, int] | None, ...]:
        stamps: list[tuple[int, int] | None] = []
        for path in self._config.files:
            try:
                st = os.stat(path)
                stamps.append((st.st_mtime_ns, st.st_size))
            except OSError:
                stamps.append(None)
        return tuple(stamps)

    def current(self) -> tuple[web_config.WebConfig, ssl.SSLContext | None]:
        with self._lock:
            now = time.monotonic()
            if now >= self._next_check:
                self._next_check = now + self._CHECK_SECONDS
                stamp = self._stamps()
                if stamp != self._stamp:
                    self._stamp = stamp
                    try:
                        self._config, self._context = self._load()
                        self._stamp = self._stamps()
                        self._verified.clear()
                        log.info("web config %s reloaded: %s", self._path, self._config.summary())
                    except (web_config.WebConfigError, ssl.SSLError, OSError) as e:
                        log.error("web config not reloaded, keeping the previous one: %s", e)
            return self._config, self._context

    def authorized(self, header: str | None) -> bool:
        config, _ = self.current()
        if not config.users:
            return True
        if not header or not header.startswith("Basic "):
            return False
        try:
            user, sep, password = base64.b64decode(header[6:], validate=True).decode().partition(":")
        except (binascii.Error, UnicodeDecodeError):
            return False
        if not sep:
            return False
        hashed = config.users.get(user)
        known = hashed is not None
        # Results are cached by a digest of user, hash and password: bcrypt costs ~50 ms a check.
        key = hashlib.sha256(b"\0".join([user.encode(), hashed or b"", password.encode()])).digest()
        with self._lock:
            cached = self._verified.get(key)
        if cached is None:
            secret = password.encode()
            with self._bcrypt_lock:
                # An unknown user costs a bcrypt too, so timing does not tell users apart; so does a
                # password over bcrypt's 72 bytes (which it refuses to check), its first 72 checked
                # and the answer no, whatever they give.
                matches = _checkpw(secret[:_BCRYPT_MAX_BYTES], hashed or self._FAKE_HASH)
            cached = known and matches and len(secret) <= _BCRYPT_MAX_BYTES
            with self._lock:
                if len(self._verified) > 1000:
                    self._verified.clear()
                self._verified[key] = cached
        return cached


def _checkpw(password: bytes, hashed: bytes) -> bool:
    try:
        return bcrypt.checkpw(password, hashed)
    except ValueError:  # none is expected after the length cut; should bcrypt refuse something else: no
        return False


class _Server(ThreadingHTTPServer):
    daemon_threads = True  # a stuck scrape must not keep the process alive
    handshake_timeout = 10.0
    # The listen backlog: a burst of connections waits to be accepted (and judged) instead of
    # having its SYNs dropped, which would delay a scrape by a retransmission (1 s and more).
    request_queue_size = 128
    max_connections = 64
    # handle_request's wait for a connection, which serve_until_stopped calls once one is there: if
    # it went meanwhile (reset before accepted), the wait ends within this, and the stop is seen.
    timeout = 1.0

    def __init__(self, address: tuple[str, int], app: MetricsServer) -> None:
        # TCPServer reads address_family during __init__, so it is chosen before binding.
        self.address_family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
        self.app = app
        # Open connections -> since when they wait for a request (monotonic), None while one is answered.
        self._connections: dict[socket.socket, float | None] = {}
        self._connections_lock = threading.Lock()
        self.rejected_connections = 0
        # serve_until_stopped's wake-up: stop_serving writes a byte.
        self._stop_reader, self._stop_writer = socket.socketpair()
        self._stopping = False
        super().__init__(address, _Handler)

    def serve_until_stopped(self) -> None:
        """Accepts connections until stop_serving, its thread asleep until a connection or the stop
        arrives. (serve_forever wakes every poll interval to look for a shutdown: at 0.1 s, 10
        wake-ups a second cost an idle exporter 0.001 cores, a quarter of its CPU.)"""
        with selectors.DefaultSelector() as selector:
            selector.register(self, selectors.EVENT_READ)
            selector.register(self._stop_reader, selectors.EVENT_READ)
            while not self._stopping:
                for key, _ in selector.select():
                    if key.fileobj is self and not self._stopping:
                        self.handle_request()  # (its own select returns at once, or after `timeout`)
                self.service_actions()

    def stop_serving(self) -> None:
        """Has serve_until_stopped return; the caller joins its thread, then closes the server."""
        self._stopping = True
        self._stop_writer.send(b"x")

    def server_close(self) -> None:
        super().server_close()
        self._stop_reader.close()
        self._stop_writer.close()

    def process_request(self, request: socket.socket, client_address: object) -> None:  # type: ignore[override]  # because a TCP server's requests are sockets (socketserver's types allow UDP's too)
        # In the accepting thread: bookkeeping only, nothing that waits on a client.
        with self._connections_lock:
            admitted = len(self._connections) < self.max_connections or self._close_longest_idle()
            if admitted:
                self._connections[request] = time.monotonic()
            else:
                self.rejected_connections += 1
        if not admitted:
            log.debug(
                "connection from %s refused: all %d connections are answering requests",
                client_address,
                self.max_connections,
            )
            self.shutdown_request(request)
            return
        super().process_request(request, client_address)

    def _close_longest_idle(self) -> bool:
        idle = [(since, conn) for conn, since in self._connections.items() if since is not None]
        if not idle:
            return False
        _, conn = min(idle, key=lambda item: item[0])
        del self._connections[conn]
        self.rejected_connections += 1
        try:
            # The plain socket's shutdown, also for a TLS one (whose own would drop its SSL state under
            # the thread using it): the thread's read returns at once and the thread ends.
            socket.socket.shutdown(conn, socket.SHUT_RDWR)
        except OSError:
            pass  # already gone
        log.debug("closed the longest idle connection to make room (limit %d)", self.max_connections)
        return True

    def process_request_thread(self, request: socket.socket, client_address: object) -> None:  # type: ignore[override]  # because a TCP server's requests are sockets
        try:
            super().process_request_thread(request, client_address)
        finally:
            with self._connections_lock:
                self._connections.pop(request, None)

    def answering(self, connection: socket.socket, busy: bool) -> None:
        """The handler has a complete request to answer (busy), or waits for the next one."""
        with self._connections_lock:
            if connection in self._connections:
                self._connections[connection] = None if busy else time.monotonic()

    def handle_error(self, request: object, client_address: object) -> None:
        # socketserver would print the traceback to stderr, outside logging and its format.
        error = sys.exc_info()[1]
        if isinstance(error, OSError):  # reset, broken pipe, timeout, TLS alert: the peer's doing
            log.debug("connection from %s ended: %s", client_address, error)
        else:
            log.error("answering %s failed", client_address, exc_info=True)

    def get_request(self) -> tuple[socket.socket, object]:
        sock, address = super().get_request()
        context = self.app.web.current()[1] if self.app.web is not None else None
        if context is not None:
            sock = context.wrap_socket(sock, server_side=True, do_handshake_on_connect=False)
        return sock, address

    def finish_request(self, request: socket.socket | tuple[bytes, socket.socket], client_address: object) -> None:
        if isinstance(request, ssl.SSLSocket):
            request.settimeout(self.handshake_timeout)
            try:
                request.do_handshake()
            except (ssl.SSLError, OSError) as e:
                # Plain HTTP on the TLS port, an untrusted client certificate, a port scan.
                log.debug("TLS handshake with %s failed: %s", client_address, e)
                return
        super().finish_request(request, client_address)


class _RequestHeadTooLarge(OSError):
    """More than _MAX_REQUEST_HEAD bytes read from one connection (an OSError: the peer's doing)."""


class _Phase:
    """What the handler is reading: the request line or the header fields (for 414 or 431)."""

    LINE = "request line"
    HEADERS = "request header fields"


class _BoundedReader:
    """The connection's reader, with a budget of bytes in all; the handler reads only the head."""

    def __init__(self, raw: io.BufferedIOBase, budget: int) -> None:
        self._raw = raw
        self._left = budget

    def readline(self, size: int = -1) -> bytes:
        limit = self._left + 1 if size < 0 else min(size, self._left + 1)
        line = self._raw.readline(limit)
        self._left -= len(line)
        if self._left < 0:
            raise _RequestHeadTooLarge(f"request head over {_MAX_REQUEST_HEAD} bytes")
        return line

    def __getattr__(self, name: str) -> object:
        return getattr(self._raw, name)  # close, closed, ...


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    timeout = 30  # seconds a silent client may hold a thread
    server_version = SERVER_NAME

    def setup(self) -> None:
        super().setup()
        # (Not a BufferedIOBase: the handler reads the head with readline, the rest is the raw reader's.)
        self.rfile = _BoundedReader(self.rfile, _MAX_REQUEST_HEAD)  # type: ignore[assignment]  # because duck-typed (above)
        self._phase = _Phase.LINE

    def version_string(self) -> str:
        return SERVER_NAME  # the stdlib adds "Python/3.x"

    def parse_request(self) -> bool:
        self._phase = _Phase.HEADERS  # the request line is read: parse_request reads the headers
        parsed = super().parse_request()
        if parsed:
            self.server.answering(self.connection, busy=True)
            if self.command not in ALLOWED_METHODS:
                self._send(
                    HTTPStatus.METHOD_NOT_ALLOWED,
                    {"Allow": ", ".join(ALLOWED_METHODS), "Connection": "close"},
                    f"method {self.command} not allowed; use GET or HEAD\n".encode(),
                )
                return False
        return parsed

    def handle_one_request(self) -> None:
        self._phase = _Phase.LINE
        try:
            super().handle_one_request()
        except _RequestHeadTooLarge as e:
            log.debug("request from %s refused: %s", self.address_string(), e)
            status = (
                HTTPStatus.REQUEST_URI_TOO_LONG
                if self._phase is _Phase.LINE
                else HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE
            )
            if self._phase is _Phase.LINE:  # nothing of the request is known
                self.command, self.requestline, self.request_version = "", "", "HTTP/1.0"
            self._send(status, {"Connection": "close"}, f"{self._phase} over {_MAX_REQUEST_HEAD} bytes\n".encode())
            self.close_connection = True
            return
        self.server.answering(self.connection, busy=False)  # a keep-alive connection idles again

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        # The stdlib's errors (a malformed request line, a bad version, too many headers): the same
        # rules as every response, not its HTML page, and the message (which may quote the request)
        # in the body only, never in the status line.
        try:
            phrase = HTTPStatus(code).phrase
        except ValueError:
            phrase = "error"
        if self.request_version == "HTTP/0.9":  # (the stdlib's guess when the request line is broken)
            self.request_version = "HTTP/1.0"  # a status line and headers: no client speaks 0.9
        self._send(code, {"Connection": "close"}, f"{message or phrase}\n".encode("utf-8", "replace"))

    def do_GET(self) -> None:
        self._respond(send_body=True)

    def do_HEAD(self) -> None:
        self._respond(send_body=False)

    def _respond(self, send_body: bool) -> None:
        app = self.server.app
        path, _, query = self.path.partition("?")
        headers: dict[str, str] = {"Content-Type": _TEXT}
        status: int  # an HTTPStatus, or what a route answers
        if app.web is not None and not app.web.authorized(self.headers.get("Authorization")):
            status, body = HTTPStatus.UNAUTHORIZED, b"Unauthorized\n"
            headers["WWW-Authenticate"] = f'Basic realm="{REALM}", charset="UTF-8"'
        elif path == "/metrics":
            try:
                body, headers = self._metrics(app.registry)
                status = HTTPStatus.OK
            except Exception:
                log.exception("collecting metrics failed")
                status, body = HTTPStatus.INTERNAL_SERVER_ERROR, b"collecting metrics failed\n"
        elif path == "/healthz":
            status, body = (
                (HTTPStatus.OK, b"ok\n") if _ask(app.healthy) else (HTTPStatus.SERVICE_UNAVAILABLE, b"unhealthy\n")
            )
        elif path == "/readyz":
            if _ask(app.ready):
                status, body = HTTPStatus.OK, b"ready\n"
            else:
                detail = _detail(app.readiness_detail)
                status, body = HTTPStatus.SERVICE_UNAVAILABLE, f"not ready: {detail}\n".encode()
        elif path in app.routes:
            try:
                status, headers, body = app.routes[path](
                    query, self.headers.get("Accept", ""), self.headers.get("Authorization")
                )
            except Exception:
                log.exception("%s failed", path)
                status, headers, body = HTTPStatus.INTERNAL_SERVER_ERROR, {}, f"{path} failed\n".encode()
        else:
            status, body = HTTPStatus.NOT_FOUND, b"not found; try /metrics, /healthz or /readyz\n"
        self._send(status, headers, body, send_body)

    def _send(self, status: int, headers: Mapping[str, str], body: bytes, send_body: bool = True) -> None:
        """Every response goes out here: the security headers added, an error's body made one short
        line of text (see the module doc)."""
        merged = {**SECURITY_HEADERS, **headers}
        policy = merged["Content-Security-Policy"]
        if "frame-ancestors" not in policy:
            merged["Content-Security-Policy"] = f"{policy}; {_FRAME_ANCESTORS}"
        if status >= 400:
            merged["Content-Type"] = _TEXT
            body = _error_body(body)
        self.send_response(status)
        for name, value in merged.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if send_body and self.command != "HEAD":
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


def _error_body(body: bytes) -> bytes:
    """An error's body as one line of at most MAX_ERROR_BODY bytes, cut on a character boundary."""
    line = body.split(b"\n", 1)[0].rstrip(b"\r")
    if len(line) + 1 > MAX_ERROR_BODY or b"\n" in body.rstrip(b"\n"):
        line = line[: MAX_ERROR_BODY - 4].decode("utf-8", "ignore").encode() + b"..."
    return line + b"\n"


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

"""The other exporters' transactions views, fetched: over HTTP(S), in parallel, bounded in time and size.

`fetch_view` asks one exporter for its JSON document (a failure is a SourceError with one line:
refused, timed out, TLS, 401, another 4xx/5xx, a redirect, not JSON, not a view, too large);
`gather` asks several in parallel and never raises; `Peers` is an exporter's configured peers
(`--peer`), asked behind `/transactions?scope=cluster`. What they answer is handed over as
exporter.contracts.peers.Answer; the transactions view (exporter.view.cluster) merges it.
"""

from __future__ import annotations

import hashlib
import http.client
import json
import socket
import ssl
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from typing import IO

from exporter.contracts.peers import Answer, PeersBusy, Source

# A view of 1,000 rows with their partitions is a few MB; anything much larger is not one.
MAX_ANSWER_BYTES = 32 * 1024 * 1024
MAX_PARALLEL = 16  # exporters asked at once
_ERROR_DETAIL_CHARS = 200


class SourceError(Exception):
    """An exporter's view could not be had: one line, without the URL; `reached`: False when no
    HTTP answer came at all (refused, timed out, TLS, a dropped connection)."""

    def __init__(self, message: str, reached: bool = True) -> None:
        super().__init__(message)
        self.reached = reached


def name_of(url: str) -> str:
    """How a view URL's exporter is named when nothing better is known: its host:port."""
    parts = urllib.parse.urlsplit(url)
    return parts.netloc.rpartition("@")[2] or url


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    # A redirect would carry the Authorization header to wherever it points: reported instead.
    def redirect_request(
        self,
        req: urllib.request.Request,
        fp: IO[bytes],
        code: int,
        msg: str,
        headers: http.client.HTTPMessage,
        newurl: str,
    ) -> urllib.request.Request | None:
        return None


def fetch_json(
    url: str,
    headers: Mapping[str, str],
    context: ssl.SSLContext | None,
    timeout: float,
    use_proxies: bool = True,
    unauthorized_hint: str = "",
    max_bytes: int = MAX_ANSWER_BYTES,
) -> object:
    """A GET's JSON; SourceError (one line) when it cannot be had. No redirect is followed (it would
    take the Authorization header along). `unauthorized_hint` follows a 401's reason."""
    request = urllib.request.Request(url, headers={"Accept": "application/json", **headers})
    handlers: list[urllib.request.BaseHandler] = [_NoRedirect(), urllib.request.HTTPSHandler(context=context)]
    if not use_proxies:
        handlers.append(urllib.request.ProxyHandler({}))
    opener = urllib.request.build_opener(*handlers)
    try:
        with opener.open(request, timeout=timeout) as response:
            body = response.read(max_bytes + 1)
    except urllib.error.HTTPError as e:
        if 300 <= e.code < 400:
            where = e.headers.get("Location", "elsewhere")[:_ERROR_DETAIL_CHARS]
            raise SourceError(f"{e.code} {e.reason}: redirected to {where}; give that URL") from None
        try:
            detail = e.read(4096).decode(errors="replace").strip().splitlines()
        except (OSError, http.client.HTTPException):
            detail = []
        first = detail[0][:_ERROR_DETAIL_CHARS] if detail else ""
        hint = unauthorized_hint if e.code == 401 else ""
        raise SourceError(f"{e.code} {str(e.reason)[:_ERROR_DETAIL_CHARS]}{hint}: {first}") from None
    except urllib.error.URLError as e:
        raise SourceError(_reason(e.reason, timeout), reached=False) from None
    except (OSError, http.client.HTTPException) as e:  # during the read, or a connection dropped
        raise SourceError(_reason(e, timeout), reached=False) from None
    if len(body) > max_bytes:
        size = f"{max_bytes / 1048576:g} MiB" if max_bytes >= 1048576 else f"{max_bytes} bytes"
        raise SourceError(f"an answer over {size}")
    try:
        return json.loads(body)
    except ValueError as e:  # JSONDecodeError and UnicodeDecodeError
        raise SourceError(f"not JSON ({str(e)[:_ERROR_DETAIL_CHARS]})") from None


def fetch_view(
    url: str,
    headers: Mapping[str, str],
    context: ssl.SSLContext | None,
    timeout: float,
    use_proxies: bool = True,
    unauthorized_hint: str = "",
    max_bytes: int = MAX_ANSWER_BYTES,
) -> dict[str, object]:
    """One exporter's transactions document (fetch_json's, checked to be one)."""
    try:
        document = fetch_json(url, headers, context, timeout, use_proxies, unauthorized_hint, max_bytes)
    except SourceError as e:
        if str(e).startswith(("not JSON", "an answer over")):
            raise SourceError(f"{e}: not a transactions view") from None
        raise
    if not isinstance(document, dict) or not isinstance(document.get("transactions"), list):
        raise SourceError("JSON without a 'transactions' list: not a transactions view")
    return document


def _reason(reason: object, timeout: float) -> str:
    if isinstance(reason, TimeoutError | socket.timeout):
        return f"no answer within {timeout:g} s"
    if isinstance(reason, ssl.SSLCertVerificationError):
        return f"TLS: {reason.verify_message or reason.reason} (CERTIFICATE_VERIFY_FAILED)"
    if isinstance(reason, ssl.SSLError):
        return f"TLS: {reason.reason or reason}"
    if isinstance(reason, http.client.RemoteDisconnected):
        return "closed the connection without an answer (plain HTTP to a TLS port?)"
    if isinstance(reason, socket.gaierror):
        return f"unknown host ({reason.strerror})"
    if isinstance(reason, OSError) and reason.strerror:
        return reason.strerror
    return str(reason) or type(reason).__name__


def gather(
    sources: Sequence[Source],
    fetch: Callable[[Source], Mapping[str, object]],
    deadline_seconds: float | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> list[Answer]:
    """Every source's answer, in the order given, asked in parallel (at most MAX_PARALLEL at once);
    never raises: a failure, whatever it is, is that source's one-line error. With a deadline, a
    source that has not answered by then is reported so, and its thread left to finish alone."""
    if not sources:
        return []

    def ask(source: Source) -> Answer:
        start = clock()
        try:
            document, error = fetch(source), None
        except SourceError as e:
            document, error = None, str(e)
        except Exception as e:  # an exporter's failure is a line, never a traceback
            document, error = None, f"{type(e).__name__}: {e}"[:_ERROR_DETAIL_CHARS]
        return Answer(source, document, error, round(clock() - start, 3))

    pool = ThreadPoolExecutor(min(MAX_PARALLEL, len(sources)), thread_name_prefix="view-peer")
    try:
        futures = [pool.submit(ask, source) for source in sources]
        wait(futures, timeout=deadline_seconds)
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
    return [
        f.result()
        if f.done() and not f.cancelled()
        else Answer(s, None, f"no answer within {deadline_seconds:g} s", deadline_seconds or 0.0)
        for s, f in zip(sources, futures)
    ]


# -- an exporter's configured peers (--peer), asked for the page's scope=cluster ----------------------

PEER_MAX_ANSWER_BYTES = 8 * 1024 * 1024
CACHE_SECONDS = 2.0
STALE_SECONDS = 30.0
_CACHE_ENTRIES = 32


class Peers:
    """The other exporters this one was configured with (`--peer`), asked for their views behind
    `/transactions?scope=cluster`. Only these URLs are ever fetched: a client chooses the filters,
    which reach the peers re-encoded from the parsed query, never a URL. All are asked at once, for
    at most the timeout; the answers are kept `CACHE_SECONDS` per (filters, credentials), so a page
    refreshed by many people costs each peer one request per period. One gathering runs at a time:
    a request meanwhile gets the last answers to its filters if they are at most `STALE_SECONDS`
    old, else PeersBusy (a 503 to retry), so requests never pile up waiting on the peers (the HTTP
    server's threads are few). The visitor's own basic auth header is passed on (the same users on
    every exporter), to https peers only unless this exporter itself serves plain HTTP (so it never
    travels in clear when it came encrypted)."""

    def __init__(
        self,
        urls: Sequence[str],
        path: str,
        timeout: float,
        context: ssl.SSLContext | None,
        plain_http_listener: Callable[[], bool],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._bases = [url.rstrip("/") for url in urls]
        self._path = path
        self._timeout = timeout
        self._context = context
        self._plain_http_listener = plain_http_listener
        self._clock = clock
        self._lock = threading.Lock()
        self._gathering = False
        self._cache: dict[tuple[str, str], tuple[float, list[Answer]]] = {}  # key -> (when, answers)

    def __len__(self) -> int:
        return len(self._bases)

    def answers(self, parameters: str, authorization: str | None) -> list[Answer]:
        """Each peer's answer to `parameters` (a query string built by exporter.view.query.Query);
        PeersBusy while another request gathers them and nothing recent is kept."""
        key = (parameters, hashlib.sha256((authorization or "").encode()).hexdigest())
        with self._lock:
            cached = self._cache.get(key)
            age = self._clock() - cached[0] if cached is not None else None
            if cached is not None and age is not None and age < CACHE_SECONDS:
                return cached[1]
            if self._gathering:
                if cached is not None and age is not None and age < STALE_SECONDS:
                    return cached[1]
                raise PeersBusy("the peers are being asked for another request; retry in a second")
            self._gathering = True
        answers: list[Answer] = []
        try:
            sources = [
                Source(name_of(base), f"{base}{self._path}?{parameters}", self._headers(base, authorization))
                for base in self._bases
            ]
            answers = gather(sources, self._fetch, deadline_seconds=self._timeout + 0.5)
            return answers
        finally:
            with self._lock:
                self._gathering = False
                if answers:
                    if len(self._cache) >= _CACHE_ENTRIES:
                        self._cache.clear()
                    self._cache[key] = (self._clock(), answers)

    def _headers(self, base: str, authorization: str | None) -> dict[str, str]:
        if authorization and (base.startswith("https:") or self._plain_http_listener()):
            return {"Authorization": authorization}
        return {}

    def _fetch(self, source: Source) -> dict[str, object]:
        context = self._context if source.url.startswith("https:") else None
        return fetch_view(
            source.url, source.headers, context, self._timeout, use_proxies=False, max_bytes=PEER_MAX_ANSWER_BYTES
        )

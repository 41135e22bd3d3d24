"""One view for the cluster: several exporters' transactions views, fetched in parallel and merged.

With one exporter beside each broker, each follows the `__transaction_state` partitions its broker
leads, so the cluster's in-flight transactions are the union of their views. `fetch_view` asks one
exporter for its JSON document (a failure is a SourceError with one line: refused, timed out, TLS,
401, another 4xx/5xx, a redirect, not JSON, not a view, too large); `gather` asks several in
parallel and never raises; `merge` makes one document of the answers, shaped like one exporter's
(so the terminal table and the page render it; they escape what it holds: an exporter's error text
is whatever it sent) plus:

- each row (in-flight and hanging) carries every field its exporter sent, untouched, and
  `"exporter": {"name", "broker_id"}`: which exporter reported it and that exporter's broker id
  (from the exporter's top-level `broker`; null when unknown, e.g. with --all-partitions);
- `"sources"`: one entry per exporter asked, `{"name", "url", "ok", "error", "broker",
  "in_flight_matching", "hanging_scan", "seconds"}` (an exporter that did not answer has `ok`
  false and its one-line `error`), plus what the caller added (Prometheus's view of the target);
- `"duplicates"`: rows dropped because two exporters reported the same transaction.

Rows are ordered as each exporter orders its own (by when the transaction entered its state, then
transactional id, then coordinator partition), so the oldest `limit` of the union are among the
oldest `limit` of each exporter: asking each for `limit` rows is enough. While a `__transaction_state`
partition moves to another broker, the exporters beside the old and the new leader may both list
its transactions for a moment: a transactional id has one current transaction, so a row is kept
once per transactional id, the newer one (higher producer id, then epoch, then PREPARE_* over
ONGOING, then the later state change, then more partitions). Hanging rows (a data partition's scan
finding) are kept once per (topic, partition, producer id, epoch, start offset).
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
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import IO, Any

# A view of 1,000 rows with their partitions is a few MB; anything much larger is not one.
MAX_ANSWER_BYTES = 32 * 1024 * 1024
MAX_PARALLEL = 16  # exporters asked at once
_ERROR_DETAIL_CHARS = 200
_PREPARES = ("PREPARE_COMMIT", "PREPARE_ABORT")


class SourceError(Exception):
    """An exporter's view could not be had: one line, without the URL; `reached`: False when no
    HTTP answer came at all (refused, timed out, TLS, a dropped connection)."""

    def __init__(self, message: str, reached: bool = True) -> None:
        super().__init__(message)
        self.reached = reached


@dataclass(frozen=True)
class Source:
    """One exporter to ask: `url` its view's URL with the query; `name` how rows and lines name it."""

    name: str
    url: str
    headers: Mapping[str, str] = field(default_factory=dict)  # e.g. Authorization
    extra: Mapping[str, object] = field(default_factory=dict)  # added to its `sources` entry as is


@dataclass(frozen=True)
class Answer:
    source: Source
    document: dict[str, Any] | None  # None: `error` says why
    error: str | None
    seconds: float


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
) -> dict[str, Any]:
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
    fetch: Callable[[Source], dict[str, Any]],
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


def _order(row: Mapping[str, Any]) -> tuple[Any, ...]:
    # Each exporter's own order (exporter.model.reading.select_in_flight).
    return (row.get("state_entered_ms", 0), str(row.get("transactional_id", "")), row.get("coordinator_partition", 0))


def _recency(row: Mapping[str, Any]) -> tuple[Any, ...]:
    partitions = row.get("partitions")
    return (
        row.get("producer_id", -1),
        row.get("producer_epoch", -1),
        row.get("state") in _PREPARES,
        row.get("state_entered_ms", 0),
        len(partitions) if isinstance(partitions, list) else 0,
    )


def _hanging_key(row: Mapping[str, Any]) -> tuple[Any, ...]:
    return tuple(str(row.get(k)) for k in ("topic", "partition", "producer_id", "epoch", "start_offset"))


def _broker_id(document: Mapping[str, Any]) -> int | None:
    broker = document.get("broker")
    value = broker.get("id") if isinstance(broker, Mapping) else None
    return value if isinstance(value, int) else None


def merge(answers: Sequence[Answer], limit: int, query: Mapping[str, object] | None = None) -> dict[str, object]:
    """One document of the answers (see the module's doc); `query` is used when none answered."""
    answered = [a.document for a in answers if a.document is not None]
    transactions: dict[str, dict[str, Any]] = {}
    hanging: dict[tuple[Any, ...], dict[str, Any]] = {}
    duplicates = hanging_duplicates = 0
    for answer in answers:
        document = answer.document
        if document is None:
            continue
        exporter = {"name": answer.source.name, "broker_id": _broker_id(document)}
        for row in _rows(document.get("transactions")):
            tid = str(row.get("transactional_id"))
            kept = transactions.get(tid)
            if kept is not None:
                duplicates += 1
                if _recency(row) <= _recency(kept):
                    continue
            transactions[tid] = {**row, "exporter": exporter}
        for row in _rows(document.get("hanging")):
            key = _hanging_key(row)
            if key in hanging:
                hanging_duplicates += 1
            else:
                hanging[key] = {**row, "exporter": exporter}
    first = answered[0] if answered else {}
    return {
        "now_ms": max((_int(d, "now_ms") for d in answered), default=int(time.time() * 1000)),
        "query": first.get("query", dict(query or {})),
        "late_padding_seconds": first.get("late_padding_seconds", 0),
        "broker_log": bool(answered) and all(d.get("broker_log") for d in answered),
        # Each exporter's count, less the transactions two of them listed (counted once).
        "in_flight_matching": sum(_int(d, "in_flight_matching") for d in answered) - duplicates,
        "transactions": sorted(transactions.values(), key=_order)[:limit],
        "hanging_scan": any(d.get("hanging_scan") for d in answered),
        # The oldest of the exporters' last scans: every one has scanned since (None: none says when).
        "hanging_scan_ms": min(
            (d["hanging_scan_ms"] for d in answered if isinstance(d.get("hanging_scan_ms"), int)), default=None
        ),
        "hanging_matching": sum(_int(d, "hanging_matching") for d in answered) - hanging_duplicates,
        "hanging": sorted(hanging.values(), key=lambda r: (r.get("last_timestamp_ms", 0), _hanging_key(r)))[:limit],
        "sources": [_source_entry(a) for a in answers],
        "duplicates": duplicates + hanging_duplicates,
    }


def _rows(value: object) -> Iterable[dict[str, Any]]:
    return (row for row in value if isinstance(row, dict)) if isinstance(value, list) else ()


def _int(document: Mapping[str, Any] | None, key: str) -> int:
    value = (document or {}).get(key)
    return value if isinstance(value, int) else 0


def _source_entry(answer: Answer) -> dict[str, object]:
    document = answer.document
    entry: dict[str, object] = {
        "name": answer.source.name,
        "url": answer.source.url.partition("?")[0],
        "ok": document is not None,
        "error": answer.error,
        "broker": document.get("broker") if document is not None else None,
        "in_flight_matching": document.get("in_flight_matching") if document is not None else None,
        "hanging_scan": document.get("hanging_scan") if document is not None else None,
        "hanging_scan_ms": document.get("hanging_scan_ms") if document is not None else None,
        "seconds": answer.seconds,
    }
    entry.update(answer.source.extra)
    return entry


# -- the page: an exporter merging its own view with its configured peers' -------------------------

PEER_MAX_ANSWER_BYTES = 8 * 1024 * 1024
CACHE_SECONDS = 2.0
STALE_SECONDS = 30.0
_CACHE_ENTRIES = 32


class PeersBusy(Exception):
    """Another request is gathering the peers' views and none recent enough is kept for this one."""


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

    def _fetch(self, source: Source) -> dict[str, Any]:
        context = self._context if source.url.startswith("https:") else None
        return fetch_view(
            source.url, source.headers, context, self._timeout, use_proxies=False, max_bytes=PEER_MAX_ANSWER_BYTES
        )


# -- how the table and the page name a row's broker and an exporter --------------------------------


def is_merged(document: Mapping[str, Any]) -> bool:
    return isinstance(document.get("sources"), list)


def broker_of(row: Mapping[str, Any]) -> str:
    """A merged row's broker: the coordinator broker if the row names it, else its exporter's broker
    id, else its exporter's name."""
    coordinator = row.get("coordinator_broker")
    if isinstance(coordinator, int):
        return str(coordinator)
    exporter = row.get("exporter")
    if not isinstance(exporter, Mapping):
        return "?"
    broker_id = exporter.get("broker_id")
    return str(broker_id) if isinstance(broker_id, int) else str(exporter.get("name", "?"))


def describe_source(source: Mapping[str, Any]) -> str:
    """An exporter in one phrase: 'broker 1 (host:port)', or its name alone when its broker is unknown."""
    broker = source.get("broker")
    broker_id = broker.get("id") if isinstance(broker, Mapping) else None
    name = str(source.get("name", "?"))
    return f"broker {broker_id} ({name})" if isinstance(broker_id, int) else name


def source_lines(document: Mapping[str, Any]) -> list[str]:
    """What a merged document says of its exporters: how many answered, then one line per exporter
    that did not (with why), then those without a hanging scan yet. Plain text, not yet escaped."""
    sources = [s for s in document.get("sources", []) if isinstance(s, Mapping)]
    failed = [s for s in sources if not s.get("ok")]
    lines = [f"{len(sources) - len(failed)} of {len(sources)} exporters answered."]
    for s in failed:
        line = f"NOT ANSWERING: {s.get('name', '?')} ({s.get('url', '?')}): {s.get('error')}"
        target = s.get("prometheus")
        if isinstance(target, Mapping) and target.get("health") not in (None, "up"):
            line += f" (Prometheus: {target.get('health')}, {target.get('last_error') or 'no error given'})"
        lines.append(line)
    answered = [s for s in sources if s.get("ok")]
    no_scan = [describe_source(s) for s in answered if not s.get("hanging_scan")]
    if answered and len(no_scan) == len(answered):
        lines.append("No hanging-transaction scan has completed on these exporters.")
    elif no_scan:
        lines.append(f"No hanging-transaction scan has completed yet on: {', '.join(no_scan)}.")
    return lines

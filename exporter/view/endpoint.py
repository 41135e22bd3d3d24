"""The `/transactions` route of the exporter's HTTP server: HTML to browsers, JSON otherwise."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from http import HTTPStatus

from exporter.model import CoordinatorModel
from exporter.view import page
from exporter.view.query import QueryError, document, parse_query

PATH = "/transactions"
Response = tuple[int, dict[str, str], bytes]


class TransactionsEndpoint:
    def __init__(
        self,
        model: CoordinatorModel,
        late_padding_seconds: float,
        bootstrap_servers: str,
        broker_log: bool,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._model = model
        self._padding_ms = int(late_padding_seconds * 1000)
        self._bootstrap_servers = bootstrap_servers
        self._broker_log = broker_log
        self._clock = clock

    def __call__(self, query_string: str, accept: str) -> Response:
        try:
            query = parse_query(query_string)
        except QueryError as e:
            return HTTPStatus.BAD_REQUEST, {"Content-Type": "text/plain; charset=utf-8"}, f"{e}\n".encode()
        doc = document(
            self._model, query, int(self._clock() * 1000), self._padding_ms, self._bootstrap_servers, self._broker_log
        )
        headers = {"Cache-Control": "no-store", "X-Content-Type-Options": "nosniff"}
        if query.format == "html" or (query.format is None and "text/html" in accept):
            headers["Content-Type"] = "text/html; charset=utf-8"
            headers["Content-Security-Policy"] = page.CONTENT_SECURITY_POLICY
            return HTTPStatus.OK, headers, page.render(doc, query).encode()
        headers["Content-Type"] = "application/json"
        return HTTPStatus.OK, headers, json.dumps(doc).encode() + b"\n"

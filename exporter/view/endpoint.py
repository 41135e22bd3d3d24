"""The `/transactions` route of the exporter's HTTP server: HTML to browsers, JSON otherwise."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from http import HTTPStatus

from exporter.contracts.cluster import EMPTY_SNAPSHOT, ClusterSnapshot
from exporter.model import CoordinatorModel
from exporter.view import diagnosis, page
from exporter.view.query import QueryError, document, parse_query

PATH = "/transactions"
Response = tuple[int, dict[str, str], bytes]
# Looks up the cluster's state of some topics (metadata, min.insync.replicas) and partitions
# (DescribeProducers); bounded in time, never raising (exporter.sources.cluster_state.ClusterStateSource.lookup).
ClusterLookup = Callable[[set[str], list[tuple[str, int]]], ClusterSnapshot]


class TransactionsEndpoint:
    def __init__(
        self,
        model: CoordinatorModel,
        late_padding_seconds: float,
        bootstrap_servers: str,
        broker_log: bool,
        clock: Callable[[], float] = time.time,
        cluster: ClusterLookup | None = None,
        own_broker: Callable[[], int | None] = lambda: None,
    ) -> None:
        """`cluster`: where the diagnosis looks the cluster up (None: it says what the rows show, the
        cluster unknown); `own_broker`: the broker whose partitions the exporter follows (None with
        --all-partitions), the coordinator of its rows when the metadata does not say."""
        self._model = model
        self._cluster = cluster
        self._own_broker = own_broker
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
        # The model's lock is not held here: the lookup waits for Kafka a bounded time at most.
        snapshot = EMPTY_SNAPSHOT
        if doc["transactions"] and self._cluster is not None:
            snapshot = self._cluster(*diagnosis.wanted(doc["transactions"]))
        diagnosis.attach(doc, snapshot, self._bootstrap_servers, self._own_broker())
        headers = {"Cache-Control": "no-store", "X-Content-Type-Options": "nosniff"}
        if query.format == "html" or (query.format is None and "text/html" in accept):
            headers["Content-Type"] = "text/html; charset=utf-8"
            headers["Content-Security-Policy"] = page.CONTENT_SECURITY_POLICY
            return HTTPStatus.OK, headers, page.render(doc, query).encode()
        headers["Content-Type"] = "application/json"
        return HTTPStatus.OK, headers, json.dumps(doc).encode() + b"\n"

"""The `/transactions` route of the exporter's HTTP server: HTML to browsers, JSON otherwise.

`scope=cluster` (beside the view's own filters): this exporter's view merged with its configured
peers' (exporter.sources.peer_exporters.Peers, as exporter.contracts.peers.PeerViews), each row naming its broker, a peer that does not answer a
line; without peers, this exporter's view alone in the merged form.
"""

from __future__ import annotations

import json
import time
import urllib.parse
from collections.abc import Callable
from http import HTTPStatus

from exporter.contracts.bug_facts import BugContext
from exporter.contracts.cluster import EMPTY_SNAPSHOT, ClusterSnapshot, Fact
from exporter.contracts.groups import GroupsLookup, OffsetsPartitionGroups
from exporter.contracts.peers import Answer, PeersBusy, PeerViews, Source
from exporter.model import CoordinatorModel
from exporter.view import cluster, page
from exporter.view.diagnosis import assembly, consumer_groups, known_bugs, selection
from exporter.view.document import Document
from exporter.view.query import Query, QueryError, document, parse_query

PATH = "/transactions"
SCOPES = ("broker", "cluster")
Response = tuple[int, dict[str, str], bytes]
# Looks up the cluster's state of some topics (metadata, min.insync.replicas) and partitions
# (DescribeProducers); bounded in time, never raising (exporter.sources.cluster_state.ClusterStateSource.lookup).
ClusterLookup = Callable[[set[str], list[tuple[str, int]]], ClusterSnapshot]
# What the known-bug check draws on for the brokers given (bounded in time, never raising): their
# versions, the coordinator's log of this exporter's broker.
KnownBugsLookup = Callable[[set[int]], BugContext]


class TransactionsEndpoint:
    def __init__(
        self,
        model: CoordinatorModel,
        late_padding_seconds: float,
        bootstrap_servers: str,
        broker_log: bool,
        clock: Callable[[], float] = time.time,
        broker_id: Callable[[], int | None] = lambda: None,
        peers: PeerViews | None = None,
        name: str = "this exporter",
        url: str = "",
        cluster_state: ClusterLookup | None = None,
        coordinator: Callable[[], int | None] | None = None,
        consumer_groups: GroupsLookup | None = None,
        known_bugs: KnownBugsLookup | None = None,
    ) -> None:
        """`broker_id`: the broker this exporter follows, once known (the topic tail's; also the
        coordinator of its rows when the metadata does not say); `peers`: the other exporters
        scope=cluster asks; `name` and `url`: how a merged view names this one; `cluster_state`: where
        the diagnosis looks the cluster up (None: it says what the rows show, the cluster unknown);
        `coordinator`: the coordinator of every row when the metadata does not say (default `broker_id`;
        None with --all-partitions, whose rows have many coordinators); `consumer_groups`: where the
        rows' `__consumer_offsets-N` partitions' pending groups are looked up (None: not shown);
        `known_bugs`: what the known-bug check of the rows draws on, for the brokers named (their
        versions, the coordinator's log; None: no row is held against the known bugs)."""
        self._model = model
        self._cluster_state = cluster_state
        self._consumer_groups = consumer_groups
        self._known_bugs = known_bugs
        self._coordinator = coordinator or broker_id
        self._padding_ms = int(late_padding_seconds * 1000)
        self._bootstrap_servers = bootstrap_servers
        self._broker_log = broker_log
        self._clock = clock
        self._broker_id = broker_id
        self._peers = peers
        self._name = name
        self._url = url

    def __call__(self, query_string: str, accept: str, authorization: str | None = None) -> Response:
        try:
            query_string, scope = _take_scope(query_string)
            query = parse_query(query_string)
        except QueryError as e:
            return HTTPStatus.BAD_REQUEST, {"Content-Type": "text/plain; charset=utf-8"}, f"{e}\n".encode()
        doc = self.own_view(query)
        if scope == "cluster":
            own = Answer(Source(self._name, self._url), doc, None, 0.0)
            try:
                asked = self._peers.answers(query.parameters(format="json"), authorization) if self._peers else []
            except PeersBusy as e:
                headers = {"Content-Type": "text/plain; charset=utf-8", "Retry-After": "1"}
                return HTTPStatus.SERVICE_UNAVAILABLE, headers, f"{e}\n".encode()
            doc = {**cluster.merge([own, *asked], query.limit), "peers": doc["peers"]}
        headers = {"Cache-Control": "no-store", "X-Content-Type-Options": "nosniff"}
        if query.format == "html" or (query.format is None and "text/html" in accept):
            headers["Content-Type"] = "text/html; charset=utf-8"
            headers["Content-Security-Policy"] = page.CONTENT_SECURITY_POLICY
            return HTTPStatus.OK, headers, page.render(doc, query).encode()
        headers["Content-Type"] = "application/json"
        return HTTPStatus.OK, headers, json.dumps(doc).encode() + b"\n"

    def own_view(self, query: Query) -> Document:
        """This exporter's view of `query`, its rows diagnosed: what the route serves (scope=broker),
        and what the known-bug count reads (exporter.app.known_bugs_loop)."""
        doc = document(
            self._model, query, int(self._clock() * 1000), self._padding_ms, self._bootstrap_servers, self._broker_log
        )
        # The model's lock is not held here: the lookup waits for Kafka a bounded time at most. Each
        # exporter diagnoses its own rows (a merged view shows the diagnoses its peers sent).
        snapshot = EMPTY_SNAPSHOT
        hanging = self._known_bugs is not None and bool(doc["hanging"])  # their leaders' versions are wanted
        if (doc["transactions"] or hanging) and self._cluster_state is not None:
            topics, producers = selection.wanted(doc["transactions"])
            if hanging:
                topics |= {h["topic"] for h in doc["hanging"]}
            snapshot = self._cluster_state(topics, producers)
        # The consumer groups whose offsets the rows shown hold (bounded and cached like the cluster state).
        groups: dict[int, Fact[OffsetsPartitionGroups]] | None = None
        if self._consumer_groups is not None and (offsets := consumer_groups.offsets_partitions(doc["transactions"])):
            groups = dict(self._consumer_groups(offsets))
        coordinator = self._coordinator()
        bugs = None
        if self._known_bugs is not None:
            bugs = self._known_bugs(known_bugs.brokers_named(doc, snapshot, coordinator))
        assembly.attach(doc, snapshot, self._bootstrap_servers, coordinator, groups, bugs)
        # Which exporter answers (a merged view names each row's broker by it): the broker it sits
        # beside (null until discovered, and with --all-partitions) and what it bootstraps from.
        doc["broker"] = {"id": self._broker_id(), "bootstrap_servers": self._bootstrap_servers}
        doc["peers"] = len(self._peers or ())  # scope=cluster asks them too
        return doc


def _take_scope(query_string: str) -> tuple[str, str]:
    """(the query string without `scope`, the scope); QueryError for an unknown scope."""
    if "scope" not in query_string:
        return query_string, SCOPES[0]
    try:
        pairs = urllib.parse.parse_qsl(query_string, keep_blank_values=True, max_num_fields=32)
    except ValueError as e:
        raise QueryError(f"bad query string: {e}") from None
    scopes = [value.strip().lower() for key, value in pairs if key == "scope" and value.strip()]
    for scope in scopes:
        if scope not in SCOPES:
            shown = repr(scope[:40])
            raise QueryError(f"scope: {shown} is neither broker nor cluster")
    rest = urllib.parse.urlencode([(key, value) for key, value in pairs if key != "scope"])
    return rest, scopes[-1] if scopes else SCOPES[0]

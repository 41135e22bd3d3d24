"""What the peer-exporter source hands the transactions view: one exporter to ask (Source) and what
it answered (Answer). Plain values: the source (exporter.sources.peer_exporters) fetches the
documents, the view (exporter.view.cluster) merges them; neither knows the other.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol


@dataclass(frozen=True)
class Source:
    """One exporter to ask: `url` its view's URL with the query; `name` how rows and lines name it."""

    name: str
    url: str
    headers: Mapping[str, str] = field(default_factory=dict)  # e.g. Authorization
    extra: Mapping[str, object] = field(default_factory=dict)  # added to its `sources` entry as is


@dataclass(frozen=True)
class Answer:
    """An exporter's transactions document as it sent it (JSON: untrusted, checked only to hold a
    `transactions` list), or None with `error` (one line) saying why there is none."""

    source: Source
    document: Mapping[str, object] | None
    error: str | None
    seconds: float


class PeersBusy(Exception):
    """Another request is gathering the peers' views and none recent enough is kept for this one."""


class PeerViews(Protocol):
    """The other exporters an exporter asks behind `/transactions?scope=cluster`."""

    def __len__(self) -> int: ...

    def answers(self, parameters: str, authorization: str | None) -> Sequence[Answer]:
        """Each peer's answer to `parameters` (a query string); PeersBusy when they cannot be asked now."""
        ...

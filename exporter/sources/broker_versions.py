"""Each broker's Kafka version, for the known-bug table (exporter.contracts.known_bugs): from its log's
startup line where the exporter reads that log, else from its ApiVersions answer.

- `startup_version(path)`: the last `Kafka version: X` line (AppInfoParser, INFO) of a broker log,
  looked for once, when the exporter starts: backwards through the file it reads, then through its
  rotated files, newest first (its startup may have been rotated away: the coordinator's DEBUG lines
  fill a file in minutes), LOOK_BACK_BYTES at most in all. Later startups come as the log is followed
  (exporter.broker_log's BrokerVersionSeen).
- BrokerVersionsSource: the ApiVersions answer of each broker asked for, held against the pinned
  brokers' (exporter.contracts.api_fingerprints), cached as the view's other lookups
  (exporter.sources.lookups) but for VERSION_CACHE_SECONDS: a version changes only with a restart.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Iterable, Mapping
from concurrent.futures import wait as wait_futures
from pathlib import Path
from typing import Any, Unpack

from exporter.broker_log.lines import parse_entry
from exporter.contracts.api_fingerprints import version_from_api_versions
from exporter.contracts.cluster import Fact
from exporter.contracts.events import BrokerVersionSeen
from exporter.contracts.kafka_versions import BrokerVersion
from exporter.sources.kafka_admin import admin_client
from exporter.sources.kafka_python_adapter import api_versions
from exporter.sources.lookups import CachedEntry, CachedLookups, LookupOptions

# How far back the startup line is looked for, over the followed file and its rotations: a rotated
# log holds 4 x 100 MB (deploy/'s), its startup line anywhere in it.
LOOK_BACK_BYTES = 512 << 20
_CHUNK = 1 << 20
_NEEDLE = b"Kafka version: "
_COMPRESSED = (".gz", ".bz2", ".xz", ".zst", ".zip", ".lz4")
VERSION_CACHE_SECONDS = 600.0


def startup_version(path: str | Path, budget: int = LOOK_BACK_BYTES) -> BrokerVersionSeen | None:
    """The last startup line's version in the log at `path` and its rotated files (see the module
    docstring); None when none holds one, or none can be read."""
    path = Path(path)
    for file in [path, *_rotated_newest_first(path)]:
        try:
            with file.open("rb") as f:
                found, budget = _last_version_line(f.fileno(), budget)
        except OSError:
            continue
        if found is not None:
            return found
        if budget <= 0:
            break
    return None


def _rotated_newest_first(path: Path) -> list[Path]:
    """The files beside `path` whose names extend its own (its rotations), newest first."""
    found: list[tuple[int, str, Path]] = []
    try:
        entries = os.scandir(path.parent)
    except OSError:
        return []
    with entries:
        for entry in entries:
            name = entry.name
            if len(name) > len(path.name) and name.startswith(path.name) and not name.endswith(_COMPRESSED):
                try:
                    if entry.is_file():
                        found.append((entry.stat().st_mtime_ns, name, Path(entry.path)))
                except OSError:
                    continue
    return [p for _, _, p in sorted(found, reverse=True)]


def _last_version_line(fd: int, budget: int) -> tuple[BrokerVersionSeen | None, int]:
    """(the last startup line's version in the file, the budget left), reading it backwards a chunk at
    a time; a chunk's first line, cut, is completed by the chunk before it."""
    end = os.fstat(fd).st_size
    carry = b""  # the head of the later chunk, up to its first newline: the end of a line begun earlier
    while end > 0 and budget > 0:
        start = max(0, end - _CHUNK)
        block = os.pread(fd, end - start, start) + carry
        budget -= end - start
        lines = block.split(b"\n")
        carry = lines.pop(0) if start > 0 else b""
        if len(carry) > _CHUNK:  # a line longer than a chunk is no startup line
            carry = b""
        if _NEEDLE in block:
            for line in reversed(lines):
                if _NEEDLE in line:
                    parsed = parse_entry(line.decode("utf-8", "replace").rstrip("\r"))
                    if type(parsed) is BrokerVersionSeen:
                        return parsed, budget
        end = start
    return None, budget


class BrokerVersionsSource(CachedLookups):
    """Brokers' versions from their ApiVersions answers (see the module docstring); thread-safe."""

    what = "broker versions"

    def __init__(
        self,
        bootstrap_servers: str,
        kafka_settings: Mapping[str, str] | None = None,
        *,
        admin: Any = None,
        **options: Unpack[LookupOptions],
    ) -> None:
        options.setdefault("cache_seconds", VERSION_CACHE_SECONDS)
        super().__init__(bootstrap_servers, kafka_settings, admin=admin, **options)
        self._versions: dict[int, CachedEntry] = {}

    def _caches(self) -> tuple[dict[Any, CachedEntry], ...]:
        return (self._versions,)

    def _kafka_python_admin(self) -> Any:
        timeout_ms = int(self.request_timeout_seconds * 1000)
        return admin_client(
            self._bootstrap_servers,
            self._kafka_settings,
            client_id="txn-exporter-broker-versions",
            request_timeout_ms=timeout_ms,
            own_broker=self._own_broker,
            bootstrap_timeout_ms=timeout_ms,
        )

    def lookup(self, broker_ids: Iterable[int]) -> dict[int, Fact[BrokerVersion]]:
        """The versions of `broker_ids`; waits at most wait_seconds for those not cached; never raises
        for Kafka's sake (a broker that does not answer: its Fact says why)."""
        ids = sorted(set(broker_ids))
        now = self._monotonic()
        with self._lock:
            self._forget(now)
            for broker in ids:
                entry = self._versions.setdefault(broker, CachedEntry())
                entry.asked = now
                if self._due(entry, now):
                    self._watch(entry, self._submit(functools.partial(self._ask, broker)))
            waiting = self._first_looks([self._versions[b] for b in ids])
        if waiting:
            wait_futures(waiting, timeout=self.wait_seconds)
        with self._lock:
            return {b: self._fact(self._versions[b]) for b in ids}

    def _ask(self, broker: int) -> BrokerVersion:
        admin = self._client()
        return version_from_api_versions(api_versions(admin, broker, int(self.request_timeout_seconds * 1000)))

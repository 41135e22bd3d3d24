"""A broker's Kafka version from its ApiVersions answer, held against the pinned brokers' answers
(exporter.contracts.api_versions_table, an answer a line); pure.

    version_from_api_versions({0: (0, 13), 1: (4, 18), ...}) -> BrokerVersion   # e.g. 3.9.x, 4.3.x-4.4.x

The fingerprint is the answer's (min, max) of each API every pinned broker answers, in either mode
(a ZooKeeper-mode broker adds the controller's APIs, and a broker's settings may add or remove a
few; those count for nothing here). An answer is the version of every pinned release whose
fingerprint it equals; the patch is never known (a release's patches are taken to answer alike: an
API's versions change with a minor), so the version is its minors' range, `3.9.x`, or `4.3.x-4.4.x`
where neighbouring minors answer alike. It is unknown where it equals none (a release not pinned, a
vendor's build, `unstable.api.versions.enable`), or where the minors alike are not neighbours.
"""

from __future__ import annotations

from collections.abc import Mapping

from exporter.contracts.api_versions_table import ANSWERS
from exporter.contracts.kafka_versions import ANY_PATCH, API_VERSIONS, BrokerVersion, between, parse_release, unknown

Answer = Mapping[int, tuple[int, int]]
Fingerprint = tuple[tuple[int, int, int], ...]  # (API key, min, max) of each common key


def parse_answer(text: str) -> dict[int, tuple[int, int]]:
    """An answer as the table writes it, `0:0-13 1:4-18 ...` (API key:min-max), as a dict."""
    answer = {}
    for item in text.split():
        key, _, versions = item.partition(":")
        low, _, high = versions.partition("-")
        answer[int(key)] = (int(low), int(high))
    return answer


def answer_text(answer: Answer) -> str:
    """The table's text of an answer (parse_answer's inverse), by API key."""
    return " ".join(f"{key}:{low}-{high}" for key, (low, high) in sorted(answer.items()))


ANSWER_OF: dict[str, dict[str, dict[int, tuple[int, int]]]] = {
    version: {mode: parse_answer(text) for mode, text in modes.items()} for version, modes in ANSWERS.items()
}


def _common_keys() -> tuple[int, ...]:
    keys: set[int] | None = None
    for modes in ANSWER_OF.values():
        for answer in modes.values():
            keys = set(answer) if keys is None else keys & set(answer)
    return tuple(sorted(keys or ()))


COMMON_KEYS = _common_keys()


def fingerprint(answer: Answer) -> Fingerprint | None:
    """The answer's versions of the common APIs; None when it lacks one."""
    if not all(key in answer for key in COMMON_KEYS):
        return None
    return tuple((key, *answer[key]) for key in COMMON_KEYS)


def _minors() -> list[tuple[tuple[int, int], set[Fingerprint]]]:
    """Each pinned minor, oldest first, with its brokers' fingerprints (one a mode)."""
    minors = []
    for version, modes in ANSWER_OF.items():
        release = parse_release(version)
        if release is None:
            raise ValueError(f"api_versions_table: {version!r} is not a release")
        minors.append((release[:2], {fp for fp in map(fingerprint, modes.values()) if fp is not None}))
    return sorted(minors, key=lambda minor: minor[0])


_MINORS = _minors()


def version_from_api_versions(answer: Answer) -> BrokerVersion:
    """The range of pinned minors whose brokers answer as `answer` does (see the module docstring)."""
    found = fingerprint(answer)
    alike = [i for i, (_, fingerprints) in enumerate(_MINORS) if found in fingerprints]
    if not alike:
        return unknown("unknown: its ApiVersions answer is no pinned Kafka version's", API_VERSIONS)
    if alike != list(range(alike[0], alike[-1] + 1)):
        minors = ", ".join(f"{_MINORS[i][0][0]}.{_MINORS[i][0][1]}.x" for i in alike)
        return unknown(f"unknown: its ApiVersions answer is that of {minors}, not neighbours", API_VERSIONS)
    (low_major, low_minor), (high_major, high_minor) = _MINORS[alike[0]][0], _MINORS[alike[-1]][0]
    return between((low_major, low_minor, 0), (high_major, high_minor, ANY_PATCH), API_VERSIONS)

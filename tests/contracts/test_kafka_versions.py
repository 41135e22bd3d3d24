"""Kafka versions as learned (the log's startup line, ApiVersions ranges) and the table's ranges."""

from __future__ import annotations

import pytest

from exporter.contracts.kafka_versions import (
    ANY_PATCH,
    API_VERSIONS,
    LOG,
    NOT,
    PARTLY,
    WHOLLY,
    BrokerVersion,
    Interval,
    between,
    coverage,
    from_log,
    parse_range,
    parse_release,
)


def test_a_release_from_the_log_is_exact() -> None:
    version = from_log("3.7.1")
    assert (version.text, version.source, version.low, version.high) == ("3.7.1", LOG, (3, 7, 1), (3, 7, 1))
    assert version.known and version.exact


@pytest.mark.parametrize("text", ["7.7.1-ccs", "3.9.0-SNAPSHOT", "3.9", "v3.9.0", "3.09.1", "", "\u0663.\u0667.\u0661"])
def test_what_is_not_an_apache_release_reads_as_unknown_and_is_shown_raw(text: str) -> None:
    version = from_log(text)
    assert not version.known and not version.exact
    assert version.text == (text or "unknown")


def test_an_unknown_version_string_is_cut() -> None:
    assert len(from_log("x" * 10_000).text) == 64


def test_ranges_from_api_versions_read_as_x() -> None:
    assert between((3, 9, 0), (3, 9, ANY_PATCH), API_VERSIONS).text == "3.9.x"
    assert between((4, 3, 0), (4, 4, ANY_PATCH), API_VERSIONS).text == "4.3.x-4.4.x"
    assert between((4, 4, 0), (4, 4, 0), API_VERSIONS).exact


@pytest.mark.parametrize(
    ("text", "interval"),
    [
        ("<3.8.0", Interval(None, (3, 8, 0))),
        (">=4.0.0,<4.3.0", Interval((4, 0, 0), (4, 3, 0))),
        (" >=4.0.0 , <4.3.0 ", Interval((4, 0, 0), (4, 3, 0))),
        (">=4.4.0", Interval((4, 4, 0), None)),
    ],
)
def test_a_range_parses(text: str, interval: Interval) -> None:
    assert parse_range(text) == interval


@pytest.mark.parametrize(
    "text",
    ["3.7.x", "<=3.8.0", "<3.8", ">=4.3.0,<4.0.0", ">=4.0.0,<4.0.0", "<3.8.0,<3.9.0", "", ">=a.b.c", "<3.8.0;"],
)
def test_a_malformed_range_is_refused_by_name(text: str) -> None:
    with pytest.raises(ValueError, match="version range"):
        parse_range(text)


def test_parse_release_takes_three_plain_numbers_only() -> None:
    assert parse_release("4.0.0") == (4, 0, 0)
    assert parse_release("4.0") is None
    assert parse_release("04.0.0") is None


def version(low: tuple[int, int, int], high: tuple[int, int, int]) -> BrokerVersion:
    return between(low, high, API_VERSIONS)


def test_coverage_wholly_partly_or_not() -> None:
    before_392 = [parse_range("<3.9.2")]
    assert coverage(from_log("3.9.1"), before_392) == WHOLLY
    assert coverage(from_log("3.9.2"), before_392) == NOT
    assert coverage(version((3, 9, 0), (3, 9, ANY_PATCH)), before_392) == PARTLY
    assert coverage(version((3, 7, 0), (3, 7, ANY_PATCH)), before_392) == WHOLLY
    assert coverage(version((4, 0, 0), (4, 0, ANY_PATCH)), before_392) == NOT
    two = [parse_range("<3.9.2"), parse_range(">=4.0.0,<4.0.2")]
    assert coverage(from_log("4.0.1"), two) == WHOLLY
    assert coverage(version((3, 9, 0), (4, 0, ANY_PATCH)), two) == PARTLY
    assert coverage(from_log("7.7.1-ccs"), two) == NOT  # unknown: the caller says so

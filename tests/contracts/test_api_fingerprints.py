"""A broker's version from its ApiVersions answer, held against the pinned brokers' recorded answers
(tests/integration/broker_truth.py holds the table to every pinned broker)."""

from __future__ import annotations

import pytest

from exporter.contracts.api_fingerprints import ANSWER_OF as ANSWERS
from exporter.contracts.api_fingerprints import COMMON_KEYS, answer_text, parse_answer, version_from_api_versions
from exporter.contracts.kafka_versions import API_VERSIONS, parse_release
from txn_workshop.harness.versions import KAFKA_VERSIONS, kafka_version


def test_the_table_holds_every_pinned_version_in_each_of_its_modes() -> None:
    assert set(ANSWERS) == set(KAFKA_VERSIONS)
    for version, modes in ANSWERS.items():
        assert set(modes) == ({"kraft", "zookeeper"} if kafka_version(version).zookeeper_mode else {"kraft"})


@pytest.mark.parametrize(("version", "mode"), [(v, m) for v, modes in ANSWERS.items() for m in modes])
def test_each_recorded_answer_gives_its_own_minor(version: str, mode: str) -> None:
    found = version_from_api_versions(ANSWERS[version][mode])
    release = parse_release(version)
    assert found.source == API_VERSIONS and found.known and release is not None
    assert found.low == (*release[:2], 0) and found.text == f"{release[0]}.{release[1]}.x"


def test_an_answer_missing_a_common_api_is_unknown() -> None:
    answer = dict(ANSWERS["4.4.0"]["kraft"])
    del answer[COMMON_KEYS[0]]
    found = version_from_api_versions(answer)
    assert not found.known and "no pinned Kafka version's" in found.text


def test_an_answer_of_a_version_not_pinned_is_unknown() -> None:
    answer = dict(ANSWERS["4.4.0"]["kraft"])
    answer[0] = (answer[0][0], answer[0][1] + 1)  # a newer Produce, as a later Kafka's
    assert not version_from_api_versions(answer).known


def test_apis_beside_the_common_ones_count_for_nothing() -> None:
    answer = {**ANSWERS["3.9.2"]["kraft"], 9999: (0, 1)}
    assert version_from_api_versions(answer).text == "3.9.x"


def test_the_tables_text_reads_back_as_it_was_written() -> None:
    for modes in ANSWERS.values():
        for answer in modes.values():
            assert parse_answer(answer_text(answer)) == answer

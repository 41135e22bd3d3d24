"""The transactions page fits its window: at 1280 px (a laptop) and 375 px (a phone) the document
does not scroll sideways with the demo's stuck rows on it (long Kafka error names, partitions, the
diagnosis's why and commands), as Debian's chromium lays it out. The demo's own page, taken during
a hold, is measured the same way in tests/workshop/test_demo.py."""

from __future__ import annotations

import pytest

from exporter.contracts.bug_facts import BugContext, CoordinatorLog
from exporter.contracts.cluster import (
    TOPIC,
    Brokers,
    ClusterSnapshot,
    Fact,
    MinInsyncReplicas,
    PartitionMetadata,
    TopicMetadata,
)
from exporter.contracts.events import MarkerWriteRetried
from exporter.contracts.kafka_versions import from_log
from tests.model.builders import S, log_event
from tests.view import chromium
from tests.view.test_endpoint_diagnosis import NOW, Lookup, call, endpoint, model_with

WIDTHS = (1280, 375)


def demo_like_page(query: str = "format=html") -> str:
    """The demo's hold as the page shows it: a held commit and a timed-out producer's abort, both
    stuck, their markers refused by orders-0 with Kafka's longest error names, retried thousands of times."""
    model = model_with(
        log_event("demo-held", S.ONGOING, offset=1, timestamp_ms=NOW - 90_500),
        log_event("demo-held", S.PREPARE_COMMIT, offset=2, timestamp_ms=NOW - 90_000),
        log_event("demo-held-timeout-with-a-longer-transactional-id", S.ONGOING, offset=3, timestamp_ms=NOW - 80_500),
        log_event(
            "demo-held-timeout-with-a-longer-transactional-id", S.PREPARE_ABORT, offset=4, timestamp_ms=NOW - 80_000
        ),
    )
    for tid in ("demo-held", "demo-held-timeout-with-a-longer-transactional-id"):
        for error in ("NOT_ENOUGH_REPLICAS", "NOT_ENOUGH_REPLICAS_AFTER_APPEND"):
            for _ in range(3):
                model.apply(MarkerWriteRetried(error, tid, "orders-0", NOW - 100))
    _, page = call(endpoint(model, Lookup(), broker_id=lambda: 1), query)
    assert page.count('data-label="Diagnosis"') == 2 and "NOT_ENOUGH_REPLICAS_AFTER_APPEND" in page
    return page


@pytest.mark.parametrize("query", ["format=html", "scope=cluster&format=html"], ids=["own", "cluster"])
@pytest.mark.parametrize("width", WIDTHS)
def test_the_page_with_stuck_rows_does_not_scroll_sideways(width, query, tmp_path):
    """The exporter's own view, and the cluster's (a broker column more)."""
    scroll, client = chromium.widths(demo_like_page(query), width, tmp_path)
    assert client <= width and client > width * 0.8, (scroll, client)
    assert scroll <= client, f"the page is {scroll} px wide in a {client} px window"


def healthy_lookup(topics: set[str], producers: list[tuple[str, int]]) -> ClusterSnapshot:
    """Every partition led by broker 1, its ISR whole: nothing ordinary explains a stuck row."""
    metadata = {
        "orders": TopicMetadata({0: PartitionMetadata(1, (1, 2), (1, 2)), 1: PartitionMetadata(1, (1, 2), (1, 2))}),
        "__transaction_state": TopicMetadata({0: PartitionMetadata(1, (1,), (1,))}),
    }
    return ClusterSnapshot(
        Fact(Brokers(frozenset({1, 2}), frozenset()), NOW),
        {t: Fact(metadata[t], NOW) for t in topics},
        {t: Fact(MinInsyncReplicas(1 if t == "__transaction_state" else 2, TOPIC), NOW) for t in topics},
        {},
    )


def known_bug_page() -> str:
    """A commit held in PREPARE_COMMIT since its coordinator (broker 1, Kafka 3.7.1 by its log) loaded
    its partition again: KAFKA-16352, its line, link and workaround in the diagnosis."""
    model = model_with(
        log_event("orders-writer-after-a-coordinator-reload", S.ONGOING, offset=1, timestamp_ms=NOW - 90_500),
        log_event("orders-writer-after-a-coordinator-reload", S.PREPARE_COMMIT, offset=2, timestamp_ms=NOW - 90_000),
    )
    context = BugContext({1: from_log("3.7.1")}, {0: CoordinatorLog(last_load_ms=NOW - 30_000)}, 1)
    _, page = call(endpoint(model, healthy_lookup, broker_id=lambda: 1, known_bugs=lambda ids: context), "format=html")
    assert "Matches KAFKA-16352 (Kafka 3.7.1; fixed in 3.8.0)" in page
    return page


@pytest.mark.parametrize("width", WIDTHS)
def test_a_known_bug_on_the_page_links_its_jira_and_does_not_scroll_sideways(width, tmp_path):
    page = known_bug_page()
    scroll, client = chromium.widths(page, width, tmp_path)
    assert scroll <= client, f"the page is {scroll} px wide in a {client} px window"
    saved = tmp_path / "known-bug.html"
    saved.write_text(page)
    dom = chromium.dump_dom(saved.as_uri())
    assert '<a href="https://issues.apache.org/jira/browse/KAFKA-16352">KAFKA-16352</a>' in dom
    assert "Why:</b> Matches KAFKA-16352" in dom and "Workaround: make __transaction_state-0 load once more" in dom

"""The transactions page fits its window: at 1280 px (a laptop) and 375 px (a phone) the document
does not scroll sideways with the demo's stuck rows on it (long Kafka error names, partitions, the
diagnosis's why and commands), as Debian's chromium lays it out. The demo's own page, taken during
a hold, is measured the same way in tests/workshop/test_demo.py."""

from __future__ import annotations

import pytest

from exporter.contracts.events import MarkerWriteRetried
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

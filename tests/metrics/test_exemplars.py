"""Exemplars: each bucket's slowest recent observation (LatencyRecorder), rendered in OpenMetrics
only, labels within OpenMetrics' 128 characters, parsed back by prometheus_client's parser."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import generate_latest
from prometheus_client.openmetrics.exposition import generate_latest as generate_openmetrics
from prometheus_client.openmetrics.parser import text_string_to_metric_families as parse_openmetrics
from prometheus_client.registry import Collector

from exporter.contracts.events import PartitionAssigned, PartitionReplayed
from exporter.metrics import LatencyRecorders, TransactionCollector
from exporter.metrics.catalogue import DURATION_BUCKETS, QUANTILES
from exporter.metrics.hdr_layout import HIGHEST_TRACKABLE_MS, HdrLayout
from exporter.metrics.latency import LatencyRecorder, Observation
from exporter.metrics.prometheus import EXEMPLAR_LABELS_MAX, REPLACED, TRUNCATED, exemplar, fit
from exporter.model import CoordinatorModel
from tests.metrics.test_prometheus import NOW_MS, feed
from tests.model.builders import S, log_event

LAYOUT = HdrLayout(DURATION_BUCKETS)
WINDOW_MS, SLICES = 300_000, 5
SLICE_MS = WINDOW_MS // SLICES
BUCKET_5_10MS = LAYOUT.bucket_index(6)  # (5 ms, 10 ms]


def recorder(now_ms: int = 0) -> LatencyRecorder:
    return LatencyRecorder(LAYOUT, WINDOW_MS, SLICES, now_ms)


def kept(r: LatencyRecorder, now_ms: int, bucket: int = BUCKET_5_10MS) -> Observation | None:
    return r.snapshot(now_ms, QUANTILES).exemplars[bucket]


# -- the rule, on the recorder -------------------------------------------------------------------


def test_each_bucket_keeps_its_slowest_observation_and_equals_keep_the_first():
    r = recorder()
    r.record(6, 10, "a", 1)
    r.record(9, 20, "b", 2)
    r.record(7, 30, "c", 3)
    r.record(9, 40, "d", 4)  # as slow as b, in the same slice: b stays
    r.record(1, 50, "e", 5)  # another bucket
    exemplars = r.snapshot(60, QUANTILES).exemplars
    assert exemplars[BUCKET_5_10MS] == Observation(9, 20, "b", 2)
    assert exemplars[LAYOUT.bucket_index(1)] == Observation(1, 50, "e", 5)
    assert sum(e is not None for e in exemplars) == 2


def test_the_slowest_stays_until_its_slice_leaves_the_window():
    r = recorder()
    r.record(9, 0, "slow", 1)
    r.record(6, SLICE_MS, "fast", 2)
    assert kept(r, WINDOW_MS - 1) == Observation(9, 0, "slow", 1)
    assert kept(r, WINDOW_MS) == Observation(6, SLICE_MS, "fast", 2)  # slice 0 left the window
    assert kept(r, WINDOW_MS + SLICE_MS) is None
    # Buckets are cumulative since start: the counts stay, only the exemplar went.
    assert r.snapshot(WINDOW_MS + SLICE_MS, QUANTILES).cumulative_buckets[-1] == 2


def test_equals_in_different_slices_keep_the_newest():
    r = recorder()
    r.record(9, 0, "old", 1)
    r.record(9, SLICE_MS, "new", 2)
    r.record(9, SLICE_MS + 1, "newer-but-same-slice", 3)
    assert kept(r, SLICE_MS + 2) == Observation(9, SLICE_MS, "new", 2)


def test_out_of_range_values_keep_their_observed_value_in_the_edge_buckets():
    r = recorder()
    r.record(-20, 5, "skewed", 1)  # the exporter's clock behind the broker's: 0 ms
    r.record(10_000_000, 6, "very-late", 2)  # beyond the trackable hour: the +Inf bucket, as observed
    exemplars = r.snapshot(10, QUANTILES).exemplars
    assert exemplars[0] == Observation(0, 5, "skewed", 1)
    assert exemplars[-1] == Observation(10_000_000, 6, "very-late", 2)


# 2,502 and 2,503 share a key (HdrHistogram's 3 digits): the first of them is its exemplar.
VALUES_MS = [-3, 0, 1, 4, 6, 9, 10, 11, 2_501, 2_502, 2_503, 60_001, 61_000, 5_000_000]


@given(
    st.lists(st.tuples(st.sampled_from(VALUES_MS), st.integers(0, 130_000)), min_size=1, max_size=60),
    st.integers(0, 400_000),
)
@settings(max_examples=300, deadline=None)
def test_each_bucket_reports_the_slowest_of_the_slices_in_the_window(steps, idle_ms):
    r = recorder()
    now, seen = 0, []
    for i, (value, gap) in enumerate(steps):
        now += gap
        r.record(value, now, f"t{i}", i)
        seen.append(Observation(max(value, 0), now, f"t{i}", i))
    now += idle_ms
    got = r.snapshot(now, QUANTILES).exemplars
    oldest_slice = now // SLICE_MS - SLICES + 1

    def key(o: Observation) -> int:
        return LAYOUT.key(min(o.value_ms, HIGHEST_TRACKABLE_MS))

    for bucket, kept in enumerate(got):
        recent = [
            o for o in seen if LAYOUT.bucket_index(key(o)) == bucket and o.observed_at_ms // SLICE_MS >= oldest_slice
        ]
        if not recent:
            assert kept is None
            continue
        slowest = max(map(key, recent))
        newest_slice = max(o.observed_at_ms // SLICE_MS for o in recent if key(o) == slowest)
        assert kept == next(o for o in recent if key(o) == slowest and o.observed_at_ms // SLICE_MS == newest_slice)


# -- labels within 128 characters ----------------------------------------------------------------


def test_fit_cuts_between_code_points_and_marks_the_cut():
    assert fit("orders-7", 8) == "orders-7"
    assert fit("orders-17", 8) == "orders-" + TRUNCATED
    assert fit("🦀" * 10, 4) == "🦀🦀🦀" + TRUNCATED
    assert len(fit("é" * 300, 90)) == 90


@pytest.mark.parametrize("producer_id", [0, 4000, 2**63 - 1, -1])
@pytest.mark.parametrize("tid", ["", "a" * 81, "a" * 200, "🦀" * 500, "订单-" * 60])
def test_exemplar_labels_never_exceed_128_characters(tid, producer_id):
    labels = exemplar(Observation(5, 1, tid, producer_id)).labels
    length = sum(len(k) + len(v) for k, v in labels.items())
    assert length <= EXEMPLAR_LABELS_MAX
    if len(tid) + len(str(producer_id)) + len("transactional_idproducer_id") <= EXEMPLAR_LABELS_MAX:
        assert labels["transactional_id"] == tid
    else:
        assert length == EXEMPLAR_LABELS_MAX and labels["transactional_id"].endswith(TRUNCATED)
        assert tid.startswith(labels["transactional_id"][:-1])


# -- rendering -----------------------------------------------------------------------------------


def scrape(collector: Collector, openmetrics: bool) -> str:
    registry = CollectorRegistry()
    registry.register(collector)
    return (generate_openmetrics if openmetrics else generate_latest)(registry).decode()


def live_model(window_seconds: float = 300) -> tuple[CoordinatorModel, TransactionCollector]:
    recorders = LatencyRecorders(window_seconds=window_seconds, now_ms=NOW_MS - 10_000)
    model = CoordinatorModel(recorders.sinks())
    model.apply(PartitionAssigned(0))
    model.apply(PartitionReplayed(0))
    return model, TransactionCollector(model, recorders, clock=lambda: NOW_MS / 1000)


def bucket_exemplars(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], object]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.exemplar
        for family in parse_openmetrics(text)
        for s in family.samples
        if s.exemplar is not None
    }


UNTRUSTED_IDS = ['quote"back\\slash\nnewline', "nul\x00tab\tcr\rdel\x7f", "订单-7 🦀", "x" * 300]
SHOWN_AS = [
    f"quote{REPLACED}back{REPLACED}slash{REPLACED}newline",
    f"nul{REPLACED}tab{REPLACED}cr{REPLACED}del{REPLACED}",
    "订单-7 🦀",
    "x" * 96 + TRUNCATED,  # 128 - len("transactional_id" "producer_id" "4000") = 97
]


def test_openmetrics_exemplars_parse_back_with_the_transaction_value_and_time():
    model, collector = live_model()
    t = NOW_MS - 5_000
    for i, tid in enumerate(UNTRUSTED_IDS):
        model.apply(log_event(tid, S.PREPARE_COMMIT, offset=2 * i, timestamp_ms=t, received_ms=t + 7 + i))
        model.apply(log_event(tid, S.COMPLETE_COMMIT, offset=2 * i + 1, timestamp_ms=t + 3_000, received_ms=t + 3_001))
    got = bucket_exemplars(scrape(collector, openmetrics=True))

    latency = "kafka_transaction_state_log_append_latency_seconds_bucket"
    slowest = got[(latency, (("le", "0.01"), ("target_state", "PREPARE_COMMIT")))]
    # 7, 8, 9 and 10 ms share a bucket: the 10 ms one is the exemplar, as observed.
    assert slowest.labels == {"transactional_id": SHOWN_AS[3], "producer_id": "4000"}
    assert slowest.value == 0.01 and float(slowest.timestamp) == (t + 10) / 1000
    # Four COMPLETE_COMMITs of 1 ms: the first is the exemplar.
    assert (
        got[(latency, (("le", "0.001"), ("target_state", "COMPLETE_COMMIT")))].labels["transactional_id"]
        == (SHOWN_AS[0])
    )
    completion = got[("kafka_transaction_marker_completion_seconds_bucket", (("le", "5.0"), ("result", "commit")))]
    assert completion.labels == {"transactional_id": SHOWN_AS[0], "producer_id": "4000"}
    assert completion.value == 3.0
    assert all(s.labels.keys() == {"transactional_id", "producer_id"} for s in got.values())


@pytest.mark.parametrize("tid, shown", list(zip(UNTRUSTED_IDS, SHOWN_AS)))
def test_every_untrusted_id_parses_back_as_shown(tid, shown):
    model, collector = live_model()
    model.apply(log_event(tid, S.ONGOING, timestamp_ms=NOW_MS - 100, received_ms=NOW_MS - 90))
    (only,) = bucket_exemplars(scrape(collector, openmetrics=True)).values()
    assert only.labels == {"transactional_id": shown, "producer_id": "4000"}


def test_prometheus_text_is_byte_for_byte_what_it_was_without_exemplars():
    model, collector = live_model()
    feed(model)
    for i, tid in enumerate(UNTRUSTED_IDS):
        model.apply(log_event(tid, S.ONGOING, offset=10 + i, timestamp_ms=NOW_MS - 100, received_ms=NOW_MS - 90))
    assert bucket_exemplars(scrape(collector, openmetrics=True))  # there are exemplars to leave out

    class WithoutExemplars(Collector):
        def collect(self):
            for family in collector.collect():
                family.samples = [s._replace(exemplar=None) for s in family.samples]
                yield family

    text = scrape(collector, openmetrics=False)
    assert text == scrape(WithoutExemplars(), openmetrics=False)
    assert " # {" not in text


def test_an_exemplar_older_than_the_window_leaves_the_scrape():
    model, collector = live_model(window_seconds=5)
    model.apply(log_event("old", S.ONGOING, timestamp_ms=NOW_MS - 5_010, received_ms=NOW_MS - 5_000))
    model.apply(log_event("new", S.ONGOING, offset=1, timestamp_ms=NOW_MS - 4_020, received_ms=NOW_MS - 4_000))
    got = bucket_exemplars(scrape(collector, openmetrics=True))
    assert [e.labels["transactional_id"] for e in got.values()] == ["new"]

"""bench/latency_under_load.py's clock mode: the coordinator's own figures taken as the exporter's
gauges take theirs, and a run that misses the goal said to miss it, for each reason."""

from __future__ import annotations

from collections import Counter

from bench.latency_under_load import cumulative_buckets, hdr_rank, per_state, shortfalls

_METRICS = """\
# TYPE kafka_transaction_state_log_records_total counter
kafka_transaction_state_log_records_total{target_state="ONGOING"} 4.0
# TYPE txn_exporter_append_latency_transitions_total counter
txn_exporter_append_latency_transitions_total{target_state="ONGOING",clock="coordinator"} 4.0
txn_exporter_append_latency_transitions_total{target_state="ONGOING",clock="fetch"} 0.0
txn_exporter_append_latency_transitions_total{target_state="ONGOING",clock="untimed"} 0.0
# TYPE kafka_transaction_state_log_append_latency_quantile_seconds gauge
kafka_transaction_state_log_append_latency_quantile_seconds{target_state="ONGOING",quantile="0.5"} 0.0
kafka_transaction_state_log_append_latency_quantile_seconds{target_state="ONGOING",quantile="0.99"} 0.003
# TYPE kafka_transaction_state_log_append_latency_seconds histogram
kafka_transaction_state_log_append_latency_seconds_bucket{target_state="ONGOING",le="0.001"} 2.0
kafka_transaction_state_log_append_latency_seconds_bucket{target_state="ONGOING",le="0.0025"} 2.0
kafka_transaction_state_log_append_latency_seconds_bucket{target_state="ONGOING",le="0.005"} 4.0
kafka_transaction_state_log_append_latency_seconds_bucket{target_state="ONGOING",le="+Inf"} 4.0
kafka_transaction_state_log_append_latency_seconds_count{target_state="ONGOING"} 4.0
kafka_transaction_state_log_append_latency_seconds_sum{target_state="ONGOING"} 0.006
"""


def test_the_coordinators_quantile_is_taken_at_hdrhistograms_rank() -> None:
    """round(q * n), not the nearest rank's ceiling: of 10 values, p50 is the 5th, p99 the 10th; of
    150, p99 is the 149th (the nearest rank's 149th too), of 250 the 248th (nearest rank: 248th)."""
    assert hdr_rank(list(range(10)), 0.5) == 4 and hdr_rank(list(range(10)), 0.99) == 9
    assert hdr_rank(list(range(1, 151)), 0.99) == 149
    assert hdr_rank(list(range(1, 251)), 0.99) == 248
    assert hdr_rank([], 0.5) == 0


def test_the_coordinators_latencies_fill_the_histograms_buckets_as_the_exporters_do() -> None:
    assert cumulative_buckets([0, 1, 2, 3, 5, 6], [0.001, 0.0025, 0.005, float("inf")]) == [2, 3, 5, 6]


def test_each_state_holds_the_exporters_counts_and_quantiles_beside_the_coordinators() -> None:
    states = per_state(_METRICS, {"ONGOING": [0, 1, 3, 3]}, Counter(ONGOING=4), Counter(ONGOING=4))
    assert states == {
        "ONGOING": {
            "records": 4,
            "timed_coordinator": 4,
            "timed_fetch": 0,
            "timed_untimed": 0,
            "dumped": 4,
            "lines": 4,
            "exporter_ms": [0.0, 3.0],
            "coordinator_ms": [1, 3],  # (round(0.5 * 4) = the 2nd value)
            "histogram_equal": True,
        }
    }
    assert not per_state(_METRICS, {"ONGOING": [0, 2, 3, 3]}, Counter(), Counter())["ONGOING"]["histogram_equal"]


def _run(**changes) -> dict:
    state = {"records": 9, "timed_coordinator": 9, "dumped": 9, "exporter_ms": [0.0, 2.0], "coordinator_ms": [0, 1]}
    run = {
        "asked": 340,
        "achieved": 338.0,
        "carried": True,
        "states": {"ONGOING": state},
        "unmatched": {"record evicted": 0, "line evicted": 0, "line expired": 3},
    }
    for key, value in changes.items():
        (state if key in state else run)[key] = value
    return run


def test_a_run_meets_the_goal_only_at_a_carried_rate_of_300_every_record_timed_none_evicted() -> None:
    assert shortfalls(_run()) == []
    assert shortfalls(_run(carried=False, achieved=270.4)) == ["340/s not carried (270/s)"]
    assert shortfalls(_run(asked=200)) == ["200/s asked, under 300/s"]
    assert shortfalls(_run(exporter_ms=[0.0, 3.0])) == ["ONGOING p50/p99 [0.0, 3.0] against [0, 1]"]
    assert shortfalls(_run(exporter_ms=[float("nan"), float("nan")])) == ["ONGOING p50/p99 [nan, nan] against [0, 1]"]
    assert shortfalls(_run(timed_coordinator=8)) == ["ONGOING: 8 timed of 9 records, 9 dumped"]
    assert shortfalls(_run(unmatched={"record evicted": 2, "line evicted": 0})) == [
        "evicted {'record evicted': 2, 'line evicted': 0}"
    ]

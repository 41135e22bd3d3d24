"""bench/cluster_report.py's bill in place: the exporter's own CPU, the DEBUG log calls sampled, and
its requests priced by type, beside the difference of windows."""

from __future__ import annotations

import pytest

from bench.cluster_report import beyond_noise, readme_rows, summarize

PRICES = {"FetchConsumer": 200.0, "ListOffsets": 80.0}  # µs of broker CPU a request


def _broker(cores: float, exporter: float | None, requests: dict[str, float], logger: float | None = None) -> dict:
    return {
        "cores": cores,
        "exporter_cores": exporter,
        "records_per_s": 30.0,
        "coordinator_log_bytes_per_s": 1500.0,
        "requests_per_s": requests,
        "logger_cores": logger,
    }


def _windows(kind: str, level: str, logger: float | None) -> list[dict]:
    windows = []
    for pair, (alone, with_) in enumerate([(0.100, 0.110), (0.104, 0.106)], start=1):
        followers = {"FetchFollower": 40.0, "Produce": 30.0}
        windows += [
            {"run": 1, "pair": pair, "kind": "without", "level": "INFO", "transactions_per_s": 30.0, "brokers": {
                "1": _broker(alone, None, followers)
            }},
            {"run": 1, "pair": pair, "kind": kind, "level": level, "transactions_per_s": 30.0, "brokers": {
                "1": _broker(with_, 0.002, {**followers, "FetchConsumer": 10.0, "ListOffsets": 5.0}, logger)
            }},
        ]  # fmt: skip
    return windows


def test_the_fetch_timed_bill_is_the_exporter_and_its_priced_requests() -> None:
    s = summarize(_windows("fetch@100", "INFO", None), "fetch@100", 30.0, PRICES)["1"]
    placed = s["in_place"]
    assert placed["serving_cores"] == {"FetchConsumer": 0.002, "ListOffsets": 0.0004}
    assert placed["cores"] == pytest.approx(0.002 + 0.0024)
    assert placed["pct"] == pytest.approx(100 * 0.0044 / 0.102, abs=0.01)  # over the broker alone's median
    # The cross-check: exporter + the median of the blocks' differences (+0.010, +0.002), ± half their spread.
    assert placed["difference_cores"] == pytest.approx(0.002 + 0.006)
    assert placed["difference_spread_cores"] == pytest.approx(0.004)


def test_the_clock_modes_bill_adds_its_log_calls_and_needs_their_samples() -> None:
    sampled = summarize(_windows("clock", "DEBUG", 0.001), "clock", 30.0, PRICES)["1"]["in_place"]
    assert sampled["cores"] == pytest.approx(0.002 + 0.001 + 0.0024)
    assert summarize(_windows("clock", "DEBUG", None), "clock", 30.0, PRICES)["1"]["in_place"] is None
    assert summarize(_windows("fetch", "INFO", None), "fetch", 30.0)["1"]["in_place"] is None  # no prices


def test_where_the_brokers_were_sampled_the_shares_base_is_their_unsampled_windows() -> None:
    """Sampling adds to a broker's CPU (bench/broker_profile.py --overhead): the brokers alone, not
    sampled, are the base of the shares; the difference of windows stays between sampled ones."""
    windows = _windows("clock", "DEBUG", 0.001)
    for pair in (1, 2):
        windows.append(
            {"run": 1, "pair": pair, "kind": "alone", "level": "INFO", "transactions_per_s": 30.0, "brokers": {
                "1": _broker(0.080, None, {"FetchFollower": 40.0, "Produce": 30.0})
            }}
        )  # fmt: skip
    s = summarize(windows, "clock", 30.0, PRICES)["1"]
    assert s["broker_alone_cores"] == pytest.approx(0.080) and not s["broker_alone_sampled"]
    assert s["in_place"]["pct"] == pytest.approx(100 * 0.0054 / 0.080, abs=0.01)
    assert s["in_place"]["difference_cores"] == pytest.approx(0.002 + 0.006)


def _figures(cores: float, pct: float, difference: float, noise: float) -> dict:
    one = {"median": cores, "min": cores, "max": cores}
    return {
        "in_place_cores": one,
        "in_place_pct": {"median": pct, "min": pct, "max": pct},
        "exporter_cores": one,
        "difference_cores": {"median": difference, "min": difference, "max": difference},
        "difference_spread_cores": {"median": noise, "min": noise, "max": noise},
    }


def test_readmes_rows_give_cores_first_and_a_difference_within_its_noise_as_such() -> None:
    overview = {"10": {"clock": _figures(0.004, 4.0, -0.010, 0.02), "fetch": _figures(0.007, 6.5, 0.05, 0.02)}}
    clock, fetch = readme_rows(overview)[2:]
    assert "| 0.0040 (0.0040-0.0040) | 4.0% (4.0-4.0) |" in clock and "within noise (±0.020)" in clock
    assert "+0.050 (±0.020)" in fetch  # no negative share shown as a saving; a real one shown with its noise
    assert beyond_noise(overview) == ["10/fetch"]  # 0.05 above 0.007 by more than 0.02: the sum leaves something out

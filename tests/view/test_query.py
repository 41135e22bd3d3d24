"""The transactions view's filters, selection and document, on a model fed synthetic events."""

from __future__ import annotations

import pytest

from exporter.codec import TransactionLogValue, decode_record, encode_key, encode_value
from exporter.contracts.events import (
    HangingScanCompleted,
    MarkerWriteRetried,
    PartitionAssigned,
    PartitionReplayed,
    TransactionLogRecords,
)
from exporter.contracts.hanging_rules import HANGING, LATE, Finding, OpenTransaction
from exporter.metrics import LatencyRecorders
from exporter.model import CoordinatorModel
from exporter.view.query import MAX_LIMIT, Query, QueryError, document, parse_query
from tests.model.builders import S

NOW = 10_000_000
PADDING = 300_000


def model_with(*transactions: tuple[str, S, int, int]) -> CoordinatorModel:
    """(id, state, record timestamp, timeout) each, as the live source decodes them (partitions skipped)."""
    model = CoordinatorModel(LatencyRecorders(now_ms=NOW).sinks())
    for p in range(3):
        model.apply(PartitionAssigned(p))
        model.apply(PartitionReplayed(p))
    for n, (tid, state, ts, timeout) in enumerate(transactions):
        value = TransactionLogValue(
            version=1,
            producer_id=100 + n,
            producer_epoch=5,
            transaction_timeout_ms=timeout,
            state=state,
            partitions={"orders": [n % 3], "ledger": [0]},
            last_update_timestamp_ms=ts,
            start_timestamp_ms=ts,
        )
        record = decode_record(encode_key(tid), encode_value(value), n, ts, partitions=False)
        model.apply(TransactionLogRecords(n % 3, [record], ts + 1, False))
    return model


def doc(model: CoordinatorModel, query: str = "") -> dict:
    return document(model, parse_query(query), NOW, PADDING, "kafka:9092", broker_log=True)


@pytest.mark.parametrize(
    "query, expected",
    [
        ("", Query()),
        ("state=ongoing", Query(frozenset({S.ONGOING}), hanging=False)),
        (
            "state=PREPARE_COMMIT,prepare_abort&state=hanging",
            Query(frozenset({S.PREPARE_COMMIT, S.PREPARE_ABORT}), hanging=True),
        ),
        ("min_age=90", Query(min_age_ms=90_000)),
        ("min_age=1.5m", Query(min_age_ms=90_000)),
        ("min_age=250ms", Query(min_age_ms=250)),
        ("min_age=2h", Query(min_age_ms=7_200_000)),
        ("min_age=1.2e%2B02", Query(min_age_ms=120_000)),
        ("min_age=1.2e+02", Query(min_age_ms=120_000)),
        ("limit=1000&format=html", Query(limit=1000, format="html")),
        ("state=&min_age=&limit=", Query()),  # the page's form with its fields left empty
    ],
)
def test_parse_query(query, expected):
    assert parse_query(query) == expected


@pytest.mark.parametrize(
    "query, message",
    [
        ("state=DONE", "state: 'DONE' is none of ONGOING, PREPARE_COMMIT, PREPARE_ABORT, HANGING"),
        ("min_age=-1", "min_age: '-1' is not an age"),
        ("min_age=1d", "min_age: '1d' is not an age"),
        ("limit=0", "limit: '0' is not a number from 1 to 1000"),
        ("limit=1001", "from 1 to 1000"),
        ("limit=ten", "limit: 'ten'"),
        ("format=xml", "format: 'xml' is neither json nor html"),
        ("minage=5", "unknown parameter 'minage'; known: state, min_age, limit, format"),
        ("limit=5&&x", "bad query string"),
    ],
)
def test_bad_filters_have_a_one_line_message(query, message):
    with pytest.raises(QueryError, match=message.replace("(", r"\(")) as e:
        parse_query(query)
    assert "\n" not in str(e.value)


def test_oldest_first_with_everything_a_row_says():
    model = model_with(
        ("young", S.ONGOING, NOW - 1_000, 60_000),
        ("late", S.ONGOING, NOW - 400_000, 60_000),  # 400 s > 60 s timeout + 300 s padding
        ("held", S.PREPARE_COMMIT, NOW - 30_000, 60_000),
    )
    model.apply(MarkerWriteRetried("NOT_ENOUGH_REPLICAS", "held", "orders-2", NOW - 500))
    model.apply(MarkerWriteRetried("NOT_ENOUGH_REPLICAS", "held", "orders-2", NOW - 200))
    d = doc(model)
    assert [r["transactional_id"] for r in d["transactions"]] == ["late", "held", "young"]
    late, held, young = d["transactions"]
    assert late == {
        "transactional_id": "late",
        "state": "ONGOING",
        "producer_id": 101,
        "producer_epoch": 5,
        "transaction_version": 0,  # a record without ClientTransactionVersion (as a 3.x coordinator writes)
        "state_entered_ms": NOW - 400_000,
        "age_seconds": 400.0,
        "duration_seconds": 400.0,
        "transaction_start_ms": NOW - 400_000,
        "transaction_timeout_ms": 60_000,
        "late": True,
        "stuck": None,
        "coordinator_partition": 1,
        "coordinator_broker": None,
        "partitions": ["orders-1", "ledger-0"],
        "marker_errors": [],
        "append_errors": [],
        "diagnosis": None,
    }
    assert young["late"] is False and young["stuck"] is None
    assert held["late"] is None and held["stuck"] is False  # PREPARE_* is never late; 30 s < 60 s + 300 s
    assert held["marker_errors"] == [
        {"partition": "orders-2", "error": "NOT_ENOUGH_REPLICAS", "count": 2, "last_seen_ms": NOW - 200}
    ]
    assert d["in_flight_matching"] == 3 and d["broker_log"] and d["late_padding_seconds"] == 300


def test_filters_apply_before_the_limit():
    model = model_with(
        *[(f"t{n:03d}", S.ONGOING if n % 2 else S.PREPARE_ABORT, NOW - n * 1_000, 60_000) for n in range(200)]
    )
    d = doc(model)
    assert len(d["transactions"]) == 100 and d["in_flight_matching"] == 200
    assert d["transactions"][0]["transactional_id"] == "t199"
    ages = [r["age_seconds"] for r in d["transactions"]]
    assert ages == sorted(ages, reverse=True)
    d = doc(model, "state=ONGOING&min_age=150&limit=10")
    assert [r["transactional_id"] for r in d["transactions"]] == [f"t{n:03d}" for n in range(199, 179, -2)]
    assert d["in_flight_matching"] == 25  # odd n from 151 to 199
    assert doc(model, "state=HANGING")["transactions"] == []
    assert len(doc(model, f"limit={MAX_LIMIT}")["transactions"]) == 200


def test_hanging_findings_with_kafkas_abort_command():
    model = model_with(("ok", S.ONGOING, NOW - 1_000, 60_000))
    old = OpenTransaction("orders", 3, 77, 1, -1, 1234, NOW - 3_600_000)
    recent = OpenTransaction("orders", 4, 78, 1, -1, 99, NOW - 60_000)
    late = OpenTransaction("orders", 5, 79, 1, 3, 5, NOW - 7_200_000)
    model.apply(
        HangingScanCompleted(
            10,
            3,
            2,
            findings=(
                Finding(recent, 0, HANGING, None, None, "no coordinator lists the producer id"),
                Finding(old, 0, HANGING, "ghost", None, "transactional id unknown to its coordinator"),
                Finding(
                    late, 0, LATE, "slow", 1, "the coordinator's PrepareCommit transaction still holds the partition"
                ),
            ),
        )
    )
    d = doc(model)
    assert [(h["partition"], h["age_seconds"]) for h in d["hanging"]] == [(3, 3600.0), (4, 60.0)]
    assert d["hanging"][0]["abort_command"] == (
        "kafka-transactions.sh --bootstrap-server kafka:9092 abort --topic orders --partition 3 --start-offset 1234"
    )
    assert d["hanging"][0]["transactional_id"] == "ghost" and d["hanging_scan"]
    assert [h["partition"] for h in doc(model, "min_age=10m")["hanging"]] == [3]
    assert doc(model, "state=ONGOING")["hanging"] == []
    only = doc(model, "state=HANGING&limit=1")
    assert (only["transactions"], len(only["hanging"]), only["hanging_matching"]) == ([], 1, 2)


@pytest.mark.parametrize(
    "query, message",
    [
        ("limit=\u00b2", "limit: '\u00b2' is not a number from 1 to 1000"),  # a digit to str.isdigit, not to int()
        ("limit=\u0661\u0662", "limit: '\u0661\u0662' is not a number from 1 to 1000"),  # Arabic-Indic digits
        ("limit=" + "9" * 5000, "limit: '9999999999999999999999999999999999999999...' is not a number from 1 to 1000"),
        ("min_age=\u00b2", "min_age: '\u00b2' is not an age"),
        ("min_age=\u0661", "min_age: '\u0661' is not an age"),
        ("min_age=1e999", "min_age: '1e999' is too large"),
        ("min_age=1e308h", "min_age: '1e308h' is too large"),
        ("min_age=" + "9" * 5000, "min_age: '9999999999999999999999999999999999999999...' is too large"),
        ("min_age=1e12", "min_age: '1e12' is too large"),  # beyond 100 years
        ("x" * 60_000 + "=1", "unknown parameter 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx...'"),
        (
            "limit=5&" + "y" * 60_000,
            "bad query string: 'yyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy...' is not name=value",
        ),
        ("&".join(["limit=5"] * 33), "bad query string: more than 32 parameters"),
    ],
)
def test_any_input_is_a_one_line_query_error_of_bounded_length(query, message):
    with pytest.raises(QueryError) as e:
        parse_query(query)
    assert str(e.value).startswith(message) and "\n" not in str(e.value) and len(str(e.value)) < 200


def test_the_largest_age_and_limit_parse():
    assert parse_query("min_age=876000h").min_age_ms == 876_000 * 3_600_000  # 100 years
    assert parse_query("limit=0001000").limit == 1000

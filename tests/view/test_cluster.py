"""The cluster view's merge (exporter.view.cluster): order and limit across exporters, a failing
exporter as a line, the same transaction from two exporters (a coordinator moving) kept once and
newest, fields the merge does not know carried through, and the terminal table of it."""

from __future__ import annotations

import threading
import time

from exporter.contracts.peers import Answer, Source
from exporter.sources import peer_exporters
from exporter.sources.peer_exporters import SourceError
from exporter.view import cluster, table, wording


def row(tid: str, entered_ms: int, state: str = "ONGOING", pid: int = 7, epoch: int = 1, **extra) -> dict:
    return {
        "transactional_id": tid,
        "state": state,
        "producer_id": pid,
        "producer_epoch": epoch,
        "state_entered_ms": entered_ms,
        "age_seconds": (100_000 - entered_ms) / 1000,
        "transaction_start_ms": entered_ms,
        "transaction_timeout_ms": 60_000,
        "late": False,
        "coordinator_partition": 3,
        "partitions": ["orders-0"],
        "marker_errors": [],
        **extra,
    }


def hanging_row(topic: str, partition: int, pid: int, last_ms: int) -> dict:
    return {
        "topic": topic,
        "partition": partition,
        "producer_id": pid,
        "epoch": 0,
        "start_offset": 10,
        "transactional_id": None,
        "coordinator": None,
        "age_seconds": 600.0,
        "verdict": "HANGING",
        "reason": "no coordinator has it",
        "last_timestamp_ms": last_ms,
        "coordinator_epoch": 0,
        "abort_command": f"kafka-transactions.sh abort --topic {topic} --partition {partition}",
    }


def document(broker_id: int | None, rows: list[dict], matching: int | None = None, hanging: list | None = None) -> dict:
    return {
        "now_ms": 100_000,
        "query": {
            "states": ["ONGOING", "PREPARE_ABORT", "PREPARE_COMMIT", "HANGING"],
            "min_age_seconds": 0,
            "limit": 3,
        },
        "late_padding_seconds": 300,
        "broker_log": True,
        "in_flight_matching": len(rows) if matching is None else matching,
        "transactions": rows,
        "hanging_scan": hanging is not None,
        "hanging_matching": len(hanging or []),
        "hanging": hanging or [],
        "broker": {"id": broker_id, "bootstrap_servers": "localhost:9092"},
    }


def answer(name: str, doc: dict | None, error: str | None = None) -> Answer:
    return Answer(Source(name, f"http://{name}/transactions?format=json"), doc, error, 0.01)


def tids(doc: dict) -> list[str]:
    return [r["transactional_id"] for r in doc["transactions"]]


def test_oldest_first_across_exporters_each_row_naming_its_broker():
    one = document(1, [row("a", 1_000), row("c", 3_000), row("e", 5_000)])
    two = document(2, [row("b", 2_000), row("d", 3_000), row("f", 6_000)])
    merged = cluster.merge([answer("broker-1:9464", one), answer("broker-2:9464", two)], limit=10)
    assert tids(merged) == ["a", "b", "c", "d", "e", "f"]  # c and d entered together: by transactional id
    assert [r["exporter"] for r in merged["transactions"][:2]] == [
        {"name": "broker-1:9464", "broker_id": 1},
        {"name": "broker-2:9464", "broker_id": 2},
    ]
    assert [wording.broker_of(r) for r in merged["transactions"]] == ["1", "2", "1", "2", "1", "2"]
    assert merged["in_flight_matching"] == 6 and merged["duplicates"] == 0
    assert [s["ok"] for s in merged["sources"]] == [True, True]
    assert merged["sources"][0]["url"] == "http://broker-1:9464/transactions"


def test_the_limit_applies_to_the_union():
    # Each exporter sends its oldest `limit`; the merge keeps the oldest `limit` of them all.
    one = document(1, [row("a", 1_000), row("b", 2_000), row("c", 9_000)], matching=40)
    two = document(2, [row("x", 1_500), row("y", 8_000), row("z", 9_500)], matching=2)
    merged = cluster.merge([answer("one", one), answer("two", two)], limit=3)
    assert tids(merged) == ["a", "x", "b"]
    assert merged["in_flight_matching"] == 42  # what each exporter counted, not what was shown


def test_an_exporter_that_did_not_answer_is_a_line_and_the_others_rows_stay():
    one = document(1, [row("a", 1_000)], hanging=[])
    merged = cluster.merge(
        [answer("broker-1:9464", one), answer("broker-3:9464", None, "connection refused")], limit=10
    )
    assert tids(merged) == ["a"] and merged["in_flight_matching"] == 1
    failed = merged["sources"][1]
    assert (failed["ok"], failed["error"], failed["broker"], failed["in_flight_matching"]) == (
        False,
        "connection refused",
        None,
        None,
    )
    assert wording.source_lines(merged) == [
        "1 of 2 exporters answered.",
        "NOT ANSWERING: broker-3:9464 (http://broker-3:9464/transactions): connection refused",
    ]


def test_none_answering_is_still_a_document():
    merged = cluster.merge([answer("one", None, "no answer within 10 s")], limit=5, query={"limit": 5})
    assert merged["transactions"] == [] and merged["in_flight_matching"] == 0 and merged["query"] == {"limit": 5}
    assert wording.source_lines(merged)[0] == "0 of 1 exporters answered."


def test_prometheus_says_why_a_target_is_down():
    source = Source("broker-3:9464", "http://broker-3:9464/transactions", {}, {"prometheus": {"health": "down"}})
    merged = cluster.merge([Answer(source, None, "connection refused", 0.0)], limit=5)
    (line,) = wording.source_lines(merged)[1:]
    assert line.endswith("connection refused (Prometheus: down, no error given)")


def test_a_transaction_two_exporters_list_is_kept_once_the_newer():
    # A __transaction_state partition moving from broker 1 to 2: 1 still lists what it last read.
    old = document(1, [row("moving", 1_000, "ONGOING"), row("bumped", 1_000, "ONGOING", epoch=4), row("a", 500)])
    new = document(2, [row("moving", 4_000, "PREPARE_COMMIT"), row("bumped", 1_200, "PREPARE_ABORT", epoch=5)])
    for answers in ([answer("one", old), answer("two", new)], [answer("two", new), answer("one", old)]):
        merged = cluster.merge(answers, limit=10)
        assert tids(merged) == ["a", "bumped", "moving"]
        by_id = {r["transactional_id"]: r for r in merged["transactions"]}
        assert (by_id["moving"]["state"], by_id["moving"]["exporter"]["broker_id"]) == ("PREPARE_COMMIT", 2)
        assert (by_id["bumped"]["state"], by_id["bumped"]["producer_epoch"]) == ("PREPARE_ABORT", 5)
        assert merged["duplicates"] == 2 and merged["in_flight_matching"] == 3


def test_a_later_producer_id_wins_and_more_partitions_break_a_tie():
    first = document(1, [row("p", 1_000, epoch=9, pid=10), row("q", 1_000, partitions=["t-0"])])
    second = document(2, [row("p", 1_000, epoch=0, pid=11), row("q", 1_000, partitions=["t-0", "t-1"])])
    merged = cluster.merge([answer("one", first), answer("two", second)], limit=10)
    by_id = {r["transactional_id"]: r for r in merged["transactions"]}
    assert by_id["p"]["producer_id"] == 11 and by_id["q"]["partitions"] == ["t-0", "t-1"]
    # Identical rows: the first exporter's is kept.
    same = cluster.merge([answer("one", document(1, [row("r", 5)])), answer("two", document(2, [row("r", 5)]))], 10)
    assert same["transactions"][0]["exporter"]["name"] == "one"


def test_fields_the_merge_does_not_know_are_carried_through():
    diagnosed = row("held", 1_000, "PREPARE_COMMIT", coordinator_broker=3, diagnosis={"summary": "ISR [1] < 2"})
    merged = cluster.merge([answer("one", document(None, [diagnosed]))], limit=10)
    (kept,) = merged["transactions"]
    assert {k: v for k, v in kept.items() if k != "exporter"} == diagnosed
    assert wording.broker_of(kept) == "3"  # the coordinator broker the row names wins
    # An exporter that does not know its broker (--all-partitions, or an older exporter): its name.
    no_id = cluster.merge([answer("one:9464", {**document(None, [row("x", 1)]), "broker": None})], limit=10)
    assert wording.broker_of(no_id["transactions"][0]) == "one:9464"


def test_hanging_rows_merged_oldest_first_once_each():
    one = document(1, [], hanging=[hanging_row("t", 0, 5, 3_000), hanging_row("t", 1, 6, 1_000)])
    two = document(2, [], hanging=[hanging_row("t", 0, 5, 3_000), hanging_row("u", 0, 8, 2_000)])
    merged = cluster.merge([answer("one", one), answer("two", two)], limit=10)
    assert [(h["topic"], h["partition"]) for h in merged["hanging"]] == [("t", 1), ("u", 0), ("t", 0)]
    assert merged["hanging_matching"] == 3 and merged["duplicates"] == 1 and merged["in_flight_matching"] == 0
    assert [h["exporter"]["broker_id"] for h in merged["hanging"]] == [1, 2, 1]


def test_gather_asks_in_parallel_in_order_and_never_raises():
    release = threading.Event()

    def fetch(source: Source) -> dict:
        if source.name == "slow":
            release.wait(5)
            return document(9, [])
        if source.name == "refused":
            raise SourceError("connection refused", reached=False)
        if source.name == "bug":
            raise KeyError("\x1b[2Jboom")
        return document(1, [row("a", 1)])

    names = ["ok", "refused", "bug", "slow"]
    start = time.monotonic()
    answers = peer_exporters.gather([Source(n, f"http://{n}/") for n in names], fetch, deadline_seconds=0.3)
    release.set()
    assert time.monotonic() - start < 2
    assert [a.source.name for a in answers] == names
    assert answers[0].document is not None and answers[0].error is None
    assert answers[1].error == "connection refused"
    assert answers[2].error == "KeyError: '\\x1b[2Jboom'"  # a bug is a line too, its text escaped
    assert answers[3].error == "no answer within 0.3 s" and answers[3].document is None


def test_the_table_names_each_rows_broker_and_each_silent_exporter():
    one = document(1, [row("a", 1_000, "PREPARE_COMMIT")], hanging=[hanging_row("t", 0, 5, 1)])
    merged = cluster.merge([answer("b1:9464", one), answer("b2:9464", None, "TLS: bad \x1b[31m certificate")], limit=10)
    lines = table.render(merged).splitlines()
    assert lines[0].split()[:3] == ["BROKER", "TRANSACTIONAL_ID", "STATE"]
    assert lines[1].split()[:3] == ["1", "a", "PREPARE_COMMIT"]
    assert "1 in flight match, 1 shown, oldest first" in lines[3]
    hanging_header = lines.index("Hanging transactions (last scan):") + 1
    assert lines[hanging_header].split()[:2] == ["BROKER", "PARTITION"]
    assert lines[hanging_header + 1].split()[:2] == ["1", "t-0"]
    assert lines[-2:] == [
        "1 of 2 exporters answered.",
        "NOT ANSWERING: b2:9464 (http://b2:9464/transactions): TLS: bad \\x1b[31m certificate",
    ]
    # One exporter's own document keeps its table as it was: no broker column, no exporter lines.
    single = table.render(one).splitlines()
    assert single[0].split()[0] == "TRANSACTIONAL_ID" and "exporters answered" not in "".join(single)

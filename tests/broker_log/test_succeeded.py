"""The coordinator's `succeeded` line (exporter.broker_log.lines.parse_succeeded), in every pinned
version's words, with the ids and lines a broker can write."""

from __future__ import annotations

import pytest

from exporter.broker_log.lines import MALFORMED, UNRECOGNIZED, TransitionLine, parse_succeeded
from exporter.broker_log.parser import BrokerLogParser
from exporter.codec.states import TransactionState as S
from exporter.contracts.events import TransitionAppended
from tests.broker_log.test_lines import META_3, META_40, META_41

LOGGER = "(kafka.coordinator.transaction.TransactionStateManager)"
UPDATED_MS = 1795644692120  # epoch ms, 3 ms before the lines' own time below (read as UTC)


def succeeded(tid: str, meta: str, time: str = "2026-11-25 22:11:32,123", epoch: int = 7) -> str:
    meta = meta.replace("txnLastUpdateTimestamp=2", f"txnLastUpdateTimestamp={UPDATED_MS}")
    return (
        f"[{time}] DEBUG [Transaction State Manager 1]: Updating {tid}'s transaction state to {meta} with "
        f"coordinator epoch {epoch} for {tid} succeeded {LOGGER}"
    )


@pytest.mark.parametrize(
    ("meta", "state"),
    [(META_3, "PrepareCommit"), (META_40, "PrepareCommit"), (META_41, "PREPARE_COMMIT")],
    ids=["3.6-3.9", "4.0", "4.1+"],
)
def test_every_versions_line_names_the_records_fields(meta: str, state: str) -> None:
    assert parse_succeeded(succeeded("t-1", meta.format(state))) == TransitionLine(
        "t-1", S.PREPARE_COMMIT, 2, 0, UPDATED_MS, "2026-11-25 22:11:32,123"
    )


@pytest.mark.parametrize(
    "tid",
    ["a's b", "x for y", "z with coordinator epoch 3 for z", "sp ace", "订单-7 🦀", "'s ", "a) (b"],
)
def test_any_transactional_id_is_split_where_both_copies_agree(tid: str) -> None:
    parsed = parse_succeeded(succeeded(tid, META_41.format("ONGOING")))
    assert isinstance(parsed, TransitionLine) and parsed.transactional_id == tid and parsed.target_state == S.ONGOING


@pytest.mark.parametrize(
    "line",
    [
        succeeded("t", META_41.format("PREPARE_COMMIT")).replace(" succeeded (", " failed ("),
        succeeded("t", META_41.format("NOT_A_STATE")),
        succeeded("t", META_41.format("ONGOING").replace("producerEpoch=0", "producerEpoch=x")),
        succeeded("t", META_41.format("ONGOING").replace("txnLastUpdateTimestamp=2", "")),
        succeeded("t", META_41.format("ONGOING")).replace("for t succeeded", "for u succeeded"),
        succeeded("t", META_41.format("ONGOING")).replace("epoch 7", "epoch seven"),
    ],
    ids=["failed", "unknown state", "garbled epoch", "no last update", "two ids", "garbled coordinator epoch"],
)
def test_a_line_not_in_these_words_is_unrecognized(line: str) -> None:
    assert parse_succeeded(line) == UNRECOGNIZED


def test_a_line_without_its_frame_is_malformed() -> None:
    assert parse_succeeded("Updating t's transaction state to x succeeded " + LOGGER) == MALFORMED
    assert parse_succeeded(succeeded("t", META_41.format("ONGOING"))[:-1]) == MALFORMED


def test_an_over_long_line_cut_in_its_partitions_is_still_read() -> None:
    """The follower keeps an over-long line's head and tail (exporter.sources.broker_log_tail): the
    producer's fields are in the head, the last update in the tail."""
    many = ", ".join(f"topic-{n}" for n in range(5000))
    line = succeeded("t-9", META_41.format("ONGOING").replace("[a-1, a-0]", f"[{many}]")).encode()
    cut = line[:1000] + b" ... " + line[-1000:]
    parser = BrokerLogParser()
    assert parser.feed([cut], UPDATED_MS + 100) == [
        TransitionAppended("t-9", S.ONGOING, 2, 0, UPDATED_MS, UPDATED_MS + 3, UPDATED_MS + 100)
    ]


def test_garbled_partial_and_unplaceable_lines_are_counted_and_lose_nothing_else() -> None:
    good = succeeded("t-1", META_41.format("ONGOING"))
    parser = BrokerLogParser()
    events = parser.feed(
        [
            good[: len(good) // 2].encode(),  # a partial line (a crash's): no logger, not a coordinator line
            b"\xff\xfe" + good.encode()[2:],  # garbled bytes
            succeeded("t-2", META_41.format("ONGOING"), time="25/11/2026 22:11:32").encode(),  # another layout
            good.encode(),
        ],
        UPDATED_MS + 50,
    )
    assert [e.transactional_id for e in events] == ["t-1"]
    assert (parser.unplaced, parser.malformed, parser.unrecognized) == (1, 1, 0)


def test_epoch_milliseconds_need_no_offset() -> None:
    parser = BrokerLogParser()
    (event,) = parser.feed([succeeded("t", META_41.format("ONGOING"), time=str(UPDATED_MS + 4)).encode()], 0)
    assert isinstance(event, TransitionAppended) and event.appended_ms == UPDATED_MS + 4

"""The coordinator's `succeeded` line (exporter.broker_log.lines.parse_succeeded), in every pinned
version's words, with the ids and lines a broker can write."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from exporter.broker_log.lines import (
    MALFORMED,
    TARGET_STATES,
    UNRECOGNIZED,
    TransitionLine,
    parse_succeeded,
    usual_succeeded,
)
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


@pytest.mark.parametrize("meta", [META_3, META_40, META_41], ids=["3.6-3.9", "4.0", "4.1+"])
def test_the_parsers_loop_reads_a_usual_line_as_its_general_path_does(meta: str) -> None:
    """feed() reads a usual `succeeded` line in its loop (usual_succeeded, the time placed from its
    bytes): the same events as its general path (parse_succeeded, the time decoded first) gives, a
    second's later lines read from the cached second included, in UTC+05:30 and in epoch ms."""
    state = "PrepareCommit" if meta is not META_41 else "PREPARE_COMMIT"
    times = ["2026-11-26 03:41:32,123", "2026-11-26 03:41:32,987", "2026-11-26 03:41:33.001", str(UPDATED_MS + 9)]
    lines = [succeeded(f"t-{n}", meta.format(state), time=time).encode() for n, time in enumerate(times)]
    general = BrokerLogParser()
    expected = []
    for line in lines:
        read = general._unusual_succeeded(line)  # (the general path's reading of any line)
        assert read is not None
        time, tid, state, producer_id, producer_epoch, last_update_ms = read
        appended_ms = general.times.place(time, last_update_ms, UPDATED_MS + 100)
        expected.append(
            TransitionAppended(tid, state, producer_id, producer_epoch, last_update_ms, appended_ms, UPDATED_MS + 100)
        )
    assert BrokerLogParser().feed(lines, UPDATED_MS + 100) == expected
    assert [e.appended_ms for e in expected] == [UPDATED_MS + 3, UPDATED_MS + 867, UPDATED_MS + 881, UPDATED_MS + 9]


def test_epoch_milliseconds_need_no_offset() -> None:
    parser = BrokerLogParser()
    (event,) = parser.feed([succeeded("t", META_41.format("ONGOING"), time=str(UPDATED_MS + 4)).encode()], 0)
    assert isinstance(event, TransitionAppended) and event.appended_ms == UPDATED_MS + 4


# What takes a line off usual_succeeded's path (or keeps it on it), by the part it changes.
_TWISTS = {
    "id": st.one_of(
        st.sampled_from(["a's b", "x for y", "z with coordinator epoch 3 for z", "订单-7", "a'b", "é", "a b", "a\tb"]),
        st.text(st.sampled_from("ab-_.' 7é订("), min_size=1, max_size=8),
    ),
    "second id": st.text(st.sampled_from("abz-_.07 '"), min_size=0, max_size=12),
    "state": st.sampled_from(["NOT_A_STATE", "ON GOING", "", "Ongoing", "PrepareEpochFence", "DEAD"]),
    "number": st.sampled_from(["x", "", "1 2", "٣", "+1", "-", "--1", "1_0"]),
    "coordinator epoch": st.sampled_from(["-1", "x", "", "٣", "1 for"]),
    "prefix": st.sampled_from(["[Transaction State Manager 12]:", "[x] ", "", "[]", "[a]:  ", "[a"]),
    "time": st.sampled_from(["1795644692123", "x]", "2026-11-25 22:11:32.123", "2026-11-25T22:11:32,123", ""]),
    "end": st.sampled_from(["\r", "\r\r", " ", ")", " (a b)"]),
    "partitions": st.sampled_from(["[a=1]", "Set(x-1, y-2)", "[a-1 ... b-2]", "[" + ", ".join(["t-0"] * 300) + "]"]),
    "garbled byte": st.integers(0, 600),
}
_USUAL_ID = st.text(st.sampled_from("abz-_.07"), min_size=1, max_size=12)
_NUMBER = st.integers(-(2**63), 2**63).map(str)


@settings(max_examples=1000, deadline=None)
@given(
    data=st.data(),
    meta=st.sampled_from([META_3, META_40, META_41]),
    tid=_USUAL_ID,
    state=st.sampled_from(sorted(TARGET_STATES)),
    numbers=st.tuples(_NUMBER, _NUMBER, _NUMBER, st.integers(0, 2**31).map(str)),
    twists=st.sets(st.sampled_from(sorted(_TWISTS)), max_size=2),
)
def test_the_bytes_path_reads_every_line_as_the_text_path_does(
    data: st.DataObject,
    meta: str,
    tid: str,
    state: str,
    numbers: tuple[str, str, str, str],
    twists: set[str],
) -> None:
    """usual_succeeded (one match for the usual line) gives what parse_succeeded gives for the
    line's text, for every line: usual ones, and ones with an unusual part or two (ids, states, numbers,
    prefixes, times, line ends, partitions, bytes that are not UTF-8)."""
    twist = {name: data.draw(_TWISTS[name], label=name) for name in twists}
    producer_id, producer_epoch, last_update, coordinator_epoch = numbers
    if "number" in twist:
        which = data.draw(st.integers(0, 2), label="which number")
        producer_id, producer_epoch, last_update = [
            twist["number"] if n == which else v for n, v in enumerate((producer_id, producer_epoch, last_update))
        ]
    body = (
        meta.format(twist.get("state", state))
        .replace("producerId=2,", f"producerId={producer_id},", 1)
        .replace("producerEpoch=0", f"producerEpoch={producer_epoch}")
        .replace("txnLastUpdateTimestamp=2", f"txnLastUpdateTimestamp={last_update}")
    )
    for usual in ("[a-1, a-0]", "Set(a-1, a-0)", "Set(a-0)"):
        body = body.replace(usual, twist.get("partitions", usual))
    first_id = twist.get("id", tid)
    text = (
        f"[{twist.get('time', '2026-11-25 22:11:32,123')}] DEBUG "
        f"{twist.get('prefix', '[Transaction State Manager 1]: ')}Updating {first_id}'s transaction state to {body} "
        f"with coordinator epoch {twist.get('coordinator epoch', coordinator_epoch)} for "
        f"{twist.get('second id', first_id)} succeeded {LOGGER}{twist.get('end', '')}"
    )
    line = text.encode()
    if "garbled byte" in twist:
        at = twist["garbled byte"]
        line = line[:at] + b"\xff" + line[at + 1 :]
    usual = usual_succeeded(line)
    if usual is not None:  # (else the parser reads the line's text with parse_succeeded itself)
        time, tid, state, producer_id, producer_epoch, last_update_ms = usual
        read = TransitionLine(tid, state, producer_id, producer_epoch, last_update_ms, time.decode())
        assert read == parse_succeeded(line.decode("utf-8", "replace").rstrip("\r"))

"""bench.clock_path: its `succeeded` lines are 4.4.0's, each naming its record, and every record of its
traffic is timed by its line."""

from __future__ import annotations

import re
from pathlib import Path

from bench.clock_path import run, succeeded_line, succeeded_line_cache, traffic
from exporter.broker_log.lines import usual_succeeded
from exporter.codec import decode_record

CORPUS_LINE = next(
    line
    for line in (Path(__file__).parents[1] / "sources" / "broker_log_corpus" / "4.4.0.log").read_bytes().split(b"\n")
    if b"transaction state to " in line
    and line.endswith(b" succeeded (kafka.coordinator.transaction.TransactionStateManager)")
)


def test_each_line_is_in_4_4_0s_words_and_names_its_records_fields() -> None:
    for record in traffic(30, 2)[0][:30]:
        line = succeeded_line(record)
        value = decode_record(record.key, record.value, record.offset, record.timestamp_ms, False).value
        assert value is not None
        usual = usual_succeeded(line)  # (in the usual words: read in the parser's loop)
        assert usual is not None
        fields = usual[2:]
        assert fields == (value.state, value.producer_id, value.producer_epoch, value.last_update_timestamp_ms)
        # The real line's fields, in its order, and its words around them.
        assert re.findall(rb"(\w+)=", line) == re.findall(rb"(\w+)=", CORPUS_LINE)
        assert _words(line) == _words(CORPUS_LINE)


def _words(line: bytes) -> list[bytes]:
    """The line without its time, ids and fields' values."""
    return re.sub(rb"=\[[^\]]*\]|=[^,\]]*|^\[[^\]]*\]|Updating \S+'s|for \S+ succeeded", b"", line).split()


def test_every_record_is_timed_by_its_line(tmp_path: Path) -> None:
    seconds = traffic(50, 2)
    for second in seconds:
        for record in second:
            succeeded_line_cache[id(record)] = succeeded_line(record)
    spent = run(seconds, True, tmp_path)  # (run asserts it: every record timed, none left waiting)
    assert set(spent) >= {"log read + parse", "records -> model"}

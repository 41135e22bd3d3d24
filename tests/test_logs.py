from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest

from exporter import logs


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def captured() -> Iterator[tuple[list[logging.LogRecord], logs.RepeatFilter, Clock]]:
    records: list[logging.LogRecord] = []
    clock = Clock()

    class Sink(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    sink = Sink()
    repeats = logs.RepeatFilter(60, emit=sink.handle, clock=clock)
    sink.addFilter(repeats)
    logger = logging.getLogger("test.repeats")
    logger.addHandler(sink)
    logger.propagate = False
    logger.setLevel(logging.INFO)
    yield records, repeats, clock
    logger.removeHandler(sink)
    logger.propagate = True


def messages(records: list[logging.LogRecord]) -> list[str]:
    return [r.getMessage() for r in records]


def test_identical_messages_within_the_window_are_counted_not_printed(captured) -> None:
    records, repeats, clock = captured
    log = logging.getLogger("test.repeats")
    for _ in range(5):
        log.warning("kafka client: %s", "broker down")
        clock.now += 1
    log.warning("kafka client: %s", "another message")
    assert messages(records) == ["kafka client: broker down", "kafka client: another message"]
    clock.now += 60
    log.warning("kafka client: %s", "broker down")
    assert messages(records)[-1] == "kafka client: broker down (repeated 4 times in the last 65 s)"
    assert records[-1].repeated == 4


def test_a_burst_that_stops_is_reported_by_the_next_record_or_flush(captured) -> None:
    records, repeats, clock = captured
    log = logging.getLogger("test.repeats")
    for _ in range(3):
        log.error("cannot read broker log")
    clock.now += 61
    log.info("something else")
    assert messages(records) == ["cannot read broker log", "cannot read broker log (repeated 2 times in the last 61 s)",
                                 "something else"]
    log.info("something else")
    repeats.flush()
    assert messages(records)[-1] == "something else (repeated 1 times in the last 0 s)"


def test_different_levels_or_loggers_are_not_collapsed(captured) -> None:
    records, _, _ = captured
    logging.getLogger("test.repeats").warning("same")
    logging.getLogger("test.repeats").error("same")
    logging.getLogger("test.repeats.child").warning("same")
    assert len(records) == 3


def test_window_zero_prints_everything() -> None:
    stream = io.StringIO()
    logs.configure("INFO", "text", repeat_seconds=0, stream=stream)
    try:
        for _ in range(3):
            logging.getLogger("x").info("again")
        assert stream.getvalue().count("again") == 3
    finally:
        logs.configure("WARNING", "text", stream=io.StringIO())


def test_json_format_one_object_per_line_with_exception() -> None:
    stream = io.StringIO()
    logs.configure("INFO", "json", repeat_seconds=60, stream=stream)
    try:
        log = logging.getLogger("txn_exporter")
        log.info("serving %s", "http://127.0.0.1:9464/metrics")
        try:
            raise ValueError("boom")
        except ValueError:
            log.exception("collecting failed")
        log.info("serving %s", "http://127.0.0.1:9464/metrics")
        logs.flush()
    finally:
        logs.configure("WARNING", "text", stream=io.StringIO())
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert [(e["level"], e["logger"], e["message"]) for e in lines] == [
        ("INFO", "txn_exporter", "serving http://127.0.0.1:9464/metrics"),
        ("ERROR", "txn_exporter", "collecting failed"),
        ("INFO", "txn_exporter", "serving http://127.0.0.1:9464/metrics (repeated 1 times in the last 0 s)"),
    ]
    assert "ValueError: boom" in lines[1]["exception"]
    assert lines[2]["repeated"] == 1
    assert lines[0]["time"].endswith("+00:00")

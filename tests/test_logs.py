from __future__ import annotations

import io
import json
import logging
import time
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
    records, _repeats, clock = captured
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
    assert messages(records) == [
        "cannot read broker log",
        "cannot read broker log (repeated 2 times in the last 61 s)",
        "something else",
    ]
    log.info("something else")
    repeats.flush()
    assert messages(records)[-1] == "something else (repeated once in the last 1 s)"


def test_a_single_repeat_says_once_never_1_times(captured) -> None:
    records, _, clock = captured
    log = logging.getLogger("test.repeats")
    log.warning("broker down")
    log.warning("broker down")
    clock.now += 60
    log.warning("broker down")
    assert messages(records) == ["broker down", "broker down (repeated once in the last 60 s)"]


def test_summaries_are_stamped_when_printed_and_printed_in_order(captured) -> None:
    """A summary printed on its own once the window is over carries the time it is printed, not the
    time of the last repeat it counts (which came before lines already printed since)."""
    records, repeats, clock = captured
    log = logging.getLogger("test.repeats")
    started = time.time()
    log.warning("broker down")
    log.warning("broker down")  # counted
    time.sleep(0.01)
    log.warning("something else")  # printed after the repeat
    clock.now += 61
    time.sleep(0.01)
    log.warning("a third thing")  # the window is over: the summary comes first, then this
    assert messages(records) == [
        "broker down",
        "something else",
        "broker down (repeated once in the last 61 s)",
        "a third thing",
    ]
    stamps = [r.created for r in records]
    assert stamps == sorted(stamps)
    assert records[2].created > records[1].created
    log.warning("a third thing")
    time.sleep(0.01)
    flushed = time.time()
    repeats.flush()
    assert records[-1].getMessage() == "a third thing (repeated once in the last 1 s)"
    assert records[-1].created >= flushed > started


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
        ("INFO", "txn_exporter", "serving http://127.0.0.1:9464/metrics (repeated once in the last 1 s)"),
    ]
    assert "ValueError: boom" in lines[1]["exception"]
    assert lines[2]["repeated"] == 1
    assert lines[0]["time"].endswith("+00:00")


@pytest.mark.parametrize(
    ("errors_logged", "expected"),
    [
        (False, [logging.DEBUG, logging.DEBUG, logging.WARNING, logging.ERROR, logging.CRITICAL]),
        (True, [logging.DEBUG, logging.DEBUG, logging.WARNING, logging.DEBUG, logging.DEBUG]),
    ],
)
def test_librdkafka_lines_go_through_logging_at_levels_that_fit(errors_logged, expected) -> None:
    """confluent-kafka calls `logger.log(level, "%s [%s] %s", facility, client, text)` with the
    syslog level mapped to logging's: DEBUG, INFO (librdkafka's info and notice), WARNING, ERROR,
    CRITICAL. Its info lines are narration (BGQUEUE); its errors are the client's error_cb's too."""
    seen: list[logging.LogRecord] = []

    class Sink(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(record)

    logger = logging.getLogger("test.librdkafka")
    sink = Sink()
    logger.addHandler(sink)
    logger.setLevel(logging.DEBUG)
    try:
        client = logs.kafka_client_logger("test.librdkafka", errors_logged=errors_logged)
        for level in (logging.DEBUG, logging.INFO, logging.WARNING, logging.ERROR, logging.CRITICAL):
            client.log(level, "%s [%s] %s", "BGQUEUE", "rdkafka#producer-1", "Purging 1 unserved events")
    finally:
        logger.removeHandler(sink)
    assert [r.levelno for r in seen] == expected
    assert seen[0].getMessage() == "BGQUEUE [rdkafka#producer-1] Purging 1 unserved events"

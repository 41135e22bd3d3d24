"""The coordinator's load lines (TransactionStateManager INFO, the same words 3.6 to 4.4: the corpus of
every pinned version holds them, tests/sources/test_broker_log_corpus.py), and the broker's start."""

from __future__ import annotations

from exporter.broker_log import BrokerLogParser
from exporter.broker_log.lines import UNRECOGNIZED, parse_entry
from exporter.contracts.events import CoordinatorLoadFinished, CoordinatorLoadStarted, CoordinatorStarting

TS = "[2026-11-24 05:38:32,496]"
MANAGER = "(kafka.coordinator.transaction.TransactionStateManager)"
LOADING = f"{TS} INFO [Transaction State Manager 1]: Loading transaction metadata from __transaction_state-17 at epoch 4 {MANAGER}"
FINISHED = (
    f"{TS} INFO [Transaction State Manager 1]: Finished loading 1021 transaction metadata from __transaction_state-17"
    f" in 2048 milliseconds, of which 3 milliseconds was spent in the scheduler. {MANAGER}"
)


def test_a_load_starts_and_finishes():
    assert parse_entry(LOADING) == CoordinatorLoadStarted(17, 4)
    assert parse_entry(FINISHED) == CoordinatorLoadFinished(17, transactions=1021, duration_ms=2048, scheduler_ms=3)


def test_the_load_lines_read_nothing_else():
    completed = f"{TS} INFO [Transaction State Manager 1]: Completed loading transaction metadata from __transaction_state-17 for coordinator epoch 4 {MANAGER}"
    unloaded = (
        f"{TS} INFO [Transaction State Manager 1]: Unloaded transaction metadata TxnMetadataCacheEntry(coordinatorEpoch=4,"
        f" numTransactionalEntries=2) for __transaction_state-17 on become-follower transition {MANAGER}"
    )
    assert parse_entry(completed) is None
    assert parse_entry(unloaded) is None
    # From another logger, the same words are not the coordinator's.
    assert parse_entry(LOADING.replace("TransactionStateManager", "GroupMetadataManager")) is None


def test_a_load_line_in_words_not_known_is_unrecognized():
    assert parse_entry(LOADING.replace("at epoch 4", "at epoch four")) == UNRECOGNIZED
    assert parse_entry(FINISHED.replace(" in 2048 milliseconds", " in 2.048 seconds")) == UNRECOGNIZED
    assert parse_entry(FINISHED.replace("__transaction_state-17", "__consumer_offsets-17")) == UNRECOGNIZED


def test_the_broker_starting_up():
    line = (
        f"{TS} INFO [TransactionCoordinator id=1] Starting up. (kafka.coordinator.transaction.TransactionCoordinator)"
    )
    assert parse_entry(line) == CoordinatorStarting()
    assert parse_entry(line.replace("Starting up.", "Startup complete.")) is None


def test_each_line_read_is_stamped_with_its_read_time():
    """A repeated line (the same partition and figures) comes from the parser's cache: each event still
    has the time its own line was read, from which a load's age is counted."""
    parser = BrokerLogParser()
    first = parser.feed([LOADING.encode()], now_ms=1_000)
    again = parser.feed([LOADING.replace(TS, "[2026-11-24 05:48:32,496]").encode(), FINISHED.encode()], now_ms=2_000)
    assert [e.seen_ms for e in first + again] == [1_000, 2_000, 2_000]
    assert first + again == [CoordinatorLoadStarted(17, 4), CoordinatorLoadStarted(17, 4), parse_entry(FINISHED)]
    assert (parser.malformed, parser.unrecognized) == (0, 0)

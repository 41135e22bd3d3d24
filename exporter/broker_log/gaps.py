"""What a broker log cannot carry, in words an operator can act on: the warnings the broker-log
source logs once each (exporter.sources.broker_log_tail), from what BrokerLogParser recorded. Without
them, a log the exporter cannot read looks like a healthy coordinator: every metric at 0."""

from __future__ import annotations

from collections.abc import Iterator

from exporter.broker_log.parser import LAYOUT_SAMPLE, BrokerLogParser

_SEE = "see deploy/README.md, 'The broker's log (--broker-log)'"
_LOGGING_LEVELS = {"INFO", "DEBUG", "TRACE"}


def gaps(parser: BrokerLogParser, already: set[str]) -> Iterator[tuple[str, str]]:
    """(key, message) for each gap seen so far whose key is not in `already` (same key, same gap)."""
    if "layout" not in already and parser.layout_sampled >= LAYOUT_SAMPLE:
        if not parser.layout_framed:
            yield (
                "layout",
                (
                    f"none of its first {LAYOUT_SAMPLE} lines is in Kafka's default layout `[%d] %p %m (%c)%n`, so "
                    f"nothing is read from it and every broker-log metric stays 0 ({_SEE}); its first line: "
                    f"{parser.layout_first_line}"
                ),
            )
        elif not parser.levels & _LOGGING_LEVELS:
            yield (
                "layout",
                (
                    f"its first lines are all {'/'.join(sorted(parser.levels))}: the coordinator logs marker retries and "
                    f"failures, final-append retries, elections and failed appends at INFO, so those metrics stay 0 ({_SEE})"
                ),
            )
    if "malformed" not in already and parser.malformed_sample is not None:
        yield (
            "malformed",
            (
                "a transaction-coordinator line not in Kafka's default layout `[%d] %p %m (%c)%n` was skipped and counted "
                'in txn_exporter_broker_log_skipped_lines_total{reason="malformed"} (further ones are only counted; '
                f"{_SEE}): {parser.malformed_sample}"
            ),
        )
    for logger, sample in parser.unrecognized_samples.items():
        if "unrecognized " + logger not in already:
            yield (
                "unrecognized " + logger,
                (
                    f"a {logger} line of a kind the exporter reads, in a format it does not know, was skipped and counted "
                    'in txn_exporter_broker_log_skipped_lines_total{reason="unrecognized"} (further ones are only '
                    f"counted): {sample}"
                ),
            )
    # Two, not one: started mid-file, the first INFO line's DEBUG line may be before the start.
    if "info-only" not in already and parser.append_failures_info_only >= 2 and not parser.append_failures_raw:
        yield (
            "info-only",
            (
                "failed __transaction_state appends are logged at INFO only: kafka_transaction_state_log_append_errors_total "
                "counts them by the coordinator's mapped error (e.g. COORDINATOR_NOT_AVAILABLE for NOT_ENOUGH_REPLICAS), "
                "not the raw append error, which only the DEBUG line carries: set the logger "
                f"kafka.coordinator.transaction.TransactionStateManager to DEBUG ({_SEE})"
            ),
        )

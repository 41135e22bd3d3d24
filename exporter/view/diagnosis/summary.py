"""A diagnosis's summary: one line naming the likeliest cause, and the runbook section it points to."""

from __future__ import annotations

from exporter.codec.states import PREPARE_STATES
from exporter.contracts.runbooks import APPEND_ERRORS, LATE, MARKER_FAILURES, MARKERS_PENDING
from exporter.view.diagnosis.causes import MARKER_PERMANENT, client_verdict
from exporter.view.document import CoordinatorPart, DiagnosedPartition, TransactionRow

PREPARES = tuple(state.name for state in PREPARE_STATES)


def summarize(
    row: TransactionRow, partitions: list[DiagnosedPartition], coordinator: CoordinatorPart, broker_log: bool
) -> tuple[str, str]:
    """(one line: the likeliest cause, the runbook section)."""
    state = row["state"]
    append_trouble = coordinator["append_errors"] or coordinator["cause"]
    if state in PREPARES:
        errored = [p for p in partitions if p["errors"]]
        if errored:
            first = max(errored, key=lambda p: p["errors"][0]["last_seen_ms"])
            error = first["errors"][0]
            section = MARKER_FAILURES if error["error"] in MARKER_PERMANENT else MARKERS_PENDING
            more = f" (and {len(errored) - 1} more partitions)" if len(errored) > 1 else ""
            return f"{first['partition']}{more}: {error['error']}: {_first_sentence(error['cause'])}", section
        troubled = [p for p in partitions if p["cause"]]
        if troubled:
            return f"{troubled[0]['partition']}: {troubled[0]['cause']}", MARKERS_PENDING
        if append_trouble:
            return (
                f"its markers may all be written, but the coordinator cannot append the final COMPLETE_* record: "
                f"{_coordinator_line(coordinator)}",
                APPEND_ERRORS,
            )
        if not broker_log:
            return (
                "no marker error is known: the exporter does not follow the coordinator's log (--broker-log); "
                "the partitions' leaders and ISRs look healthy",
                MARKERS_PENDING,
            )
        return (
            "no marker error read and the partitions look healthy: the coordinator may not reach their leaders "
            "(disconnects, `Cancelled in-flight WRITE_TXN_MARKERS request` in its log), or its final append is "
            "being retried (KafkaTransactionCompleteAppendRetries)",
            MARKERS_PENDING,
        )
    # ONGOING
    if row.get("late"):
        head = (
            "ONGOING past its own timeout: the coordinator should have aborted it "
            "(transaction.abort.timed.out.transaction.cleanup.interval.ms)"
        )
        if append_trouble:
            return f"{head}, but cannot append its PREPARE_ABORT: {_coordinator_line(coordinator)}", APPEND_ERRORS
        return f"{head}; {client_verdict(partitions, row)}", LATE
    if append_trouble:
        return f"its coordinator cannot append state changes: {_coordinator_line(coordinator)}", APPEND_ERRORS
    return "nothing wrong found", MARKERS_PENDING


def _first_sentence(text: str) -> str:
    end = text.find(". ")
    return text if end < 0 else text[: end + 1]


def _coordinator_line(coordinator: CoordinatorPart) -> str:
    if coordinator["append_errors"]:
        e = coordinator["append_errors"][0]
        return f"{coordinator['partition']}: {e['error']}: {e['cause']}"
    return f"{coordinator['partition']}: {coordinator['cause']}"

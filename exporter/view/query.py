"""The transactions view's query: its filters, and the JSON document every format renders.

The rows come from the model's in-flight query (CoordinatorModel.in_flight_transactions: the oldest
first, selected and built off the model's lock) and its last hanging scan.
"""

from __future__ import annotations

import math
import re
import urllib.parse
from dataclasses import dataclass
from typing import cast

from exporter.codec.states import IN_FLIGHT_STATES, TransactionState
from exporter.contracts.events import HangingScanCompleted
from exporter.contracts.hanging_rules import HANGING, abort_command, finding_row
from exporter.contracts.lifecycle import is_stuck_prepare
from exporter.model import CoordinatorModel, InFlightTransaction
from exporter.view.diagnosis.commands import hanging_advice
from exporter.view.document import Document, HangingRow, TransactionRow

DEFAULT_LIMIT = 100
MAX_LIMIT = 1000
# State filter names; HANGING selects the hanging-transaction scan's findings.
STATES = {state.name: int(state) for state in IN_FLIGHT_STATES}
HANGING_STATE = "HANGING"
# A number as an alert template prints {{ $value }} (123.4, 1.5e+06), with an optional unit. ASCII
# digits only: float() and int() take other scripts' digits, or refuse some that \d matches.
_AGE = re.compile(r"((?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)(ms|s|m|h)?", re.ASCII)
_UNIT_MS = {"ms": 1, "s": 1000, None: 1000, "m": 60_000, "h": 3_600_000}
MAX_AGE_MS = 100 * 365 * 24 * 3_600_000  # older than any record: beyond it, a typo
_LIMIT = re.compile(r"0*[0-9]{1,4}", re.ASCII)  # before int(): no conversion of thousands of digits
PARAMETERS = ("state", "min_age", "limit", "format")
MAX_PARAMETERS = 32


class QueryError(ValueError):
    """A bad filter: its message is one line, for a 400 or the terminal."""


@dataclass(frozen=True, slots=True)
class Query:
    states: frozenset[int] | None = None  # transaction state ids; None: all
    hanging: bool = True  # list the hanging scan's findings
    min_age_ms: int = 0
    limit: int = DEFAULT_LIMIT
    format: str | None = None  # "json", "html" or None (content negotiation)

    def state_names(self) -> list[str]:
        """The states it selects, by name, HANGING last."""
        names = sorted(n for n, s in STATES.items() if self.states is None or s in self.states)
        return names + ([HANGING_STATE] if self.hanging else [])

    def parameters(self, **changes: str) -> str:
        """This query as a URL query string (for links), with `changes` applied."""
        params: dict[str, str] = {}
        if self.states is not None or not self.hanging:
            params["state"] = ",".join(self.state_names())
        if self.min_age_ms:
            params["min_age"] = f"{self.min_age_ms}ms"
        if self.limit != DEFAULT_LIMIT:
            params["limit"] = str(self.limit)
        params.update(changes)
        return urllib.parse.urlencode(params)


def parse_query(query_string: str) -> Query:
    """QueryError (one line, of bounded length) for an unknown parameter or a bad value, whatever the
    input: every value is checked before it is converted."""
    states: set[int] | None = None
    hanging = True
    min_age_ms, limit, format_ = 0, DEFAULT_LIMIT, None
    seen_state = False
    for key, value in _pairs(query_string):
        if key not in PARAMETERS:
            raise QueryError(f"unknown parameter {_shown(key)}; known: {', '.join(PARAMETERS)}")
        if not value.strip():  # a form's empty field: the default
            continue
        if key == "state":
            if not seen_state:
                states, hanging, seen_state = set(), False, True
            for name in filter(None, (n.strip().upper() for n in value.split(","))):
                if name == HANGING_STATE:
                    hanging = True
                elif name in STATES:
                    states.add(STATES[name])  # type: ignore[union-attr]  # because a set since the first state (seen_state)
                else:
                    raise QueryError(f"state: {_shown(name)} is none of {', '.join([*STATES, HANGING_STATE])}")
        elif key == "min_age":
            min_age_ms = _age_ms(value)
        elif key == "limit":
            text = value.strip()
            if not _LIMIT.fullmatch(text) or not 1 <= int(text) <= MAX_LIMIT:
                raise QueryError(f"limit: {_shown(value)} is not a number from 1 to {MAX_LIMIT}")
            limit = int(text)
        else:
            if value not in ("json", "html"):
                raise QueryError(f"format: {_shown(value)} is neither json nor html")
            format_ = value
    frozen = None if states is None else frozenset(states)
    return Query(frozen, hanging, min_age_ms, limit, format_)


def _pairs(query_string: str) -> list[tuple[str, str]]:
    """The query's (name, value) pairs, decoded as a form's (`+` is a space); every field must be
    name=value (a blank value is kept)."""
    if not query_string:
        return []
    fields = query_string.split("&", MAX_PARAMETERS)
    if len(fields) > MAX_PARAMETERS:
        raise QueryError(f"bad query string: more than {MAX_PARAMETERS} parameters")
    pairs = []
    for field in fields:
        name, sep, value = field.partition("=")
        if not sep:
            raise QueryError(f"bad query string: {_shown(field)} is not name=value")
        pairs.append((urllib.parse.unquote_plus(name), urllib.parse.unquote_plus(value)))
    return pairs


def _age_ms(value: str) -> int:
    # An unescaped "+" of an exponent arrives as a space.
    match = _AGE.fullmatch(value.strip().replace(" ", "+"))
    if match is None:
        raise QueryError(f"min_age: {_shown(value)} is not an age (seconds, or 500ms, 90s, 5m, 2h)")
    ms = float(match[1]) * _UNIT_MS[match[2]]  # a float never raises: too large is inf
    if not math.isfinite(ms) or ms > MAX_AGE_MS:
        raise QueryError(f"min_age: {_shown(value)} is too large (at most 100 years)")
    return round(ms)


def _shown(text: str) -> str:
    return repr(text[:40] + ("..." if len(text) > 40 else ""))


def document(
    model: CoordinatorModel,
    query: Query,
    now_ms: int,
    late_padding_ms: int,
    bootstrap_servers: str,
    broker_log: bool,
) -> Document:
    """The view as one JSON-ready document (see `transaction_row`, `hanging_rows`)."""
    selection = model.in_flight_transactions(query.states, query.limit, query.min_age_ms, now_ms)
    scan = model.last_hanging_scan()
    hanging, hanging_matching = hanging_rows(scan, query, now_ms, bootstrap_servers)
    return {
        "now_ms": now_ms,
        "query": {
            "states": query.state_names(),
            "min_age_seconds": query.min_age_ms / 1000,
            "limit": query.limit,
        },
        "late_padding_seconds": late_padding_ms / 1000,
        "broker_log": broker_log,
        # When the last hanging-transaction scan completed (ms; None: no scan completed yet).
        "hanging_scan_ms": None if scan is None or not scan.completed_ms else scan.completed_ms,
        "in_flight_matching": selection.matching,
        "transactions": [transaction_row(txn, now_ms, late_padding_ms) for txn in selection.transactions],
        "hanging_scan": scan is not None,
        "hanging_matching": hanging_matching,
        "hanging": hanging,
    }


def transaction_row(txn: InFlightTransaction, now_ms: int, late_padding_ms: int) -> TransactionRow:
    deadline_ms = txn.start_ms + txn.timeout_ms
    ongoing = txn.state == TransactionState.ONGOING
    row: TransactionRow = {
        "transactional_id": txn.transactional_id,
        "state": txn.state.name,
        "producer_id": txn.producer_id,
        "producer_epoch": txn.producer_epoch,
        "transaction_version": txn.transaction_version,
        "state_entered_ms": txn.state_entered_ms,
        # In its state (since it entered it), and the transaction's duration (since its start, as
        # kafka-transactions.sh describe's TransactionDurationMs): equal for ONGOING.
        "age_seconds": round(max(0, now_ms - txn.state_entered_ms) / 1000, 3),
        "duration_seconds": round(max(0, now_ms - txn.start_ms) / 1000, 3),
        "transaction_start_ms": txn.start_ms,
        "transaction_timeout_ms": txn.timeout_ms,
        # kafka_transactions_late's rule: ONGOING past its own timeout plus the padding (None: PREPARE_*).
        "late": deadline_ms < now_ms - late_padding_ms if ongoing else None,
        # kafka_transactions_stuck_in_prepare's rule: PREPARE_* in that state longer than its own
        # timeout plus the padding (None: ONGOING).
        "stuck": None if ongoing else is_stuck_prepare(txn.state_entered_ms, txn.timeout_ms, now_ms, late_padding_ms),
        "coordinator_partition": txn.coordinator_partition,
        # The coordinator: the leader of that __transaction_state partition (filled in by the endpoint).
        "coordinator_broker": None,
        "partitions": list(txn.partitions),
        "marker_errors": [
            {"partition": m.partition, "error": m.error, "count": m.count, "last_seen_ms": m.last_seen_ms}
            for m in txn.marker_errors
        ],
        # Failed __transaction_state appends on that partition since the transaction entered its state.
        "append_errors": [
            {"target_state": a.target_state.name, "error": a.error, "count": a.count, "last_seen_ms": a.last_seen_ms}
            for a in txn.append_errors
        ],
        # Why it is stuck and what to do (exporter.view.diagnosis), for the rows that need one.
        "diagnosis": None,
    }
    if txn.partitions_error is not None:
        row["partitions_error"] = txn.partitions_error
    return row


def hanging_rows(
    scan: HangingScanCompleted | None, query: Query, now_ms: int, bootstrap_servers: str
) -> tuple[list[HangingRow], int]:
    """The last scan's hanging transactions that match, oldest first, with Kafka's abort command;
    (rows up to the limit, how many match)."""
    if scan is None or not query.hanging:
        return [], 0
    cutoff = now_ms - query.min_age_ms
    found = sorted(
        (f for f in scan.findings if f.verdict == HANGING and f.transaction.last_timestamp_ms <= cutoff),
        key=lambda f: f.transaction.last_timestamp_ms,
    )
    rows = []
    for finding in found[: query.limit]:
        # finding_row's fields first (HangingRow declares them), then the view's.
        row = cast(HangingRow, finding_row(finding, now_ms - finding.transaction.last_timestamp_ms))
        row["abort_command"] = abort_command(bootstrap_servers, finding.transaction)
        row["coordinator_broker"] = finding.coordinator_id
        advice = hanging_advice(row, bootstrap_servers)
        row["runbook"], row["commands"] = advice["runbook"], advice["commands"]
        rows.append(row)
    return rows, len(found)

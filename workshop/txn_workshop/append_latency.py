"""P4: the exporter's append-latency bound held to the coordinator's own clock, transition by transition
(tests/integration/broker_truth.py on every pinned version; bench/latency_under_load.py under load).

With `kafka.coordinator.transaction.TransactionStateManager` at TRACE the coordinator logs, for every
`__transaction_state` append of a state transition (the same text on 3.6 to 4.4, only `<meta>`'s
layout differs: `TxnTransitMetadata(...)` up to 4.0, `TxnTransitMetadata[...]` from 4.1):

- TRACE `Appending new metadata <meta> for transaction id <tid> with coordinator epoch <e> to the
  local transaction log`, when `appendRecords` returns (on one node after the append completed);
- DEBUG `Updating <tid>'s transaction state to <meta> with coordinator epoch <e> for <tid> succeeded`,
  from the append's completion callback.

`<meta>` names the producer id and epoch, the target state (`txnState=`) and
`txnLastUpdateTimestamp`, which the record's value carries too, so each line pairs with one record.
The coordinator's own append latency of a transition is the `succeeded` line's time minus the
record's timestamp (CreateTime, stamped when the coordinator built the record); the exporter's bound
is its receipt time minus the same timestamp (its DEBUG log `exporter.sources.topic_tail.records`).
Both clocks are this host's wall clock read in whole milliseconds (log4j truncates to the ms, the
exporter too), so `received - succeeded` is within 1 ms of the true difference either way, and a
true difference >= 0 never shows negative (truncation is monotonic).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import NamedTuple
from zoneinfo import ZoneInfo

from exporter.broker_log.lines import TARGET_STATES

_TIME = r"\[(?P<time>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\]"
_LOGGER = r" \(kafka\.coordinator\.transaction\.TransactionStateManager\)$"
_META = r"TxnTransitMetadata[(\[](?P<meta>.*)[)\]]"
SUCCEEDED = re.compile(
    _TIME
    + r" DEBUG \[Transaction State Manager \d+\]: Updating (?P<tid>.+?)'s transaction state to "
    + _META
    + r" with coordinator epoch (?P<epoch>\d+) for (?P=tid) succeeded"
    + _LOGGER
)
APPENDING = re.compile(
    _TIME
    + r" TRACE \[Transaction State Manager \d+\]: Appending new metadata "
    + _META
    + r" for transaction id (?P<tid>.+) with coordinator epoch (?P<epoch>\d+) to the local transaction log"
    + _LOGGER
)
_FIELDS = {
    "producer_id": re.compile(r"\bproducerId=(-?\d+)"),
    "producer_epoch": re.compile(r"\bproducerEpoch=(-?\d+)"),
    "last_update_ms": re.compile(r"\btxnLastUpdateTimestamp=(-?\d+)"),
}
_STATE = re.compile(r"\btxnState=(\w+)")
_OBSERVED = " DEBUG exporter.sources.topic_tail.records: live record "
_TIMED = " DEBUG exporter.model.append_clock.timed: timed "

# What the matcher needs of `txn-exporter run`: its DEBUG line for every live record, none of them
# suppressed as a repeat (and no hanging scan beside it).
EXPORTER_FLAGS = ("--log-level", "DEBUG", "--log-repeat-seconds", "0", "--hanging-scan-interval-seconds", "0")

# (transactional id, target state id, producer id, producer epoch, txnLastUpdateTimestamp, n): n counts
# the earlier transitions with the same first five in the same log. A producer can end one transaction
# and reach the same state in the next within one millisecond (seen at 1k transactions/s: two
# PREPARE_COMMITs of one id, both updated at the same ms); the coordinator appends them in order and
# the exporter receives them in order (one id, one partition), so the n-th of each log pair up.
Transition = tuple[str, int, int, int, int, int]
_Key = tuple[str, int, int, int, int]  # a Transition without its n


@dataclass(frozen=True)
class Matched:
    transition: Transition
    timestamp_ms: int  # the record's
    succeeded_ms: int  # the coordinator's `succeeded` line
    received_ms: int  # the exporter's receipt

    @property
    def coordinator_ms(self) -> int:
        return self.succeeded_ms - self.timestamp_ms

    @property
    def observed_ms(self) -> int:
        return self.received_ms - self.timestamp_ms

    @property
    def excess_ms(self) -> int:
        return self.received_ms - self.succeeded_ms


def _epoch_ms(text: str, zone: str | None = None) -> int:
    """log4j's `%d`: the JVM's local time, in `zone` (the JVM's user.timezone), else this host's."""
    naive = datetime.strptime(text, "%Y-%m-%d %H:%M:%S,%f")
    return round((naive if zone is None else naive.replace(tzinfo=ZoneInfo(zone))).timestamp() * 1000)


def _numbered(key: _Key, seen: dict[_Key, int]) -> Transition:
    """The key with how many times it was seen before in the same log (see Transition)."""
    n = seen.get(key, 0)
    seen[key] = n + 1
    return (*key, n)


def _transition(tid: str, meta: str, seen: dict[_Key, int]) -> Transition:
    values = {name: int(pattern.search(meta).group(1)) for name, pattern in _FIELDS.items()}  # type: ignore[union-attr]
    state = TARGET_STATES[_STATE.search(meta).group(1)]  # type: ignore[union-attr]
    return _numbered((tid, state, values["producer_id"], values["producer_epoch"], values["last_update_ms"]), seen)


def rolled_logs(log: Path) -> list[Path]:
    """``log`` and the files rolled from it (``log``.1, ``log``.<date>...), oldest first, as
    coordinator_lines takes them: by modification time, which orders log4j's numbered and dated
    rollovers alike."""
    return sorted(log.parent.glob(f"{log.name}*"), key=lambda path: path.stat().st_mtime)


def coordinator_lines(
    logs: list[Path], tids: set[str], zone: str | None = None
) -> tuple[dict[Transition, int], dict[Transition, int]]:
    """(transition -> time of its `succeeded` line, transition -> time of its `Appending` line), ms,
    for the transactional ids in `tids`; `logs` oldest first (a rolled server.log.1 before server.log),
    written by a JVM in `zone` (None: this host's)."""
    succeeded: dict[Transition, int] = {}
    appending: dict[Transition, int] = {}
    seen: tuple[dict[_Key, int], dict[_Key, int]] = ({}, {})
    for path in logs:
        for line in path.read_text(errors="replace").splitlines():
            if "TransactionStateManager" not in line:
                continue
            for pattern, into, keys in ((SUCCEEDED, succeeded, seen[0]), (APPENDING, appending, seen[1])):
                match = pattern.match(line)
                if match and match["tid"] in tids:
                    into[_transition(match["tid"], match["meta"], keys)] = _epoch_ms(match["time"], zone)
    return succeeded, appending


_DUMPED = re.compile(r"^\| offset: \d+ CreateTime: (-?\d+) .* key: (.*?) payload: (.*)$")
_DUMPED_TEXT = re.compile(
    r"^transaction_metadata::transactionalId=(.*)$|^producerId:(-?\d+),producerEpoch:(-?\d+),state=(\w+),.*"
    r"txnLastUpdateTimestamp=(-?\d+),"
)


def dumped_create_times(dump: str, tids: set[str]) -> dict[Transition, int]:
    """transition -> its record's CreateTime, as Kafka's DumpLogSegments --transaction-log-decoder
    prints `__transaction_state` (KafkaBroker.dump_transaction_log: text up to 4.0, JSON from 4.1), for
    the ids in `tids`. Numbered as coordinator_lines numbers: one id's records are in one partition,
    dumped in offset order, which is the order of its appends and of their lines."""
    created: dict[Transition, int] = {}
    seen: dict[_Key, int] = {}
    for line in dump.splitlines():
        match = _DUMPED.match(line)
        if match is None or match[3] == "<DELETE>":
            continue
        create_ms, key, payload = int(match[1]), match[2], match[3]
        if key.startswith("{"):
            tid = json.loads(key)["data"]["transactionalId"]
            if tid not in tids:
                continue
            data = json.loads(payload)["data"]
            fields = (
                data["transactionStatus"],
                data["producerId"],
                data["producerEpoch"],
                data["transactionLastUpdateTimestampMs"],
            )
        else:
            key_match, value_match = _DUMPED_TEXT.match(key), _DUMPED_TEXT.match(payload)
            if key_match is None or value_match is None or key_match[1] not in tids:
                continue
            tid = key_match[1]
            fields = (
                TARGET_STATES[value_match[4]],
                int(value_match[2]),
                int(value_match[3]),
                int(value_match[5]),
            )
        state, producer_id, producer_epoch, last_update_ms = fields
        created[_numbered((tid, state, producer_id, producer_epoch, last_update_ms), seen)] = create_ms
    return created


class Observed(NamedTuple):
    timestamp_ms: int  # the record's
    received_ms: int  # the exporter's receipt
    partition: int
    offset: int


def observed_records(exporter_log: Path, tids: set[str]) -> dict[Transition, Observed]:
    """transition -> how the exporter received its record, from its DEBUG log."""
    observed: dict[Transition, Observed] = {}
    seen: dict[_Key, int] = {}
    records: set[tuple[int, int]] = set()  # (partition, offset) of each record received
    for line in exporter_log.read_text(errors="replace").splitlines():
        _, found, payload = line.partition(_OBSERVED)
        if not found:
            continue
        fields = json.loads(payload)
        if fields["transactional_id"] not in tids or "state" not in fields:
            continue
        record = (fields["partition"], fields["offset"])
        assert record not in records, f"one record received twice: {line}"
        records.add(record)
        key = _logged_key(fields)
        observed[_numbered(key, seen)] = Observed(
            fields["timestamp_ms"], fields["received_ms"], fields["partition"], fields["offset"]
        )
    return observed


def _logged_key(fields: dict) -> _Key:
    """A transition's key as the exporter's DEBUG lines name its fields."""
    return (
        fields["transactional_id"],
        TARGET_STATES[fields["state"]],
        fields["producer_id"],
        fields["producer_epoch"],
        fields["last_update_ms"],
    )


def exporter_timed(exporter_log: Path, tids: set[str]) -> dict[Transition, tuple[int, str]]:
    """transition -> (append latency, the clock that timed it) as the exporter timed it, from its
    DEBUG log (exporter.model.append_clock's `timed` lines)."""
    timed: dict[Transition, tuple[int, str]] = {}
    seen: dict[_Key, int] = {}
    for line in exporter_log.read_text(errors="replace").splitlines():
        _, found, payload = line.partition(_TIMED)
        if not found:
            continue
        fields = json.loads(payload)
        if fields["transactional_id"] not in tids:
            continue
        key = _logged_key(fields)
        timed[_numbered(key, seen)] = (fields["latency_ms"], fields["clock"])
    return timed


def floor_receipts(path: Path) -> dict[tuple[int, int], int]:
    """(partition, offset) -> receipt (ms) of tests/integration/bare_reader.py's consumer."""
    receipts = {}
    for line in path.read_text().splitlines():
        partition, offset, received_ms = map(int, line.split())
        receipts[(partition, offset)] = received_ms
    return receipts


def match(
    succeeded: dict[Transition, int],
    observed: dict[Transition, Observed],
    floor: dict[tuple[int, int], int] | None = None,
) -> list[Matched]:
    """The transitions both logged and received; with `floor`, as the bare consumer received them."""
    matched = []
    for t, o in observed.items():
        if t in succeeded:
            received = o.received_ms if floor is None else floor.get((o.partition, o.offset))
            if received is not None:
                matched.append(Matched(t, o.timestamp_ms, succeeded[t], received))
    return matched


def percentile(values: list[int], q: float) -> int:
    """The nearest-rank percentile (the smallest value with at least q of the values at or below it)."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(len(ordered) * q) - 1)] if ordered else 0


def summary(matched: list[Matched]) -> dict:
    """Transitions, the coordinator's own append latency and the exporter's excess over it (p50, p99,
    max, ms), and how many were received before the `succeeded` line."""
    coordinator = [m.coordinator_ms for m in matched]
    excess = [m.excess_ms for m in matched]
    return {
        "transitions": len(matched),
        "coordinator_ms": [percentile(coordinator, q) for q in (0.5, 0.99, 1)],
        "excess_ms": [percentile(excess, q) for q in (0.5, 0.99, 1)],
        "received_before_succeeded": sum(e < 0 for e in excess),
        "min_excess_ms": min(excess, default=0),
    }

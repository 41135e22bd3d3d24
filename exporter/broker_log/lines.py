"""Pure parsers of single broker log lines (Kafka 3.6 to 4.4, default pattern `[%d] %p %m (%c)%n`).

`parse_entry(text)` takes the first line of one log entry (it starts with `[`) and returns what the
exporter reads from it, or None for every other line. `parse_fatal_continuation(text)` reads the
exception line that follows `Uncaught error in request completion:` when a marker write hit a fatal
error. Formats, by logger (package `kafka.coordinator.transaction`):

- TransactionStateManager, a failed transition append: DEBUG `Appending <tid>'s new metadata <meta>
  failed due to <ExceptionClass>`, then INFO `TransactionalId <tid> append transaction log for <meta>
  transition failed due to <ERROR>, ...`. `<meta>` carries `txnState=` as a display name up to 4.0
  (`PrepareCommit`), as the enum name from 4.1 (`PREPARE_COMMIT`).
- TransactionMarkerRequestCompletionHandler, per partition of a WriteTxnMarkers response:
  `Sending <tid>'s transaction marker for partition <tp> has failed with error <ExceptionClass>,
  retrying ...` (retriable), `... has permanently failed with error <ExceptionClass> ...` and
  `Sending <tid>'s transaction marker from partition <tp> has failed with  <ERROR>. This partition
  will be removed ...` (permanent).
- TransactionMarkerChannelManager: `Not available to append PendingCompleteTxn(transactionalId=<tid>,
  ...` (`PendingCompleteTxn[` from 4.4): the final COMPLETE_* append goes to the retry queue.
- TransactionCoordinator: `Elected as the txn coordinator for partition <n> at epoch <e>` /
  `Resigned as the txn coordinator for partition <n> at epoch <Some(e)|None>`; `Starting up.` when the
  broker (re)starts.
- TransactionStateManager, a partition's load into the coordinator's cache (INFO): `Loading transaction
  metadata from __transaction_state-<n> at epoch <e>` when the scheduled load starts, `Finished loading
  <k> transaction metadata from __transaction_state-<n> in <ms> milliseconds, of which <s> milliseconds
  was spent in the scheduler.` when its read ends (whether or not the partition is still this broker's).

`parse_succeeded(text)` reads the line the coordinator's clock is read from: TransactionStateManager
DEBUG `Updating <tid>'s transaction state to <meta> with coordinator epoch <e> for <tid> succeeded`,
written in a successful append's callback (the same words 3.6 to 4.4; `<meta>` as above).

AppInfoParser (package `org.apache.kafka.common.utils`, `...utils.internals` from 4.4) at the broker's
startup, INFO: `Kafka version: <version>`, the version the known bugs are matched on (a
BrokerVersionSeen, its text cut to exporter.contracts.kafka_versions.MAX_SHOWN characters).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Final, NamedTuple

from exporter.broker_log.errors import error_name
from exporter.codec.states import TransactionState
from exporter.contracts.events import (
    BrokerVersionSeen,
    CompleteAppendRetried,
    CoordinatorChanged,
    CoordinatorLoadFinished,
    CoordinatorLoadStarted,
    CoordinatorStarting,
    MarkerWriteFailed,
    MarkerWriteRetried,
)
from exporter.contracts.kafka_versions import MAX_SHOWN

MALFORMED: Final = "malformed"
UNRECOGNIZED: Final = "unrecognized"


class AppendFailureLine(NamedTuple):
    """One of the two lines a failed append writes; the parser pairs them into one event."""

    transactional_id: str
    target_state: int
    error: str
    # True for the DEBUG line (the raw append error), False for the INFO line (the mapped error).
    raw: bool


class TransitionLine(NamedTuple):
    """A `succeeded` line: the transition it names (as its record carries it) and the frame's time."""

    transactional_id: str
    target_state: int
    producer_id: int
    producer_epoch: int
    last_update_ms: int
    time: str  # as the log wrote it (exporter.broker_log.local_time places it)


Parsed = (
    AppendFailureLine
    | MarkerWriteRetried
    | MarkerWriteFailed
    | CompleteAppendRetried
    | CoordinatorChanged
    | CoordinatorLoadStarted
    | CoordinatorLoadFinished
    | CoordinatorStarting
    | BrokerVersionSeen
)

S = TransactionState
# `txnState=` values: display names (3.6 to 4.0) and enum names (4.1+). PrepareEpochFence is written
# as PrepareAbort; Dead is never appended through this path (it becomes a tombstone).
TARGET_STATES: dict[str, int] = {
    name: int(state)
    for name, state in {
        **{s.name: s for s in S if s <= S.COMPLETE_ABORT},
        "Empty": S.EMPTY,
        "Ongoing": S.ONGOING,
        "PrepareCommit": S.PREPARE_COMMIT,
        "PrepareAbort": S.PREPARE_ABORT,
        "CompleteCommit": S.COMPLETE_COMMIT,
        "CompleteAbort": S.COMPLETE_ABORT,
        "PrepareEpochFence": S.PREPARE_ABORT,
        "PREPARE_EPOCH_FENCE": S.PREPARE_ABORT,
    }.items()
}

# Regexes only ever run on short, anchored pieces: scanning a 600-character line with a regex that
# backtracks costs tens of microseconds, str.find a fraction of one (see bench/broker_log_lines.py).
_EXCEPTION = re.compile(r"[\w.$]+")
_WORD = re.compile(r"\w+")
_INTEGER = re.compile(r"-?[0-9]+")
_MARKER_PREFIX = re.compile(r"Sending (.*)'s transaction marker (for|from) partition (\S+) has ")
_COMPLETE_RETRY = re.compile(r"Not available to append PendingCompleteTxn[(\[]transactionalId=(.*?), coordinatorEpoch=")
# The epoch: a number when elected; Some(n) or None (Scala's Option) when resigned.
_COORDINATOR = re.compile(r"(Elected|Resigned) as the txn coordinator for partition (\d+) at epoch (?:Some\()?(\d+)?")
_LOADING = re.compile(r"Loading transaction metadata from __transaction_state-(\d+) at epoch (\d+)$")
_FINISHED = re.compile(
    r"Finished loading (\d+) transaction metadata from __transaction_state-(\d+) in (-?\d+) milliseconds,"
    r" of which (-?\d+) milliseconds was spent in the scheduler\.$"
)
_FATAL = re.compile(r"Received fatal error ([\w.$]+) while sending txn marker for (.*)")


def parse_entry(text: str) -> Parsed | str | None:
    """What a log entry's first line says: an event-like result, None (a line the exporter does not
    read), MALFORMED (no `[time] LEVEL message (logger)` frame) or UNRECOGNIZED (a line of a kind the
    exporter reads, in a format it does not know)."""
    # The frame, by hand: `[time] LEVEL ` + message + ` (logger)`.
    logger_at = text.rfind(" (")
    time_end = text.find("] ")
    level_end = text.find(" ", time_end + 2)
    if not text.endswith(")") or logger_at < 0 or time_end < 0 or not 0 <= level_end <= logger_at:
        return MALFORMED
    logger = text[logger_at + 2 : -1]
    if not logger or " " in logger or "(" in logger:
        return MALFORMED
    handler = _HANDLERS.get(logger.rpartition(".")[2])
    if handler is None:
        return None
    message = text[level_end + 1 : logger_at]
    if message.startswith("["):  # the class's log prefix: "[Transaction State Manager 1]: "
        ident_end = message.find("]")
        message = message[ident_end + 1 :].removeprefix(":").removeprefix(" ")
    return handler(message)


_UPDATING = "Updating "
_TO = "'s transaction state to "
_EPOCH = " with coordinator epoch "
_SUCCEEDED = " succeeded"


def parse_succeeded(text: str) -> TransitionLine | str:
    """A TransactionStateManager `succeeded` line (see the module's docstring), or MALFORMED (no
    `[time] LEVEL message (logger)` frame) or UNRECOGNIZED. The id is written twice, around `<meta>`,
    and may hold any text (`'s `, ` for ` included): the split is the one where both copies agree."""
    time_end = text.find("] ")
    level_end = text.find(" ", time_end + 2)
    logger_at = text.rfind(" (")
    if text[:1] != "[" or not text.endswith(")") or time_end < 0 or not 0 <= level_end <= logger_at:
        return MALFORMED
    message = text[level_end + 1 : logger_at]
    if message.startswith("["):  # "[Transaction State Manager 1]: "
        message = message[message.find("]") + 1 :].removeprefix(":").removeprefix(" ")
    if not (message.startswith(_UPDATING) and message.endswith(_SUCCEEDED)):
        return UNRECOGNIZED
    body = message[: -len(_SUCCEEDED)]
    at = body.rfind(_EPOCH)
    while at > len(_UPDATING):
        epoch, separator, tid = body[at + len(_EPOCH) :].partition(" for ")
        if separator and epoch.isdigit() and body.startswith(tid + _TO, len(_UPDATING)):
            transition = _transition(tid, body[len(_UPDATING) + len(tid) + len(_TO) : at], text[1:time_end])
            return UNRECOGNIZED if transition is None else transition
        at = body.rfind(_EPOCH, 0, at)
    return UNRECOGNIZED


# A `succeeded` line as every pinned version writes it, whole, for an id without spaces or quotes:
# one anchored match, the fields in their order. Where it matches, parse_succeeded reads the same
# fields (no other split of the ids, no earlier `producerEpoch=` or `txnState=`, no later
# `txnLastUpdateTimestamp=`; topic names hold no `=`).
_USUAL_SUCCEEDED = re.compile(
    rb"\[([^\]]*)\] [A-Z]+ \[Transaction State Manager [0-9]+\]: Updating ([^ ']+)'s transaction state to "
    rb"TxnTransitMetadata[\[(]producerId=(-?[0-9]+), (?:prevProducerId|previousProducerId|lastProducerId)=-?[0-9]+, "
    rb"(?:nextProducerId=-?[0-9]+, )?producerEpoch=(-?[0-9]+), lastProducerEpoch=-?[0-9]+, txnTimeoutMs=-?[0-9]+, "
    rb"txnState=(\w+), topicPartitions=[^=]*, txnStartTimestamp=-?[0-9]+, txnLastUpdateTimestamp=(-?[0-9]+)"
    rb"(?:, clientTransactionVersion=\w+)?[\])] with coordinator epoch [0-9]+ for ([^ ']+) succeeded \([\w$.]+\)\r*\Z"
)
_TARGET_STATES_BYTES = {name.encode(): state for name, state in TARGET_STATES.items()}


def usual_succeeded(line: bytes) -> tuple[bytes, str, int, int, int, int] | None:
    """(time as written, transactional id, target state, producer id and epoch, last update ms) of a
    `succeeded` line that is ASCII and in the usual words, in one match (a busy coordinator writes
    thousands a second); None for any other line, which parse_succeeded reads."""
    usual = _USUAL_SUCCEEDED.match(line)
    if usual is None or not line.isascii():
        return None
    time, tid, producer_id, producer_epoch, state_name, last_update_ms, tid_again = usual.groups()
    state = _TARGET_STATES_BYTES.get(state_name)
    if tid != tid_again or state is None:
        return None
    return time, tid.decode(), state, int(producer_id), int(producer_epoch), int(last_update_ms)


def _transition(tid: str, meta: str, time: str) -> TransitionLine | None:
    """The record's fields `<meta>` names: the producer's first (its head), the last update after the
    partitions (its tail, which an over-long line keeps too)."""
    state_at = meta.find("txnState=")
    state = _WORD.match(meta, state_at + 9) if state_at >= 0 else None
    producer_id = _number(meta, "producerId=", meta.find)
    producer_epoch = _number(meta, "producerEpoch=", meta.find)
    last_update = _number(meta, "txnLastUpdateTimestamp=", meta.rfind)
    if state is None or state[0] not in TARGET_STATES or None in (producer_id, producer_epoch, last_update):
        return None
    return TransitionLine(tid, TARGET_STATES[state[0]], producer_id, producer_epoch, last_update, time)  # type: ignore[arg-type]  # because None was ruled out above


def _number(meta: str, name: str, find: Callable[[str], int]) -> int | None:
    """The integer after `name` where `name` starts a field (not `lastProducerEpoch=` for
    `producerEpoch=`: the names are case-sensitive, and a field follows `(`, `[` or a space)."""
    at = find(name)
    if at <= 0 or meta[at - 1] not in "([ ":
        return None
    match = _INTEGER.match(meta, at + len(name))
    return None if match is None else int(match[0])


def parse_fatal_continuation(text: str) -> MarkerWriteFailed | None:
    """The `java.lang.IllegalStateException: Received fatal error <ExceptionClass> while sending txn
    marker for <tid>` line of the stack trace following `Uncaught error in request completion:`."""
    match = _FATAL.search(text)
    return None if match is None else MarkerWriteFailed(error_name(match[1]), match[2].rstrip())


def _between(message: str, start: str, middle: str, end: str) -> tuple[str, str, str] | None:
    """(a, b, rest) for `start a middle b end rest`, `end` searched from the right; None if absent."""
    if not message.startswith(start):
        return None
    middle_at = message.find(middle, len(start))
    end_at = message.rfind(end)
    if middle_at < 0 or end_at < middle_at + len(middle):
        return None
    return message[len(start) : middle_at], message[middle_at + len(middle) : end_at], message[end_at + len(end) :]


def _state_manager(message: str) -> Parsed | str | None:
    if "transition failed due to" in message:
        parts = _between(message, "TransactionalId ", " append transaction log for ", " transition failed due to ")
        pattern, raw = _WORD, False
    elif "'s new metadata " in message and " failed due to " in message:
        parts = _between(message, "Appending ", "'s new metadata ", " failed due to ")
        pattern, raw = _EXCEPTION, True
    else:
        return _load(message)
    if parts is None:
        return UNRECOGNIZED
    tid, metadata, rest = parts
    error = pattern.match(rest)
    state_at = metadata.find("txnState=")
    state = _WORD.match(metadata, state_at + 9) if state_at >= 0 else None
    if error is None or state is None or state[0] not in TARGET_STATES:
        return UNRECOGNIZED
    return AppendFailureLine(tid, TARGET_STATES[state[0]], error_name(error[0]), raw)


def _load(message: str) -> Parsed | str | None:
    if message.startswith("Loading transaction metadata from "):
        match = _LOADING.match(message)
        return UNRECOGNIZED if match is None else CoordinatorLoadStarted(int(match[1]), int(match[2]))
    if message.startswith("Finished loading "):
        match = _FINISHED.match(message)
        if match is None:
            return UNRECOGNIZED
        return CoordinatorLoadFinished(int(match[2]), int(match[1]), int(match[3]), int(match[4]))
    return None


def _completion_handler(message: str) -> Parsed | str | None:
    if "transaction marker" not in message or "failed with" not in message:
        return None
    prefix = _MARKER_PREFIX.match(message)
    if prefix is None:
        return UNRECOGNIZED
    rest = message[prefix.end() :]
    tid, partition = prefix[1], prefix[3]
    if prefix[2] == "for":
        if rest.startswith("failed with error ") and (error := _EXCEPTION.match(rest, 18)):
            if rest.startswith(", retrying", error.end()):
                return MarkerWriteRetried(error_name(error[0]), tid, partition)
        elif rest.startswith("permanently failed with error ") and (error := _EXCEPTION.match(rest, 30)):
            return MarkerWriteFailed(error_name(error[0]), tid, partition)
    elif rest.startswith("failed with ") and (error := _WORD.match(rest.lstrip()[12:].lstrip())):
        return MarkerWriteFailed(error_name(error[0]), tid, partition)
    return UNRECOGNIZED


def _channel_manager(message: str) -> Parsed | str | None:
    if not message.startswith("Not available to append"):
        return None
    match = _COMPLETE_RETRY.match(message)
    return UNRECOGNIZED if match is None else CompleteAppendRetried(match[1])


def _coordinator(message: str) -> Parsed | str | None:
    if message == "Starting up.":
        return CoordinatorStarting()
    if "as the txn coordinator for partition" not in message:
        return None
    match = _COORDINATOR.match(message)
    if match is None:
        return UNRECOGNIZED
    return CoordinatorChanged(int(match[2]), match[1] == "Elected", None if match[3] is None else int(match[3]))


_VERSION = "Kafka version: "


def _app_info(message: str) -> Parsed | str | None:
    if not message.startswith(_VERSION):
        return None  # its other startup lines (commitId, startTimeMs) and its shutdown line
    return BrokerVersionSeen(message[len(_VERSION) : len(_VERSION) + MAX_SHOWN].strip())


# By the logger's class name (the package moved for some classes in 4.x; the class names did not).
_HANDLERS = {
    "TransactionStateManager": _state_manager,
    "TransactionMarkerRequestCompletionHandler": _completion_handler,
    "TransactionMarkerChannelManager": _channel_manager,
    "TransactionCoordinator": _coordinator,
    "AppInfoParser": _app_info,
}

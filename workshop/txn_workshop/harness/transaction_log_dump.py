"""Kafka's own reading of `__transaction_state`: the records DumpLogSegments --transaction-log-decoder
prints (KafkaBroker.dump_transaction_log), as (partition, offset, transactional id, state name).

The tests compare the exporter with these: truth from Kafka's decoder, never from the exporter's own.
Its two output styles (versions.KafkaVersion.transaction_log_dump):

- text (up to 4.0): `key: transaction_metadata::transactionalId=<tid> payload: ...,state=CompleteCommit,...`
- json (from 4.1): `key: {"type":"0","data":{"transactionalId":"<tid>"}} payload: {... "transactionStatus":4 ...}`

A tombstone's payload is `<DELETE>` (its state None).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Literal, NamedTuple

from exporter.codec import TransactionState

# Kafka's TransactionState ids and names (coordinator/transaction/TransactionState), by hand: not
# the exporter's own table, which these records check.
_BY_ID = (
    "EMPTY",
    "ONGOING",
    "PREPARE_COMMIT",
    "PREPARE_ABORT",
    "COMPLETE_COMMIT",
    "COMPLETE_ABORT",
    "DEAD",
    "PREPARE_EPOCH_FENCE",
)
# 3.x prints a state's display name (PrepareCommit), 4.x its enum name (PREPARE_COMMIT).
BY_DISPLAY_NAME = {state.name.title().replace("_", ""): state.name for state in TransactionState}
_RECORD = re.compile(r"^\| offset: (\d+) .* key: (.*?) payload: (.*)$")
_TEXT_KEY = re.compile(r"^transaction_metadata::transactionalId=(.*)$")
_TEXT_STATE = re.compile(r",state=(\w+),")


class DumpedRecord(NamedTuple):
    partition: int
    offset: int
    transactional_id: str
    state: str | None  # None: a tombstone


def dumped_records(dump: str, style: Literal["text", "json"]) -> list[DumpedRecord]:
    records: list[DumpedRecord] = []
    partition = -1
    for line in dump.splitlines():
        if line.startswith("Dumping "):  # "Dumping /.../__transaction_state-7/000...0.log"
            partition = int(Path(line.removeprefix("Dumping ").strip()).parent.name.rsplit("-", 1)[1])
            continue
        match = _RECORD.match(line)
        if match is None:
            continue
        offset, key, payload = match.groups()
        if style == "text":
            tid_match = _TEXT_KEY.match(key)
            state_match = None if payload == "<DELETE>" else _TEXT_STATE.search(payload)
            if tid_match is None or (state_match is None and payload != "<DELETE>"):
                raise ValueError(f"not a transaction-log record of DumpLogSegments: {line!r}")
            tid = tid_match.group(1)
            state = None if state_match is None else BY_DISPLAY_NAME[state_match.group(1)]
        else:
            tid = json.loads(key)["data"]["transactionalId"]
            state = None if payload == "<DELETE>" else _BY_ID[json.loads(payload)["data"]["transactionStatus"]]
        records.append(DumpedRecord(partition, int(offset), tid, state))
    return records

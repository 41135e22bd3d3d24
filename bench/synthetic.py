"""Synthetic `__transaction_state` traffic for the benchmarks: transactional ids cycling through
ONGOING -> PREPARE_COMMIT -> COMPLETE_COMMIT (1 in 50 aborts), spread over 50 partitions the way
Kafka spreads them, encoded as Kafka 4.x writes them (value v1, 2 topics x 3 partitions)."""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass

from exporter.codec import TransactionLogValue, TransactionState, encode_key, encode_value

PARTITIONS = 50
S = TransactionState


def partition_of(tid: str, partitions: int = PARTITIONS) -> int:
    h = 0
    for ch in tid:
        h = (31 * h + ord(ch)) & 0xFFFFFFFF
    h = h - (1 << 32) if h >= 1 << 31 else h
    return 0 if h == -(1 << 31) else abs(h) % partitions


@dataclass(slots=True)
class RawRecord:
    partition: int
    key: bytes
    value: bytes | None
    offset: int
    timestamp_ms: int


def transaction_cycles(tids: int, transactions: int, start_ms: int = 1_700_000_000_000, seed: int = 1) -> Iterator[RawRecord]:
    """`transactions` transactions of 3 records each, round-robin over `tids` ids, 1 ms apart."""
    rng = random.Random(seed)
    names = [f"payments-service-{i:07d}" for i in range(tids)]
    keys = [encode_key(n) for n in names]
    partition = [partition_of(n) for n in names]
    offsets = [0] * PARTITIONS
    touched = {"orders": [0, 1, 2], "ledger": [3, 4, 5]}
    now = start_ms
    for n in range(transactions):
        i = n % tids
        abort = rng.random() < 0.02
        steps = (S.ONGOING, S.PREPARE_ABORT if abort else S.PREPARE_COMMIT, S.COMPLETE_ABORT if abort else S.COMPLETE_COMMIT)
        for state in steps:
            value = TransactionLogValue(
                1, 1000 + i, 3, 60_000, state,
                {} if state >= S.COMPLETE_COMMIT else touched, now, now - 20,
            )  # fmt: skip
            p = partition[i]
            yield RawRecord(p, keys[i], encode_value(value), offsets[p], now)
            offsets[p] += 1
            now += 1

"""Synthetic `__transaction_state` traffic for the benchmarks, spread over 50 partitions the way
Kafka spreads transactional ids, encoded as a Kafka 4.3+ coordinator writes it (value v1).

Two shapes (`shape=`):

- "mix" (the default; report it first): records as busy clusters write them. Each id starts with
  the EMPTY of its InitProducerId (null partitions, start timestamp -1), then cycles
  ONGOING -> PREPARE_* -> COMPLETE_* (2% aborts). The ONGOING and PREPARE records name 1 to 3
  topics with 1 to 3 partitions each (drawn per transaction among the id's own topics); COMPLETE
  records carry an empty array. Half the ids are pre-TV2 clients (librdkafka, Java before 4.0) and
  half TV2 clients (Java 4.x), whose records carry different tagged fields:
    pre-TV2: PreviousProducerId only (= the producer id: a 4.3+ coordinator writes the id's current
             producer id there on every transition); the epoch stays put between transactions.
    TV2:     PreviousProducerId and ClientTransactionVersion 2 on ONGOING, PREPARE_* and
             COMPLETE_*, the epoch bumped by one at every PREPARE_* (KIP-890); the EMPTY of a new
             id carries PreviousProducerId only (the coordinator creates the id at TV0).
  Read from Kafka 4.4.0's TransactionLog.valueToBytes (EMPTY writes null partitions, previous and
  next producer id set from v1 on, ClientTransactionVersion always; tagged fields are written when
  not default) and TransactionMetadata.prepareTransitionTo (PreviousProducerId = current id).
- "uniform": what every benchmark used before, kept as the second line: ONGOING -> PREPARE_COMMIT
  -> COMPLETE_COMMIT (1 in 50 aborts), no EMPTY, every ONGOING/PREPARE value naming the same
  2 topics x 3 partitions, no tagged fields.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass

from exporter.codec import TransactionLogValue, TransactionState, encode_key, encode_value

PARTITIONS = 50
SHAPES = ("mix", "uniform")
S = TransactionState
# Topic names of the mix: lengths from 5 to 28 bytes, as applications name them.
_TOPICS = (
    "orders",
    "payments",
    "ledger",
    "inventory-events",
    "shipments",
    "customer-profile-updates",
    "fraud-scores",
    "audit",
    "billing.invoices",
    "notifications-outbox",
    "stock-reservations",
    "refunds",
    "cart-events-v2",
    "pricing",
    "order-lines.compacted",
    "settlements-eu-west-1",
)
_TOPIC_PARTITIONS = 12


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


def transaction_cycles(
    tids: int, transactions: int, start_ms: int = 1_700_000_000_000, seed: int = 1, shape: str = "mix"
) -> Iterator[RawRecord]:
    """`transactions` transactions of 3 records each (plus, in the mix, one EMPTY per id before its
    first), round-robin over `tids` ids, 1 ms apart."""
    if shape not in SHAPES:
        raise ValueError(f"shape {shape!r}: one of {SHAPES}")
    cycles = _uniform if shape == "uniform" else _mix
    return cycles(tids, transactions, start_ms, seed)


def _uniform(tids: int, transactions: int, start_ms: int, seed: int) -> Iterator[RawRecord]:
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
        steps = (
            S.ONGOING,
            S.PREPARE_ABORT if abort else S.PREPARE_COMMIT,
            S.COMPLETE_ABORT if abort else S.COMPLETE_COMMIT,
        )
        for state in steps:
            value = TransactionLogValue(
                version=1,
                producer_id=1000 + i,
                producer_epoch=3,
                transaction_timeout_ms=60_000,
                state=state,
                partitions={} if state >= S.COMPLETE_COMMIT else touched,
                last_update_timestamp_ms=now,
                start_timestamp_ms=now - 20,
            )
            p = partition[i]
            yield RawRecord(p, keys[i], encode_value(value), offsets[p], now)
            offsets[p] += 1
            now += 1


def _mix(tids: int, transactions: int, start_ms: int, seed: int) -> Iterator[RawRecord]:
    rng = random.Random(seed)
    names = [f"payments-service-{i:07d}" for i in range(tids)]
    keys = [encode_key(n) for n in names]
    partition = [partition_of(n) for n in names]
    # Per id: its client kind (odd ids TV2), its topics, its producer epoch.
    tv2 = [i % 2 == 1 for i in range(tids)]
    own_topics = [rng.sample(_TOPICS, 3) for _ in range(tids)]
    epochs = [0] * tids
    offsets = [0] * PARTITIONS
    now = start_ms

    def emit(i: int, value: TransactionLogValue) -> RawRecord:
        p = partition[i]
        record = RawRecord(p, keys[i], encode_value(value), offsets[p], now)
        offsets[p] += 1
        return record

    for n in range(transactions):
        i = n % tids
        pid = 1000 + i
        if n < tids:  # the id's InitProducerId: EMPTY, created at TV0 whatever the client
            yield emit(
                i,
                TransactionLogValue(
                    version=1,
                    producer_id=pid,
                    producer_epoch=0,
                    transaction_timeout_ms=60_000,
                    state=S.EMPTY,
                    partitions=None,
                    last_update_timestamp_ms=now,
                    start_timestamp_ms=-1,
                    previous_producer_id=pid,
                ),
            )
            now += 1
        abort = rng.random() < 0.02
        topics = {
            topic: sorted(rng.sample(range(_TOPIC_PARTITIONS), rng.randint(1, 3)))
            for topic in rng.sample(own_topics[i], rng.randint(1, 3))
        }
        version = 2 if tv2[i] else 0
        epoch = epochs[i]
        bumped = epoch + 1 if tv2[i] else epoch  # TV2: a new epoch at every EndTxn
        start = now
        steps: tuple[tuple[S, int, dict[str, list[int]]], ...] = (
            (S.ONGOING, epoch, topics),
            (S.PREPARE_ABORT if abort else S.PREPARE_COMMIT, bumped, topics),
            (S.COMPLETE_ABORT if abort else S.COMPLETE_COMMIT, bumped, {}),
        )
        for state, e, parts in steps:
            yield emit(
                i,
                TransactionLogValue(
                    version=1,
                    producer_id=pid,
                    producer_epoch=e,
                    transaction_timeout_ms=60_000,
                    state=state,
                    partitions=parts,
                    last_update_timestamp_ms=now,
                    start_timestamp_ms=start,
                    previous_producer_id=pid,
                    client_transaction_version=version,
                ),
            )
            now += 1
        epochs[i] = bumped % 32_000  # (a real client would rotate its producer id before 32767)

"""What a `__transaction_state` record's transition from its id's previous state does besides the
state, as bit flags looked up in ACTIONS[old][new] (ABSENT for none or a tombstone): a table lookup per
record instead of branches (CoordinatorModel's record path)."""

from __future__ import annotations

from exporter.codec.states import IN_FLIGHT_STATES, PREPARE_STATES, TransactionState
from exporter.model.partition import ABSENT

# What a transition from state `old` to `new` (ABSENT for none/tombstone) does besides the state:
# bit flags, looked up as ACTIONS[old][new]. The two completion flags are 4 and 8 so that
# `(action >> 3) & 1` indexes (commit, abort) sinks.
LEAVES_PENDING = 1
ENTERS_PENDING = 2
PENDING = LEAVES_PENDING | ENTERS_PENDING
COMPLETES_COMMIT = 4
COMPLETES_ABORT = 8
COMPLETES = COMPLETES_COMMIT | COMPLETES_ABORT
LEAVES_ONGOING = 16
ENTERS_ONGOING = 32  # also ONGOING -> ONGOING (partitions added): the deadline is rewritten
ONGOING = LEAVES_ONGOING | ENTERS_ONGOING
ENDS_TRANSACTION = 64  # ONGOING -> PREPARE_*: the transaction's duration is known
ENTERS_IN_FLIGHT = ENTERS_ONGOING | ENTERS_PENDING
LEAVES_IN_FLIGHT_STATE = 128  # from ONGOING or PREPARE_* to another state: out of that state's dict


def _action(old: int, new: int) -> int:
    """The flags of a transition from `old` to `new`."""
    action = (LEAVES_PENDING if old in PREPARE_STATES else 0) | (ENTERS_PENDING if new in PREPARE_STATES else 0)
    if (old, new) == (TransactionState.PREPARE_COMMIT, TransactionState.COMPLETE_COMMIT):
        action |= COMPLETES_COMMIT
    if (old, new) == (TransactionState.PREPARE_ABORT, TransactionState.COMPLETE_ABORT):
        action |= COMPLETES_ABORT
    if new == TransactionState.ONGOING:
        action |= ENTERS_ONGOING
    elif old == TransactionState.ONGOING:
        action |= LEAVES_ONGOING
        if new in PREPARE_STATES:
            action |= ENDS_TRANSACTION
    if old in IN_FLIGHT_STATES and new != old:
        action |= LEAVES_IN_FLIGHT_STATE
    return action


ACTIONS = tuple(tuple(_action(old, new) for new in range(ABSENT + 1)) for old in range(ABSENT + 1))

"""Transaction coordinator states, by the id the coordinator writes in TransactionStatus: the one
definition every floor above uses."""

from enum import IntEnum


class TransactionState(IntEnum):
    # Names are the 4.1+ enum names, which KIP-1344 uses for its `target-state` label.
    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    # Never written by a broker (DEAD becomes a tombstone, PREPARE_EPOCH_FENCE is written as
    # PREPARE_ABORT), but valid ids: decode them rather than call the record corrupt.
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7


# The states of a transaction waiting for its markers: ended by its client or the coordinator, not
# yet completed.
PREPARE_STATES = (TransactionState.PREPARE_COMMIT, TransactionState.PREPARE_ABORT)
# The states of a transaction in flight: begun and not yet completed.
IN_FLIGHT_STATES = (TransactionState.ONGOING, *PREPARE_STATES)

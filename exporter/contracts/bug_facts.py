"""What the exporter knows of one stuck, late or hanging transaction, as the known-bug table's
predicates read it (exporter.contracts.known_bugs); pure values, filled in by the view's diagnosis.

Facts come from three places, and a row of the table says which it needs:
- the `__transaction_state` records and the Admin API (state and its age, producer epoch, the
  transaction version, the ISR against min.insync.replicas, the hanging scan): always there;
- the coordinator's own log (`--broker-log`): its loads and elections of the row's
  `__transaction_state` partition (`CoordinatorLog`), only when the exporter reads the log of the
  broker that coordinates the row; else `coordinator_log` is None and `coordinator_log_missing` says why;
- the Kafka version of the broker each bug lives on (`versions`, by role: the coordinator for a
  coordinator bug, the data partition's leader for a produce-path bug); a role missing: that broker's
  version is not known, and its bugs are not matched.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from exporter.contracts.kafka_versions import BrokerVersion

# The rows of the view a bug can explain.
STUCK = "stuck"  # PREPARE_* held longer than its own timeout (plus the padding)
LATE = "late"  # ONGOING past its own timeout (plus the padding): the coordinator has not aborted it
HANGING = "hanging"  # an open transaction on a data partition no coordinator will complete (the hanging scan)

# The broker whose version a bug's row is matched on.
COORDINATOR = "coordinator"
PARTITION_LEADER = "partition leader"

NO_BROKER_LOG = "the exporter does not read the coordinator's log (--broker-log)"
# The top of the producer epoch (Java's Short.MAX_VALUE): a producer id's epochs are spent by then.
MAX_PRODUCER_EPOCH = 32767


@dataclass(frozen=True, slots=True)
class CoordinatorLog:
    """What the coordinator's log showed of the row's `__transaction_state` partition, as the
    exporter read it (times are when the exporter read each line, ms)."""

    loading_since_ms: int | None = None  # its load under way (`Loading ...` read, `Finished loading` not yet)
    last_load_ms: int | None = None  # when its latest load started
    # When it was last reloaded at the epoch of its previous load here, with no resignation between
    # (a reload without a leadership change).
    last_same_epoch_reload_ms: int | None = None


@dataclass(frozen=True, slots=True)
class BugFacts:
    """One row of the view: `kind` (STUCK, LATE or HANGING) and what is known of it."""

    kind: str
    state: str  # ONGOING, PREPARE_COMMIT, PREPARE_ABORT; "HANGING" for a hanging row
    now_ms: int
    # When it entered its state (ms; None: unknown, e.g. a hanging row's, whose coordinator has none).
    state_entered_ms: int | None = None
    producer_epoch: int | None = None
    # The records' ClientTransactionVersion (0 where they carry none: before 4.0, or a TV0 client); None: unknown.
    transaction_version: int | None = None
    versions: Mapping[str, BrokerVersion] = field(default_factory=dict)
    # The ordinary cause the diagnosis found (the ISR below min.insync.replicas, a broker down, no
    # leader): when set, it explains the row and no bug is claimed.
    ordinary_cause: str | None = None
    coordinator_log: CoordinatorLog | None = None
    coordinator_log_missing: str = NO_BROKER_LOG
    # When a marker error for the transaction was last read from the coordinator's log (ms; None: none).
    last_marker_error_ms: int | None = None
    coordinator_partition: int | None = None  # its `__transaction_state` partition
    coordinator_broker: int | None = None


@dataclass(frozen=True, slots=True)
class BugContext:
    """What the known-bug check of a view's rows draws on beyond each row."""

    # Each broker's version as learned (an unknown one: a BrokerVersion whose text says why); a broker
    # missing: not learned.
    versions: Mapping[int, BrokerVersion] = field(default_factory=dict)
    # What the coordinator's log showed, by `__transaction_state` partition (one missing: nothing
    # seen of it); None: the exporter reads no broker log.
    coordinator_logs: Mapping[int, CoordinatorLog] | None = None
    log_broker: int | None = None  # the broker whose log the exporter reads (None: its own, id unknown)

    def coordinator_log(self, partition: int, coordinator: int | None) -> tuple[CoordinatorLog | None, str]:
        """(what the coordinator's log showed of `partition`, or None and why it is not known)."""
        if self.coordinator_logs is None:
            return None, NO_BROKER_LOG
        if coordinator is not None and self.log_broker is not None and coordinator != self.log_broker:
            return None, f"the coordinator is broker {coordinator}, whose log this exporter does not read"
        return self.coordinator_logs.get(partition, CoordinatorLog()), ""

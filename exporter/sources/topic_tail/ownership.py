"""Which `__transaction_state` partitions the tail follows, read from the topic's metadata (when,
and what it answers), the rule for a new cluster's first records, and fencing by leader epoch.

Ownership: by default the exporter follows the partitions whose leader is the broker it runs
beside (that broker is their transaction coordinator); with `all_partitions`, every partition.
Metadata is re-read every `metadata_refresh_seconds` (or at once when `refresh_ownership_soon()` is
called, e.g. on a coordinator elected/resigned log line): partitions that move in are assigned and
replayed from the beginning; partitions that move out are drained (read on to the end of the epochs
this exporter's broker led there: counting.py), then unassigned and revoked, so the model drops their
state and every series they fed.

One exception to replay: a cluster's first records. When this exporter, before it ever saw
`__transaction_state`, found it absent, nothing in the topic can predate that moment, so the
partitions it then takes are live from their first record, if that record was appended since (by its
timestamp; the sidecar shares the broker's clock): one from before means the broker answered wrongly,
and the partition is replayed. The rule is not applied to a topic that disappears after it
was seen, nor to partitions without a leader for a while: a restarting broker answers so, while the
exporter beside another broker may still be reading those records. While the topic is absent or a
partition leaderless, ownership is read again every second.

Fencing: a record counts once, by the exporter beside the broker that appended it as leader, known
by its batch's leader epoch (counting.py). A live record of an epoch newer than any this exporter's
broker is known to have led (between a leader moving and the next ownership read the client follows
the partition to its new leader) is not taken until ownership has been read again: if another broker
leads the partition, it is drained (and the record, of a newer leader, ends the drain); if this
exporter's broker does, the epoch its leader answers in is its own, and the partition is refetched
from the record, counted if its epoch is one this broker led.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from confluent_kafka import KafkaError

from exporter.sources.topic_tail.topic import TOPIC, log

_RETRY_SECONDS = 1.0


class OwnershipError(Exception):
    """The exporter cannot tell which partitions to follow (a configuration problem)."""


class Ownership:
    """The partitions to follow from each metadata read, when the next read is due, and the leader
    epoch each followed partition's records are held to."""

    def __init__(
        self,
        bootstrap_servers: str,
        *,
        broker_id: int | None,
        all_partitions: bool,
        refresh_seconds: float,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._bootstrap_servers = bootstrap_servers
        self.broker_id = broker_id
        self._all_partitions = all_partitions
        self._refresh_seconds = refresh_seconds
        self._clock = clock
        self._next_read = 0.0
        # Readiness waits for a first complete view of ownership (a starting cluster has no leaders
        # yet, and "owns nothing" would read as ready).
        self.complete_view = False
        # When the exporter, never having seen the topic, first found it absent (ms); then, once it
        # exists, its partitions whose records from that time on are live (until their first record
        # is read, or another broker is seen leading them).
        self._topic_seen = False
        self._topic_absent_since_ms: int | None = None
        self.created_since_ms: dict[int, int] = {}
        # Followed partitions whose live record of a newer epoch (at their next offset) waits for
        # ownership to be read again -> that epoch.
        self.fenced: dict[int, int] = {}
        self.fenced_ms: dict[int, int] = {}  # when each was fenced (wall clock, ms)
        # Each partition's leader, as the last metadata read answered; with all_partitions, the broker
        # the bootstrap address names, when it names one (whose log --broker-log reads).
        self._leaders: dict[int, int] = {}
        self._beside: int | None = None

    def due(self, now: float) -> bool:
        """Whether a metadata read is due at `now`; if so, the next is due a refresh interval later
        (unless what it answers asks again sooner)."""
        if now < self._next_read:
            return False
        self._next_read = now + self._refresh_seconds
        return True

    def wait(self, longest: float, now: float) -> float:
        """How long a poll with nothing to follow may wait at `now`: at most `longest`, and no later than
        the next metadata read is due (a topic still absent is asked for again a second later)."""
        return max(0.0, min(longest, self._next_read - now))

    def read_soon(self) -> None:
        """Reads ownership again at the next poll."""
        self._next_read = 0.0

    def retry_soon(self, now: float) -> None:
        """Reads ownership again within a second of `now`, if not due before."""
        self._next_read = min(self._next_read, now + _RETRY_SECONDS)

    def owned(self, metadata: Any) -> set[int] | None:
        """The partitions to follow, by `metadata` (the topic's, just read; a topic-level access
        error is the caller's to tell); None while ownership is not known yet, and nothing changes."""
        topic = metadata.topics.get(TOPIC)
        error = None if topic is None else topic.error
        if topic is None or (error is not None and error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART):
            # The topic is created on the first transaction: nothing to follow yet, not an outage.
            if not self._topic_seen and self._topic_absent_since_ms is None:
                # (Not after it was seen: a restarting broker may answer so for a while.)
                self._topic_absent_since_ms = self._now_ms()
            self._next_read = self._clock() + _RETRY_SECONDS
            self.complete_view = True
            return set()
        leaderless = {p for p, pm in topic.partitions.items() if pm.leader < 0}
        if topic.partitions:  # (a topic being created may come without them)
            self._note_created(topic.partitions)
        if leaderless:
            self.retry_soon(self._clock())
        if error is not None or not metadata.brokers or (leaderless and not self.complete_view):
            # A cluster still starting (no brokers, no leaders, LEADER_NOT_AVAILABLE): ownership is
            # not known yet, so nothing changes until it is; ask again soon.
            log.info(
                "ownership of %s not known yet (%s); asking again", TOPIC, error or f"leaderless {sorted(leaderless)}"
            )
            self._next_read = self._clock() + _RETRY_SECONDS
            return None
        self.complete_view = True
        self._leaders = {p: pm.leader for p, pm in topic.partitions.items()}
        if self._all_partitions:
            owned = set(topic.partitions) - leaderless
            if self._beside is None:
                self._beside = self._broker_beside(metadata)
        else:
            if self.broker_id is None:
                self.broker_id = self._discover_broker_id(metadata)
            owned = {p for p, pm in topic.partitions.items() if pm.leader == self.broker_id}
        for partition in set(self.created_since_ms) - owned - leaderless:
            # Led by another broker: its own exporter sees what its coordinator appends.
            del self.created_since_ms[partition]
        return owned

    def here(self, partition: int) -> bool:
        """Whether this exporter's broker leads `partition` (always, unless all_partitions: then only
        if the bootstrap address names one broker and the last metadata read named it the leader)."""
        return not self._all_partitions or (self._beside is not None and self._leaders.get(partition) == self._beside)

    def _note_created(self, partitions: dict) -> None:
        """The topic exists: if this exporter saw it absent first, nothing in it predates that."""
        self._topic_seen = True
        if self._topic_absent_since_ms is not None:
            self.created_since_ms = dict.fromkeys(partitions, self._topic_absent_since_ms)
            self._topic_absent_since_ms = None

    def _now_ms(self) -> int:
        return int(self._clock() * 1000)

    def _broker_beside(self, metadata: Any) -> int | None:
        """The broker this exporter runs beside, when the cluster makes it unambiguous: the only one,
        or the only one the bootstrap address names."""
        brokers = metadata.brokers
        if len(brokers) == 1:
            return int(next(iter(brokers)))
        wanted = {address.strip() for address in self._bootstrap_servers.split(",")}
        matches = {b.id for b in brokers.values() if f"{b.host}:{b.port}" in wanted}
        return matches.pop() if len(matches) == 1 else None

    def _discover_broker_id(self, metadata: Any) -> int:
        beside = self._broker_beside(metadata)
        if beside is not None:
            return beside
        brokers = metadata.brokers
        raise OwnershipError(
            f"cannot tell which of brokers {sorted(brokers)} this exporter runs beside from "
            f"bootstrap servers {self._bootstrap_servers!r}: pass --broker-id N, or --all-partitions"
        )

    def live(self, partition: int) -> None:
        """`partition` replayed (or had nothing to): no more a new topic's partition."""
        self.created_since_ms.pop(partition, None)

    def forget(self, partition: int) -> None:
        """`partition` is followed no more."""
        self.created_since_ms.pop(partition, None)
        self.fenced.pop(partition, None)
        self.fenced_ms.pop(partition, None)

    def fence(self, partition: int, offset: int, epoch: int, newest: int) -> None:
        """A live record of `partition` (at `offset`, its next) was appended in leader `epoch`, newer
        than the `newest` this exporter's broker is known to have led: it waits for ownership to be
        read again, at the next poll."""
        log.info(
            "%s-%d: offset %d was appended by the leader of epoch %d (this broker's newest known: %d); it is "
            "taken once ownership is read again, if this exporter's broker leads the partition still",
            TOPIC,
            partition,
            offset,
            epoch,
            newest,
        )
        self.fenced[partition] = epoch
        self.fenced_ms[partition] = self._now_ms()
        self.read_soon()

    def lift(self, partitions: list[int]) -> None:
        """Fenced `partitions` whose fences are settled (counting.py): the caller refetches them from
        their next offset."""
        for partition in partitions:
            del self.fenced[partition]
            self.fenced_ms.pop(partition, None)

"""Which `__transaction_state` records this exporter counts, so that the exporters of a cluster count
each record exactly once, through failovers, without asking each other.

Beside one broker (the default), a record is counted by the exporter beside the broker that appended
it as the partition's leader. Every batch carries the leader epoch it was appended in, and the
exporter learns which epochs its broker led, per partition: its coordinator's `Elected as the txn
coordinator for partition N at epoch E` lines (with --broker-log; a coordinator's epoch is its
partition's leader epoch) and the epoch its broker answers in as the partition's leader (ListOffsets).
A broker may lead several epochs in a row (in ZooKeeper mode, and in KRaft below metadata.version
3.6-IV0, a follower's failure bumps the epoch without a move). So the new leader's exporter counts its
own epochs' records even when it reads them in the replay of a takeover, and the old leader's exporter
reads the partition on to the end of its broker's last epoch there (a drain: exporter.sources.topic_tail.tail).

Each partition also has a floor: the offset below which this exporter has decided every record,
counted or not, so reading a partition again (taken back after a drain) counts nothing twice. At the
exporter's start it is the high watermark of the partitions its broker leads then: what came before
predates it.

With --all-partitions one exporter reads every partition and counts every record above the floor,
whatever its epoch.
"""

from __future__ import annotations

from collections import deque

_NONE: frozenset[int] = frozenset()


class CountingRule:
    """The epochs this exporter's broker led and each partition's floor (see the module's docstring)."""

    def __init__(self, every_epoch: bool) -> None:
        self.every_epoch = every_epoch
        self._led: dict[int, set[int]] = {}
        self._newest: dict[int, int] = {}
        self._floor: dict[int, int] = {}
        # (partition, epoch) learned on another thread (the broker log's), taken on the tail's: a
        # deque's append and popleft are atomic.
        self._handed: deque[tuple[int, int]] = deque()

    def hand(self, partition: int, epoch: int) -> None:
        """Any thread: this exporter's broker was elected the partition's coordinator in `epoch`."""
        self._handed.append((partition, epoch))

    def take_handed(self) -> None:
        """The tail's thread: learns what was handed since the last call."""
        handed = self._handed
        while handed:
            self.learn(*handed.popleft())

    def learn(self, partition: int, epoch: int) -> None:
        """This exporter's broker led `partition` in `epoch`."""
        self._led.setdefault(partition, set()).add(epoch)
        if epoch > self._newest.get(partition, -1):
            self._newest[partition] = epoch

    def counts(self, partition: int, epoch: int | None, offset: int) -> bool:
        """Whether this exporter counts the record at `offset`, appended in leader `epoch`."""
        if offset < self._floor.get(partition, 0):
            return False
        return self.every_epoch or epoch in self._led.get(partition, _NONE)

    def newest(self, partition: int) -> int:
        """The newest epoch this exporter's broker is known to have led the partition in (-1: none)."""
        return self._newest.get(partition, -1)

    def led(self, partition: int) -> bool:
        return partition in self._newest

    def decided(self, partition: int, offset: int) -> None:
        """Every record of `partition` below `offset` is decided: never counted again."""
        if offset > self._floor.get(partition, 0):
            self._floor[partition] = offset

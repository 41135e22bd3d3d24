"""Which `__transaction_state` records this exporter counts, so that the exporters of a cluster count
each record exactly once, through failovers, without asking each other.

Beside one broker (the default), a record is counted by the exporter beside the broker that appended
it as the partition's leader. Every batch carries the leader epoch it was appended in, and the
exporter learns which epochs its broker led, per partition: its coordinator's `Elected as the txn
coordinator for partition N at epoch E` lines (with --broker-log; a coordinator's epoch is its
partition's leader epoch) and the epoch its broker answers in as the partition's leader (ListOffsets).
A broker may lead several epochs in a row (in ZooKeeper mode, and in KRaft below metadata.version
3.6-IV0, a follower's failure bumps the epoch without a move), and the coordinator writes no elected
line for such a bump: its broker log is the proof that the run was unbroken. A broker that stops
leading a partition resigns it (a `Resigned` line) or dies (a `Starting up.` line when it comes
back); so once the log has been read past a record of a newer epoch (`broker_log_read`) and shows
neither since the newest epoch learned, every epoch up to the one the broker answers in now was its
own (`settle`). Without the log only the epoch answered is learned. The new leader's exporter
counts its own epochs' records even when it reads them in the replay of a takeover, and the old
leader's exporter reads the partition on to the end of its broker's last epoch there (a drain:
drains.py).

Each partition also has a floor: the offset below which this exporter has decided every record,
counted or not, so reading a partition again (taken back after a drain) counts nothing twice. At the
exporter's start it is the high watermark of the partitions its broker leads then: what came before
predates it.

With --all-partitions one exporter reads every partition and counts every record above the floor,
whatever its epoch.
"""

from __future__ import annotations

from collections import deque
from typing import Any

_NONE: frozenset[int] = frozenset()


class CountingRule:
    """The epochs this exporter's broker led and each partition's floor (see the module's docstring)."""

    def __init__(self, every_epoch: bool) -> None:
        self.every_epoch = every_epoch
        self._led: dict[int, set[int]] = {}
        self._newest: dict[int, int] = {}
        self._floor: dict[int, int] = {}
        # Partitions whose run of epochs led broke (a resignation, a restart) since their newest.
        self._broken: set[int] = set()
        self._log_read_ms: int | None = None  # every broker log line written before it was read
        # What the broker log told, from its thread, taken in order on the tail's: a deque's append
        # and popleft are atomic. ("elected", partition, epoch), ("resigned", partition),
        # ("restarted",), ("read", ms).
        self._handed: deque[tuple[Any, ...]] = deque()

    def hand(self, *told: Any) -> None:
        """Any thread: a line of the broker's log (see `_handed`)."""
        self._handed.append(told)

    def take_handed(self) -> None:
        """The tail's thread: learns what was handed since the last call."""
        handed = self._handed
        while handed:
            told = handed.popleft()
            if told[0] == "elected":
                self.learn(told[1], told[2])
            elif told[0] == "resigned":
                self._broken.add(told[1])
            elif told[0] == "restarted":
                self._broken.update(self._newest)
            else:
                self._log_read_ms = told[1]

    def learn(self, partition: int, epoch: int) -> None:
        """This exporter's broker led `partition` in `epoch`."""
        self._led.setdefault(partition, set()).add(epoch)
        if epoch > self._newest.get(partition, -1):
            self._newest[partition] = epoch
            self._broken.discard(partition)

    def settle(self, partition: int, fenced_epoch: int, answered_epoch: int | None, fenced_ms: int) -> bool:
        """A record of `fenced_epoch`, newer than the partition's newest known, waited for this
        broker, its leader still, to answer: in `answered_epoch` (None: it does not say, the
        record's). Learns whose epochs they were; False while the broker log has not been read past
        the record (asked again)."""
        if answered_epoch is None or answered_epoch == fenced_epoch:
            self.learn(partition, fenced_epoch)
            return True
        if self._log_read_ms is None:  # no broker log: the epochs between are unknown
            self.learn(partition, answered_epoch)
            return True
        if self._log_read_ms < fenced_ms:
            return False
        if partition in self._broken:
            self.learn(partition, answered_epoch)
        else:  # bumped without a move: every epoch up to the answered one was this broker's
            for epoch in range(self.newest(partition) + 1, answered_epoch + 1):
                self.learn(partition, epoch)
        return True

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

"""Drains: the partitions this exporter's broker no longer leads, read on, from their new leaders, to
the end of the last epoch the broker led there (counting.py), their records counted here while the new
leaders' exporters show them.

A drain ends when the partition's new leader answers in a newer epoch with a high watermark the drain
has read to. A leader whose high watermark lags the start of its epoch does not answer (KIP-207), so
the watermark answered is never below the end of this broker's epoch: what a leader before appended
and the new one kept. The drain reads past it only the new leader's records, applied and not counted.
(A record of a newer epoch read in the drain ends it too: the tail.) A drain no leader lets end, the
partition offline, is cut after LIMIT_SECONDS, logged.
"""

from __future__ import annotations

from collections.abc import Mapping

from exporter.sources.topic_tail.topic import TOPIC, log

# How often the new leaders are asked where the drains end.
CHECK_SECONDS = 1.0
LIMIT_SECONDS = 120.0

# A partition's leader's answer: its high watermark and the epoch it answered in (None: not said).
Answer = tuple[int, int | None]


class Drains:
    """The draining partitions, each with the last epoch this broker led there and since when."""

    def __init__(self) -> None:
        self.partitions: dict[int, tuple[int, float]] = {}
        self._next_check = 0.0

    def __bool__(self) -> bool:
        return bool(self.partitions)

    def __contains__(self, partition: object) -> bool:
        return partition in self.partitions

    def start(self, partition: int, last_epoch: int, now: float) -> None:
        self.partitions[partition] = (last_epoch, now)
        self._next_check = 0.0  # (asked at once: an idle partition may be read to its end)

    def forget(self, partition: int) -> None:
        self.partitions.pop(partition, None)

    def due(self, now: float) -> bool:
        """Whether the leaders are to be asked where the drains end; if so, the next time is set."""
        if now < self._next_check:
            return False
        self._next_check = now + CHECK_SECONDS
        return True

    def ended(
        self, answers: Mapping[int, Answer | None], next_offsets: Mapping[int, int], now: float
    ) -> list[tuple[int, str]]:
        """The drains that end, by their leaders' `answers` and the offsets read to, with how."""
        ended = []
        for partition, (last_epoch, since) in sorted(self.partitions.items()):
            answer = answers.get(partition)
            read_to = next_offsets.get(partition, 0)
            if answer is not None and answer[1] is not None and answer[1] > last_epoch:
                if read_to >= answer[0]:
                    ended.append((partition, f"read to offset {answer[0]}"))
            elif now - since > LIMIT_SECONDS:
                log.warning(
                    "%s-%d: no leader let its drain end within %.0f s (offline?); records of this broker's epoch "
                    "%d after offset %d are not counted here",
                    TOPIC,
                    partition,
                    LIMIT_SECONDS,
                    last_epoch,
                    read_to,
                )
                ended.append((partition, "cut"))
        return ended

"""The live source: follows `__transaction_state` partitions with confluent-kafka and yields events.

TransactionLogTail (tail.py) runs the polls and coordinates its parts: which partitions it follows
and the leader epochs their records are held to (ownership.py), the history of a partition newly
followed (replay.py), the two clients and which one fetches (fetch_pattern.py), Kafka's connection
failures logged while they last (outage_log.py).

The consumer uses manual assignment and never commits or joins a group: it needs Describe and Read
on the topic only. The group id is required by the client but unused.
"""

from exporter.sources.topic_tail.tail import TransactionLogTail

__all__ = ["TransactionLogTail"]

"""kafka-python's private parts that the workshop's `unregistered` workload reaches into
(txn_workshop.harness.workload._unregistered), checked without brokers: a release that renames one
fails here by name, not as a workload that never reproduces its bug."""

from __future__ import annotations

from kafka import KafkaProducer


def test_the_producers_transaction_manager_has_what_the_workload_replaces_and_reads() -> None:
    # api_version given: the producer makes no connection to learn it.
    producer = KafkaProducer(bootstrap_servers=["127.0.0.1:9"], transactional_id="t", api_version=(3, 6))
    try:
        manager = getattr(producer, "_transaction_manager", None)
        assert manager is not None, "KafkaProducer has no `_transaction_manager`"
        assert callable(getattr(manager, "maybe_add_partition_to_transaction", None)), (
            "TransactionManager has no `maybe_add_partition_to_transaction`"
        )
        assert isinstance(getattr(manager, "_partitions_in_transaction", None), set), (
            "TransactionManager has no `_partitions_in_transaction` set"
        )
    finally:
        producer.close(timeout=1)

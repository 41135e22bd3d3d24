"""kafka-txn-exporter: Kafka transaction-coordinator metrics as a sidecar."""

__version__ = "0.1.0"

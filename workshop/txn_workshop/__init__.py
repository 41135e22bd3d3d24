"""kafka-txn-exporter's workshop: the broker harness (txn_workshop.harness) and the demo."""

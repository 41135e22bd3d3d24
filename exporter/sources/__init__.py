"""Sources: each yields typed events (exporter.contracts.events) from one place Kafka writes to."""

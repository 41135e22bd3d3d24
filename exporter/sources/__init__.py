"""Sources: each yields typed events (exporter.sources.events) from one place Kafka writes to."""

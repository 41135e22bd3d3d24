"""Each setting's default, stated once. The settings' schema (exporter.config.schema) gives them to
its fields; the parts below the config that take a setting as an argument (the topic tail, the
latency recorders, the collector, the hanging scan, the OTLP pusher, the logs, the probe) default
to the same value from here, since they stand on lower floors and may not import the config
(docs/architecture.md). So do the parts around the exporter that name its port or its scrape job:
the `txn-exporter transactions` command, the demo, the dashboards' and rules' queries (the mixin's
`jobSelector`); the files that cannot import it (the Dockerfile, deploy/'s manifests, the example
Prometheus configuration) are held to it by tests. Plain values, importing nothing:
`import exporter.config` loads no Kafka client for them."""

from __future__ import annotations

from typing import Final

PORT: Final = 9464  # the exporter's HTTP port: /metrics, /healthz, /readyz, /transactions
LISTEN: Final = f"0.0.0.0:{PORT}"
# The job Prometheus scrapes the exporters under: the rules and dashboards select their series by it,
# and `txn-exporter transactions --prometheus` finds the exporters among its targets.
SCRAPE_JOB: Final = "kafka-txn-exporter"
METADATA_REFRESH_SECONDS: Final = 30.0
# The fetch-timed mode's resolution: the smallest whose bill in place, in the deployment shape, is at
# most 10% of its broker at 10 transactions a second a broker and 5% at 50 (6.5% and 2.8% there; 10
# ms cost 26% and 14%; docs/benchmarks.md, "The fetch-timed mode's resolution"). Users can ask for 10.
LATENCY_RESOLUTION_MS: Final = 100
FRESHNESS_SECONDS: Final = 1.0
# On SIGTERM, how long the exporter may read on the partitions its stopping broker led, to the end of
# their epochs (exporter.sources.topic_tail's drains), before it exits.
SHUTDOWN_DRAIN_SECONDS: Final = 10.0
LATENCY_WINDOW_SECONDS: Final = 300.0
LOG_LEVEL: Final = "INFO"
LOG_FORMAT: Final = "text"
LOG_REPEAT_SECONDS: Final = 60.0
LATE_TRANSACTION_PADDING_SECONDS: Final = 300.0  # KIP-664's
HANGING_SCAN_MAX_PARTITIONS: Final = 1000
HANGING_MAX_TRANSACTION_TIMEOUT_SECONDS: Final = 900.0  # the brokers' transaction.max.timeout.ms default
OTLP_INTERVAL_SECONDS: Final = 60.0

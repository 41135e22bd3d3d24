"""The data pipeline on Spark: transitions, lifecycles, pending-markers history, per-transactional-id
forensics and a Prometheus backfill, from `__transaction_state` (live clusters or segment files).

Modules: session (the SparkSession), sources (Kafka and segment-file inputs), decode (the
project's codec in Arrow batches), tables (lifecycles and the derived tables), stream (Structured
Streaming with a state table), backfill (OpenMetrics), report (HTML).
"""

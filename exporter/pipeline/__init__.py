"""The data pipeline on Spark: transitions, lifecycles, pending-markers history, per-transactional-id
forensics and a Prometheus backfill, from `__transaction_state` (live clusters or segment files).

Modules: session (the SparkSession), sources (Kafka and segment-file inputs), decode (the
project's codec in Arrow batches), tables (lifecycles and the derived tables), stream (Structured
Streaming with a state table), backfill (OpenMetrics), report (HTML).

They need the `spark` extra (`pip install 'kafka-txn-exporter[spark]'`: pyspark, pyarrow, pandas,
numpy, matplotlib), which the sidecar's wheel installs without: decode, lifecycles and tables import
pyarrow and numpy at their top, the others pyspark where they use it. Three import none of it:
errors, maven and connector_jars (Spark's Kafka connector resolved through Maven), which the
command, the workshop and deploy/ read without the extra; `txn-exporter pipeline` checks the extra
is there before it imports the rest (exporter.commands.pipeline).
"""

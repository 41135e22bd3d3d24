"""The pipeline's inputs, checked before Spark starts: segment files on disk, live clusters."""

from __future__ import annotations

import logging
from pathlib import Path

from exporter.pipeline.errors import PipelineError
from exporter.pipeline.tables import TOPIC, KafkaInput, SegmentInput
from exporter.sources.segment_files import partition_of, segments_in


def segment_input(cluster: str, path: str) -> SegmentInput:
    """A segment file, a `__transaction_state-N` directory or a broker log dir holding them.
    Files are passed to Spark by absolute path: on a cluster they must be on a shared mount."""
    p = Path(path).expanduser()
    if not p.exists():
        raise PipelineError(f"{path} does not exist (cluster {cluster})")
    if p.is_file():
        files = [p]
    elif p.name.startswith(f"{TOPIC}-"):
        files = sorted(p.glob("*.log"))
    else:
        files = segments_in(p)
    if not files:
        raise PipelineError(f"no {TOPIC} segment files (__transaction_state-N/*.log) under {path} (cluster {cluster})")
    found = []
    for f in files:
        partition = partition_of(f)
        if partition is None:
            raise PipelineError(f"{f} is not in a {TOPIC}-N directory: its partition is unknown (cluster {cluster})")
        found.append((str(f.resolve()), partition))
    return SegmentInput(cluster, tuple(found))


def check_reachable(source: KafkaInput, timeout_s: float = 15.0) -> None:
    """Fail in one line if the cluster does not answer or has no __transaction_state, instead of
    Spark retrying for minutes and then printing a JVM stack trace."""
    from confluent_kafka.admin import AdminClient

    conf: dict[str, str | int | float | bool] = {"bootstrap.servers": source.bootstrap_servers}
    # kafka.* source options are client settings (security...): pass what librdkafka understands.
    for key, value in source.options:
        if key.startswith("kafka.") and key[6:] in _LIBRDKAFKA_SHARED:
            conf[key[6:]] = value
    try:
        topics = AdminClient(conf, logger=_silent).list_topics(timeout=timeout_s).topics
    except Exception as e:  # KafkaException: transport failure, all brokers down
        raise PipelineError(
            f"cannot reach Kafka cluster {source.cluster} at {source.bootstrap_servers} within {timeout_s:.0f} s ({_reason(e)})"
        ) from None
    if TOPIC not in topics:
        raise PipelineError(
            f"Kafka cluster {source.cluster} at {source.bootstrap_servers} has no {TOPIC} topic (no transaction yet?)"
        )


_LIBRDKAFKA_SHARED = {
    "security.protocol",
    "sasl.mechanism",
    "sasl.username",
    "sasl.password",
    "ssl.ca.location",
    "ssl.certificate.location",
    "ssl.key.location",
    "ssl.key.password",
}


_silent = logging.getLogger("exporter.pipeline.reachability")
_silent.addHandler(logging.NullHandler())
_silent.propagate = False


def _reason(e: Exception) -> str:
    text = str(e.args[0]) if e.args else str(e)
    return text.split("\n")[0][:200]

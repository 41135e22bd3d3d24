"""A harness broker's own JMX metrics, read with Kafka's own JmxTool (the broker needs ``jmx=True``).

Tests take their truth from here: what the broker itself counted, e.g. the partition-level errors it
returned in WriteTxnMarkers responses, never the exporter's reading of the same log.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from txn_workshop.harness.broker import KafkaBroker

_NO_MATCH = "No matched attributes"


class JmxError(RuntimeError):
    pass


def read(broker: KafkaBroker, object_name: str, attribute: str = "Count") -> dict[str, float]:
    """``attribute`` of every MBean matching ``object_name`` (a JMX pattern: ``error=*``), by object
    name, read once. Empty when none matches: Kafka registers a meter on its first mark."""
    proc = broker.run_tool(
        broker.kafka.jmx_tool_class,
        "--jmx-url",
        broker.jmx_url,
        "--object-name",
        object_name,
        "--attributes",
        attribute,
        "--one-time",
        "true",
        "--report-format",
        "properties",
        timeout=60,
    )
    if proc.returncode != 0:
        if _NO_MATCH in proc.stdout + proc.stderr:
            return {}
        raise JmxError(f"JmxTool failed on {object_name}:\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
    values = {}
    for line in proc.stdout.splitlines():  # "<object name>:<attribute>=<value>", then "time=<ms>"
        name_and_attribute, _, value = line.rpartition("=")
        name, _, attr = name_and_attribute.rpartition(":")
        if attr == attribute and name:
            values[name] = float(value)
    return values


def request_errors(broker: KafkaBroker, request: str) -> dict[str, int]:
    """The error counts of every response to ``request`` (an ApiKeys name: WriteTxnMarkers, EndTxn)
    the broker sent since it started, by Kafka error name, NONE included: RequestMetrics' ErrorsPerSec
    meters, marked with the response's errorCounts (per partition for WriteTxnMarkers)."""
    values = read(broker, f"kafka.network:type=RequestMetrics,name=ErrorsPerSec,request={request},error=*")
    return {_property(name, "error"): int(count) for name, count in values.items()}


def _property(object_name: str, key: str) -> str:
    properties = dict(p.split("=", 1) for p in object_name.partition(":")[2].split(","))
    return properties[key]

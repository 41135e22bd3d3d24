"""What reads beside each broker of bench/cluster_cost.py's cluster: its exporter, or one of the bare
readers it is compared with, started and stopped together."""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from bench.bare_consumer import Bare, fetch_pattern
from bench.exporter_process import Exporter, records_total
from exporter.sources.topic_tail.fetch_pattern import idle_wait_ms

if TYPE_CHECKING:
    from txn_workshop.harness.broker import KafkaBroker


class BareReader:
    """A bare reader beside one broker, of the partitions it leads, as an Exporter is driven here: a
    process, ready once started, its records read (and their receipt minus timestamp, to check that it
    meets the resolution). The floor candidates, each at the resolution:
    - `bare`: the exporter's own fetch pattern, in librdkafka, and nothing else;
    - `bare-nudged`: the same, and a ListOffsets request to the broker every resolution (what bounds
      the idle fetch's delay in a replicated cluster: docs/benchmarks.md, "The idle fetch's tail");
    - `bare-nudged-due`: the same, nudging as the exporter does (idle, while a transaction's COMPLETE_*
      is due: from its PREPARE_*, read from the value's status byte, for at most nudge_for_ms);
    - `kafka-python`: bench/bare_kafka_python.py, with fetch sessions, its fetch held the resolution
      (the busy pattern's fetches, with KIP-227 sessions);
    - `kafka-python-hold`: the same client, sessions, its fetch held until the first byte and its
      polls the resolution apart (at most one fetch per resolution, several records in one)."""

    def __init__(self, kind: str, broker: KafkaBroker, resolution_ms: int) -> None:
        self.latency: dict[int, int] = {}
        if kind in ("bare", "bare-nudged", "bare-nudged-due"):
            args = argparse.Namespace(kafka_config=[], before=False, latency_resolution_ms=resolution_ms)
            self._bare: Bare | None = Bare(
                broker.bootstrap_servers,
                fetch_pattern(args),
                broker.node_id,
                nudge_ms=resolution_ms if kind == "bare-nudged" else None,
                nudge_prepared_ms=resolution_ms if kind == "bare-nudged-due" else None,
            )
            self.proc = self._bare.proc
        else:
            self._bare = None
            script = Path(__file__).with_name("bare_kafka_python.py")
            pattern = (
                # (its fetch held as long as the exporter's idle one: as many fetches when nothing is appended)
                ["--wait-ms", str(idle_wait_ms(resolution_ms)), "--hold-ms", str(resolution_ms)]
                if kind == "kafka-python-hold"
                else ["--wait-ms", str(resolution_ms)]
            )
            self.proc = subprocess.Popen(
                [
                    sys.executable,
                    str(script),
                    "--bootstrap",
                    broker.bootstrap_servers,
                    "--broker-id",
                    str(broker.node_id),
                    *pattern,
                ],
                stdout=subprocess.PIPE,
                text=True,
                stdin=subprocess.DEVNULL,
            )
            assert self.proc.stdout is not None and self.proc.stdout.readline().strip() == "READY"

    def wait_ready(self, timeout: float) -> None:
        pass  # ready once it printed READY

    def records(self) -> float:
        """Records read so far; `latency` is then each receipt minus timestamp (ms) since the last call."""
        if self._bare is not None:
            snapshot = self._bare.snapshot()
        else:
            assert self.proc.stdout is not None
            self.proc.send_signal(signal.SIGUSR1)
            snapshot = json.loads(self.proc.stdout.readline())
        self.latency = {int(ms): n for ms, n in snapshot["latency"].items()}
        return float(snapshot["records"])

    def stop(self) -> None:
        from txn_workshop.harness.processes import terminate

        terminate(self.proc, 20)


def records_read(reader: Exporter | BareReader) -> float:
    return reader.records() if isinstance(reader, BareReader) else records_total(reader.metrics())


def start_exporters(
    variant: dict, brokers: list[KafkaBroker], logs: Path, timeout: float
) -> list[Exporter | BareReader]:
    """One exporter (or bare reader) beside each broker, started at once, each waited ready; with
    `--broker-log <its coordinator's file>` where the variant reads it."""
    from bench.three_broker_cluster import coordinator_log
    from txn_workshop.harness.processes import free_port

    exporters: list[Exporter | BareReader] = []
    try:
        if variant.get("reader"):
            exporters += [BareReader(variant["reader"], broker, variant["resolution_ms"]) for broker in brokers]
            return exporters
        for broker in brokers:
            flags = ["--broker-id", str(broker.node_id), *variant["args"]]
            if variant.get("broker_log"):
                flags += ["--broker-log", str(coordinator_log(broker))]
            log = logs / f"exporter-{variant['name']}-{broker.node_id}.log"
            exporters.append(Exporter(variant["executable"], broker.bootstrap_servers, free_port(), flags, log))
        for exporter in exporters:
            exporter.wait_ready(timeout)
    except BaseException:
        stop_exporters(exporters)
        raise
    return exporters


def stop_exporters(exporters: list[Exporter | BareReader]) -> None:
    for exporter in exporters:  # all asked at once, then each waited for
        if exporter.proc.poll() is None:
            exporter.proc.terminate()
    for exporter in exporters:
        exporter.stop()

"""Failovers counted once (issue 50): the bounces of txn_workshop.failover (a three-node cluster in the
deployment shape; node 2 killed, node 3 killed, node 2 stopped cleanly, each restarted and led back by
a preferred election) under transactions, an exporter beside each broker bootstrapping from the whole
cluster, in the clock mode (`--broker-log` with the coordinator's DEBUG lines) or the fetch-timed mode
(no broker log: the exporter learns its broker's epochs from its leader's answers alone).

Reported: per target state, the records appended since the exporters started (DumpLogSegments) and
the exporters' sum (their difference: records no exporter counted, or counted twice); how the counted
ones were timed (coordinator, fetch, untimed, and the untimed by reason); and per bounce the blind
window: from the bounce to the moved partitions' new leaders being known (the controller's part: a
SIGKILLed broker is fenced after broker.session.timeout.ms), and from then to every exporter following
its broker's partitions live again (the exporters' part), with the takeovers' replays apart
(txn_exporter_takeover_replay_seconds_total over txn_exporter_partitions_taken_over_total).

    .venv/bin/python bench/failover_counting.py --version 4.4.0
    .venv/bin/python bench/failover_counting.py --version 3.9.2 --mode zookeeper
    .venv/bin/python bench/failover_counting.py --version 4.4.0 --fetch-timed
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from bench.exporter_process import VENV_BIN, Exporter
from txn_workshop import failover
from txn_workshop.harness.processes import free_port
from txn_workshop.harness.workload import transactions_running

STATES = ("EMPTY", "ONGOING", "PREPARE_COMMIT", "PREPARE_ABORT", "COMPLETE_COMMIT", "COMPLETE_ABORT")


def samples(exporter: Exporter) -> list[tuple[str, dict[str, str], float]]:
    return [
        (s.name, s.labels, s.value)
        for family in text_string_to_metric_families(exporter.metrics())
        for s in family.samples
    ]


def summed(exporters: dict[int, Exporter], name: str, by: str | None = None, **fixed: str) -> defaultdict[str, float]:
    total: defaultdict[str, float] = defaultdict(float)
    for exporter in exporters.values():
        for n, labels, value in samples(exporter):
            if n == name and all(labels.get(k) == v for k, v in fixed.items()):
                total[labels[by] if by else ""] += value
    return total


def following(exporters: dict[int, Exporter], led: dict[int, set[int]], timeout: float = 120) -> float:
    """Waits until each exporter follows exactly its broker's partitions, live; returns when."""
    deadline = time.monotonic() + timeout
    while True:
        done = True
        for node, exporter in exporters.items():
            found = samples(exporter)
            lagged = {
                labels["partition"] for n, labels, _ in found if n == "txn_exporter_partition_consumer_lag_records"
            }
            live = [
                v for n, labels, v in found if n == "txn_exporter_partitions_followed" and labels["phase"] == "live"
            ]
            done &= lagged == {str(p) for p in led[node]} and live == [len(led[node])]
        if done:
            return time.monotonic()
        if time.monotonic() > deadline:
            raise TimeoutError("exporters not following their brokers' partitions")
        time.sleep(0.1)


def run(version: str, mode: str, fetch_timed: bool, root: Path) -> dict:
    with failover.cluster(version, root, mode) as brokers:  # type: ignore[arg-type]
        bootstrap = failover.bootstrap_of(brokers)
        by_node = {broker.node_id: broker for broker in brokers}
        exporters: dict[int, Exporter] = {}
        try:
            for broker in brokers:
                extra = ["--broker-id", str(broker.node_id), "--hanging-scan-interval-seconds", "0"]
                if not fetch_timed:
                    extra += ["--broker-log", str(broker.logs_dir / failover.COORDINATOR_LOG)]
                exporters[broker.node_id] = Exporter(
                    VENV_BIN / "txn-exporter",
                    f"{broker.bootstrap_servers},{bootstrap}",
                    free_port(),
                    extra,
                    root / f"exporter-{broker.node_id}.log",
                )
            for exporter in exporters.values():
                exporter.wait_ready()
            following(exporters, failover.settle(bootstrap))
            start = failover.high_watermarks(bootstrap)
            windows = []
            with transactions_running(bootstrap, failover.DATA_TOPIC, failover.spread_ids("failover")) as clients:
                time.sleep(5)
                for node, how in failover.BOUNCES:
                    taken = summed(exporters, "txn_exporter_partitions_taken_over_total")[""]
                    replayed = summed(exporters, "txn_exporter_takeover_replay_seconds_total")[""]
                    bounced = time.monotonic()
                    failover.bounce(by_node[node], how)
                    moved = failover.moved_away(bootstrap, node)
                    led = {
                        n: {p for p, (leader, _, _) in failover.leadership(bootstrap).items() if leader == n}
                        for n in failover.NODES
                    }
                    followed = following(exporters, led)
                    takeovers = summed(exporters, "txn_exporter_partitions_taken_over_total")[""] - taken
                    replay = summed(exporters, "txn_exporter_takeover_replay_seconds_total")[""] - replayed
                    time.sleep(3)
                    by_node[node].start()
                    following(exporters, failover.settle(bootstrap))
                    windows.append(
                        {
                            "bounce": f"{how} node {node}",
                            "leaders_moved_s": round(moved - bounced, 2),
                            "followed_live_after_s": round(followed - moved, 2),
                            "takeovers": takeovers,
                            "mean_replay_s": round(replay / takeovers, 3) if takeovers else None,
                        }
                    )
                    time.sleep(3)
            for exporter in exporters.values():
                deadline = time.monotonic() + 60
                while (
                    summed({0: exporter}, "kafka_transactions_with_pending_markers")[""] and time.monotonic() < deadline
                ):
                    time.sleep(0.5)
            time.sleep(3)  # the drains' last checks
            truth = Counter(
                r.state for r in by_node[1].transaction_log_records() if r.state and r.offset >= start[r.partition]
            )
            counted = summed(exporters, "kafka_transaction_state_log_records_total", "target_state")
            clocks = {
                clock: dict(
                    summed(exporters, "txn_exporter_append_latency_transitions_total", "target_state", clock=clock)
                )
                for clock in ("coordinator", "fetch", "untimed")
            }
            reasons = summed(exporters, "txn_exporter_append_clock_unmatched_total", "reason", kind="record")
            drains = summed(exporters, "txn_exporter_partition_drains_total", "outcome")
        finally:
            for exporter in exporters.values():
                exporter.stop()
    return {
        "version": version,
        "mode": mode,
        "clock": "fetch-timed" if fetch_timed else "coordinator (--broker-log, DEBUG)",
        "transactions": {"commits": clients.commits, "aborts": clients.aborts},
        "records": {s: truth[s] for s in STATES},
        "counted": {s: int(counted[s]) for s in STATES},
        "not_counted_minus_twice": {s: truth[s] - int(counted[s]) for s in STATES},
        "timed": clocks,
        "untimed_by_reason": {k: int(v) for k, v in reasons.items() if v},
        "drains": {k: int(v) for k, v in drains.items()},
        "bounces": windows,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", default="4.4.0")
    parser.add_argument("--mode", choices=("kraft", "zookeeper"), default="kraft")
    parser.add_argument("--fetch-timed", action="store_true", help="no --broker-log: the fetch-timed mode")
    parser.add_argument("--json", type=Path, help="also write the result here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="failover-bench-") as root:
        result = run(args.version, args.mode, args.fetch_timed, Path(root))
    print(json.dumps(result, indent=1))
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()

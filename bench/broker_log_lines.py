"""Broker log lines/s through BrokerLogParser (and through BrokerLogFollower reading a file), one core,
by CPU time (process_time: a loaded machine slows the wall clock, not the work per line).

    .venv/bin/python bench/broker_log_lines.py [--lines 1000000] [--runs 3]

Lines are real ones from tests/sources/broker_log_corpus (3.9.2 and 4.4.0), repeated:
- "other": the lines of the corpus not from a transaction-coordinator logger (the common case:
  nearly all of a broker's log);
- "coordinator, no event": coordinator lines the exporter does not count (DEBUG successes, loads...);
- "appends succeeded, distinct": TransactionStateManager's DEBUG line of every transition it appends
  (thousands a second at --broker-log's DEBUG), each with a transactional id of its own (no cache hit);
- "marker retry, repeated": the WriteTxnMarkers retry lines as a held partition repeats them,
  thousands a second, identical but for the time (the parser's cache serves them);
- "marker retry, distinct": the same with a transactional id of its own per line (no cache hit);
- "append failure": DEBUG + INFO pairs of failed appends (each pair one event), each pair with a
  transactional id of its own (no cache hit).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from exporter.broker_log import BrokerLogParser
from exporter.sources.broker_log_tail import BrokerLogFollower

CORPUS = Path(__file__).resolve().parents[1] / "tests" / "sources" / "broker_log_corpus"


def corpus_lines() -> list[bytes]:
    return [line for v in ("3.9.2", "4.4.0") for line in (CORPUS / f"{v}.log").read_bytes().split(b"\n") if line]


def repeat(sample: list[bytes], n: int) -> list[bytes]:
    return (sample * (n // len(sample) + 1))[:n]


def distinct(sample: list[bytes], n: int, *prefixes: bytes) -> list[bytes]:
    """`sample` repeated to n lines, the transactional ids renamed per repetition (cache misses)."""
    out: list[bytes] = []
    for r in range(n // len(sample) + 1):
        for line in sample:
            for prefix in prefixes:
                line = line.replace(prefix, prefix + b"r%d-" % r)
            out.append(line)
    return out[:n]


def best_rate(lines: list[bytes], runs: int) -> tuple[float, int]:
    best, events = 0.0, 0
    for _ in range(runs):
        parser = BrokerLogParser()
        start = time.process_time()
        for i in range(0, len(lines), 10_000):  # batches of lines, as the follower hands them over
            events += len(parser.feed(lines[i : i + 10_000]))
        best = max(best, len(lines) / (time.process_time() - start))
    return best, events // runs


def follower_rate(lines: list[bytes], runs: int) -> float:
    best = 0.0
    with tempfile.TemporaryDirectory(prefix="h5_bench_") as tmp:
        path = Path(tmp) / "server.log"
        path.write_bytes(b"\n".join(lines) + b"\n")
        for _ in range(runs):
            follower = BrokerLogFollower(path, from_start=True)
            start = time.process_time()
            follower.poll()
            best = max(best, len(lines) / (time.process_time() - start))
            follower.close()
    return best


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--lines", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
    sample = corpus_lines()
    probe = BrokerLogParser()
    other = [line for line in sample if b"coordinator.transaction." not in line]
    quiet = [
        line
        for line in sample
        if b"coordinator.transaction." in line and not probe.feed([line]) and b"'s new metadata " not in line
    ]
    succeeded = [
        line
        for line in sample
        if b"'s transaction state to " in line
        and line.endswith(b"succeeded (kafka.coordinator.transaction.TransactionStateManager)")
    ]
    retry = [line for line in sample if b"has failed with error" in line]
    pairs = [line for line in sample if b"'s new metadata " in line or b"transition failed due to" in line]
    cases = {
        "other (matches nothing)": repeat(other, args.lines),
        "coordinator, no event": repeat(quiet, args.lines // 4),
        "appends succeeded, distinct": distinct(succeeded, args.lines // 4, b"Updating ", b" for "),
        "marker retry, repeated": repeat(retry, args.lines // 4),
        "marker retry, distinct": distinct(retry, args.lines // 4, b"Sending "),
        "append failure (DEBUG+INFO)": distinct(pairs, args.lines // 4, b"TransactionalId ", b"Appending "),
    }
    print(f"{'lines':<30} {'parser lines/s':>16} {'events':>10} {'file+parser lines/s':>20}")
    for name, lines in cases.items():
        rate, events = best_rate(lines, args.runs)
        print(f"{name:<30} {rate:>16,.0f} {events:>10,} {follower_rate(lines, args.runs):>20,.0f}")


if __name__ == "__main__":
    main()

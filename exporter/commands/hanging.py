"""`txn-exporter hanging`: the data-partition view once, as a table or JSON.

The same scan and rules as the exporter's kafka_hanging_transactions gauge (exporter.sources.hanging_scan,
exporter.contracts.hanging_rules). It never aborts anything: for each hanging transaction it prints Kafka's own
`kafka-transactions.sh ... abort --topic T --partition P --start-offset O` to run after checking.
"""

from __future__ import annotations

import argparse
import json
import socket
import sys
import threading
import time
from collections.abc import Callable
from typing import TypeVar

from exporter import defaults
from exporter.contracts.hanging_rules import HANGING, abort_command, finding_row
from exporter.view.table import ABORT_INTRO, aligned

T = TypeVar("T")
DEFAULT_TIMEOUT_SECONDS = 10.0

COLUMNS = (
    "topic",
    "partition",
    "producer_id",
    "epoch",
    "start_offset",
    "transactional_id",
    "coordinator",
    "age_seconds",
    "verdict",
)


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "hanging",
        help="list late and hanging transactions on data partitions (KIP-664)",
        description="Describe the producers of the data partitions a broker leads (or of a topic, or all), "
        "keep the open transactions whose last write is older than the maximum transaction timeout plus "
        "the padding, and tell which ones are hanging by kafka-transactions.sh find-hanging's rule. "
        "Prints, for each hanging one, the kafka-transactions.sh abort command; aborts nothing itself.",
    )
    parser.add_argument("--bootstrap-servers", required=True, metavar="HOST:PORT[,HOST:PORT...]")
    parser.add_argument("--broker-id", type=int, metavar="N", help="only partitions this broker leads")
    parser.add_argument("--topic", help="only this topic")
    parser.add_argument(
        "--max-transaction-timeout-seconds",
        type=float,
        default=defaults.HANGING_MAX_TRANSACTION_TIMEOUT_SECONDS,
        metavar="SECONDS",
        help=f"the brokers' transaction.max.timeout.ms in seconds (default: {defaults.HANGING_MAX_TRANSACTION_TIMEOUT_SECONDS:g})",
    )
    parser.add_argument(
        "--padding-seconds",
        type=float,
        default=defaults.LATE_TRANSACTION_PADDING_SECONDS,
        metavar="SECONDS",
        help=f"padding past it before a transaction is late (default: {defaults.LATE_TRANSACTION_PADDING_SECONDS:g}, as KIP-664)",
    )
    parser.add_argument(
        "--max-partitions",
        type=int,
        default=defaults.HANGING_SCAN_MAX_PARTITIONS,
        metavar="N",
        help=f"partitions per DescribeProducers request (default: {defaults.HANGING_SCAN_MAX_PARTITIONS})",
    )
    parser.add_argument(
        "--kafka-config",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="client setting (security.protocol, sasl.*, ssl.*), repeatable",
    )
    parser.add_argument("--json", action="store_true", help="one JSON object per transaction")
    parser.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_TIMEOUT_SECONDS,
        metavar="SECONDS",
        help="give up if no bootstrap server answers within this long (default: %(default)g); "
        "after that, each request has the client's own 30 s timeout",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from exporter.sources.hanging_scan import HangingScanner, ScanAccessError

    settings = {}
    for pair in args.kafka_config:
        key, sep, value = pair.partition("=")
        if not sep:
            print("txn-exporter hanging: --kafka-config expects KEY=VALUE", file=sys.stderr)
            return 2
        settings[key.strip()] = value
    # kafka-python retries a bootstrap server that refuses or does not answer for 30 s, silently:
    # find out first, within --timeout, whether one answers at all.
    unreachable = _unreachable(args.bootstrap_servers, args.timeout)
    if unreachable:
        print(f"txn-exporter hanging: cannot reach Kafka at {unreachable}", file=sys.stderr)
        return 2
    try:
        scanner = _within(
            args.timeout,
            lambda: HangingScanner(
                args.bootstrap_servers,
                args.broker_id,
                int(args.max_transaction_timeout_seconds * 1000),
                int(args.padding_seconds * 1000),
                args.max_partitions,
                settings,
                time.time,
                args.topic,
            ),
        )
        try:
            result = scanner.scan_all()
        finally:
            scanner.close()
    except TimeoutError:
        print(
            f"txn-exporter hanging: Kafka at {args.bootstrap_servers} did not answer within {args.timeout:g} s "
            "(--timeout)",
            file=sys.stderr,
        )
        return 2
    except ScanAccessError as e:  # names the ACL to grant
        print(f"txn-exporter hanging: {e}", file=sys.stderr)
        return 2
    except Exception as e:  # kafka-python's errors: not reachable, unauthorized...
        text = str(e)  # kafka-python's errors start with their class name already
        print(
            f"txn-exporter hanging: {text if text.startswith(type(e).__name__) else f'{type(e).__name__}: {text}'}",
            file=sys.stderr,
        )
        return 2
    rows = [finding_row(f) for f in result.findings]
    hanging = [f for f in result.findings if f.verdict == HANGING]
    if args.json:
        for row, finding in zip(rows, result.findings):
            if finding.verdict == HANGING:
                row["abort_command"] = abort_command(args.bootstrap_servers, finding.transaction)
            print(json.dumps(row))
        return 0
    table = [[("-" if row[c] is None else str(row[c])) for c in COLUMNS] for row in rows]
    print("\n".join(aligned(tuple(c.upper() for c in COLUMNS), table)))
    event = result.event
    print(
        f"\n{event.partitions_scanned} partitions described, {event.partitions_with_late_transactions} with late "
        f"transactions, {len(hanging)} hanging transactions."
    )
    if hanging:
        print("\n" + ABORT_INTRO)
        for finding in hanging:
            print("  " + abort_command(args.bootstrap_servers, finding.transaction))
    return 0


def _unreachable(bootstrap_servers: str, timeout: float) -> str | None:
    """None once a TCP connection to one of the bootstrap servers opens within `timeout` seconds in
    all; else each server with why it could not be reached."""
    deadline = time.monotonic() + timeout
    reasons = []
    for server in (s.strip() for s in bootstrap_servers.split(",")):
        host, _, port = server.rpartition(":")
        try:
            with socket.create_connection((host.strip("[]"), int(port)), max(0.1, deadline - time.monotonic())):
                return None
        except ValueError:
            reasons.append(f"{server} (not HOST:PORT)")
        except TimeoutError:
            reasons.append(f"{server} (no answer within {timeout:g} s)")
        except socket.gaierror as e:
            reasons.append(f"{server} (cannot resolve {host}: {e.strerror})")
        except OSError as e:
            reasons.append(f"{server} ({(e.strerror or str(e)).lower()})")
    return ", ".join(reasons)


def _within(timeout: float, call: Callable[[], T]) -> T:
    """call() in a daemon thread, waited for `timeout` seconds: TimeoutError if it has not returned
    (the thread is left to the process's exit)."""
    returned: list[T] = []
    raised: list[Exception] = []

    def target() -> None:
        try:
            returned.append(call())
        except Exception as e:  # re-raised in the caller's thread
            raised.append(e)

    thread = threading.Thread(target=target, name="hanging-connect", daemon=True)
    thread.start()
    thread.join(timeout)
    if not returned and not raised:
        raise TimeoutError
    if raised:
        raise raised[0]
    return returned[0]

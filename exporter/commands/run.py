"""`txn-exporter run`: follow `__transaction_state` and serve the metrics.

The process around an exporter (exporter.app builds it): settings, logging, signals, and the
sources' thread, which this thread waits on.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
import time

from exporter import config, logs
from exporter.app import STOP_GRACE_SECONDS, Exporter
from exporter.http_server import ListenError
from exporter.sources.topic_tail.ownership import OwnershipError

log = logging.getLogger("txn_exporter")


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "run",
        help="follow __transaction_state and serve the metrics",
        description="Follow the __transaction_state partitions this broker leads (or all of them) and "
        "serve KIP-1344's transaction-coordinator metrics and more on /metrics. Every option can also be "
        "set by environment (TXN_EXPORTER_<NAME>) or in a YAML file (--config); flags win, then the "
        "environment, then the file.",
    )
    config.add_arguments(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        settings = config.load(args)
    except config.ConfigError as e:
        for problem in e.problems:
            print(f"txn-exporter run: {problem}", file=sys.stderr)
        return 2
    logs.configure(settings.log_level, settings.log_format, settings.log_repeat_seconds)
    stop = threading.Event()
    signalled: list[int] = []

    def on_signal(signum: int, _frame: object) -> None:
        signalled.append(signum)

    # Python runs a signal's handler in the main thread, but the kernel hands SIGTERM to any thread
    # that does not block it. Python's C handler, in whichever thread took the signal, writes to the
    # wakeup fd, and so does the sources' thread when it ends; this thread sleeps in a read of it.
    # (An untimed wait on `stop` missed a signal taken by another thread; a timed one woke twice a
    # second, 0.0003 cores of an idle exporter's 0.003.)
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_write, False)
    signal.set_wakeup_fd(wake_write, warn_on_full_buffer=False)
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, on_signal)
    exporter = Exporter(settings)
    try:
        exporter.start()
    except ListenError as e:
        print(f"txn-exporter run: {e}", file=sys.stderr)
        return 2
    log.info("serving %s; %s", exporter.server.url, _summary(settings))
    log.debug("settings: %s", settings.redacted())
    # The sources poll in a thread of their own, so this one only waits (below): a signal
    # wakes it at once even while a Kafka request is under way (a metadata request to a broker
    # that is down blocks its caller for up to 5 s).
    failed: list[Exception] = []
    serving = threading.Thread(target=_serve, args=(exporter, stop, failed, wake_write), name="sources", daemon=True)
    serving.start()
    # Any byte means stop: a signal (its handler runs here at the latest in the join below) or the
    # sources' end.
    os.read(wake_read, 1)
    _drain(exporter, serving, signalled, settings.shutdown_drain_seconds)
    stop.set()
    serving.join(STOP_GRACE_SECONDS)
    signal.set_wakeup_fd(-1)
    os.close(wake_read)
    os.close(wake_write)
    if signalled:
        log.info("stopping (%s)", signal.Signals(signalled[0]).name)
    closed = exporter.stop()
    logs.flush()
    if failed and isinstance(failed[0], OwnershipError):
        print(f"txn-exporter run: {failed[0]}", file=sys.stderr)
        return 2
    if failed:
        raise failed[0]  # a bug: its traceback, from this thread
    if not closed:
        # A Kafka client is still inside a call (a metadata request to a broker that does not answer
        # lasts up to 5 s), so it could not be closed. The interpreter's and the C libraries' exit
        # handlers would then run beside librdkafka's threads, which keep connecting: a stopping
        # exporter whose clients kept retrying a refused SASL login crashed so (SIGSEGV, once in the
        # suite). So it leaves without them, its logs flushed.
        log.info("stopped; Kafka clients left open inside a request")
        logs.flush()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)
    return 0


def _drain(exporter: Exporter, serving: threading.Thread, signalled: list[int], seconds: float) -> None:
    """On a signal, while the sources read on partitions their broker stopped leading (its controlled
    shutdown moving them), to the end of its epochs there (exporter.sources.topic_tail's drains): waits
    for them, at most `seconds`, or until a second signal. None: returns at once."""
    deadline = time.monotonic() + seconds
    waited = False
    while signalled and len(signalled) < 2 and exporter.tail.draining and serving.is_alive():
        if not waited:
            log.info(
                "stopping once the partitions its broker no longer leads are read to their end (at most %g s)", seconds
            )
            waited = True
        if time.monotonic() >= deadline:
            log.warning(
                "stopping with partitions still draining after %g s: their last records are not counted", seconds
            )
            return
        serving.join(0.05)


def _serve(exporter: Exporter, stop: threading.Event, failed: list[Exception], wake: int) -> None:
    try:
        exporter.serve(stop)
    except Exception as e:  # reported by run() once everything is stopped
        failed.append(e)
    finally:
        stop.set()
        os.write(wake, b"\0")


def _summary(settings: config.Settings) -> str:
    """What the exporter follows, in a few words (the whole settings are logged at DEBUG); client
    settings by name only, so no secret is ever printed."""
    if settings.all_partitions:
        partitions = "all __transaction_state partitions"
    elif settings.broker_id is not None:
        partitions = f"the __transaction_state partitions broker {settings.broker_id} leads"
    else:
        partitions = "the __transaction_state partitions of the broker the bootstrap address names"
    parts = [f"following {partitions} at {settings.bootstrap_servers}"]
    if settings.broker_log:
        parts.append("broker log " + ", ".join(settings.broker_log))
    if settings.hanging_scan_interval_seconds > 0:
        parts.append(f"hanging-transaction scan every {settings.hanging_scan_interval_seconds:g} s")
    if settings.kafka:
        parts.append("client settings " + ", ".join(sorted(settings.kafka)))
    return "; ".join(parts)

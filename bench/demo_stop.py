"""How long `txn-exporter demo` takes to stop on Ctrl-C, at chosen moments of its run: from the
SIGINT, sent to its process group as a terminal sends it, until every process it started (its
brokers' JVMs, in process groups of their own, included) and itself are gone.

    .venv/bin/python bench/demo_stop.py [--moments start:5,start:15,banner,free,hold:3,release:1] [--runs 1]

A moment is `start:S` (S seconds after the command, while the brokers start), `banner` (the banner
printed), `free` (the first summary: free flow), `hold:S` (S seconds after a hold is announced:
broker 2 stopped, the markers held back) or `release:S` (S seconds after the release is announced:
broker 2 restarting). Each moment is one run of the demo, on a port of its own; its processes are
the demo's descendants, listed every 20 ms from its start to its exit (a broker it starts after the
SIGINT would be one), each known by its pid and start time.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from txn_workshop.harness.processes import free_port

DEMO = [sys.executable, "-m", "exporter", "demo"]
ANNOUNCED = {
    "banner": re.compile(r"^kafka-txn-exporter demo$"),
    "free": re.compile(r"since start: appends"),
    "hold": re.compile(r"^\.\.\. holding the markers"),
    "release": re.compile(r"^\.\.\. releasing the held markers"),
}
POLL_SECONDS = 0.02
Process = tuple[int, str]  # pid, start time (/proc/PID/stat's field 22): a pid reused is another


def _table() -> dict[Process, int]:
    """Every live process (zombies are gone: only their parent's wait is missing) -> its parent pid."""
    table = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:  # gone meanwhile
            continue
        if fields[0] != "Z":
            table[int(entry.name), fields[19]] = int(fields[1])
    return table


def _descendants(pid: int, table: dict[Process, int]) -> set[Process]:
    found: set[Process] = set()
    parents = {pid}
    while parents:
        children = {process for process, parent in table.items() if parent in parents and process not in found}
        found |= children
        parents = {child[0] for child in children}
    return found


def measure(moment: str) -> tuple[float, int, int]:
    """One run, Ctrl-C at `moment`: (seconds until every process is gone, processes then, exit code)."""
    kind, _, arg = moment.partition(":")
    demo = subprocess.Popen(
        [*DEMO, "--listen", f"127.0.0.1:{free_port()}"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
    )
    assert demo.stdout is not None
    started = time.monotonic()
    announced = threading.Event()
    pattern = ANNOUNCED.get(kind)

    def read(stdout=demo.stdout) -> None:
        for line in stdout:
            if pattern is not None and pattern.search(line.rstrip("\n")):
                announced.set()

    threading.Thread(target=read, daemon=True).start()
    family: set[Process] = set()
    while True:
        family |= _descendants(demo.pid, _table())
        if demo.poll() is not None:
            raise RuntimeError(f"the demo exited before {moment} (exit code {demo.returncode})")
        if kind == "start" and time.monotonic() - started >= float(arg):
            break
        if pattern is not None and announced.is_set():
            time.sleep(float(arg or 0))
            break
        if time.monotonic() - started > 600:
            raise RuntimeError(f"no {moment} within 600 s")
        time.sleep(POLL_SECONDS)
    table = _table()
    family |= _descendants(demo.pid, table)
    at_signal = len(family & table.keys())
    signalled = time.monotonic()
    os.killpg(demo.pid, signal.SIGINT)
    while True:
        table = _table()
        family |= _descendants(demo.pid, table)
        if demo.poll() is not None and not family & table.keys():
            return time.monotonic() - signalled, at_signal, demo.returncode
        if time.monotonic() - signalled > 120:
            raise RuntimeError(f"still running 120 s after the SIGINT: {sorted(family & table.keys())}")
        time.sleep(POLL_SECONDS)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--moments", default="start:5,start:15,banner,free,hold:3,release:1")
    parser.add_argument("--runs", type=int, default=1, help="runs of each moment")
    args = parser.parse_args()
    print("| moment of the Ctrl-C | processes it had started then | all gone after, s | exit code |")
    print("|---|---|---|---|")
    worst = 0.0
    for moment in args.moments.split(","):
        results = [measure(moment) for _ in range(args.runs)]
        seconds = [r[0] for r in results]
        worst = max(worst, *seconds)
        shown = f"{statistics.median(seconds):.2f}" + (f" (max {max(seconds):.2f})" if len(seconds) > 1 else "")
        counts = sorted({r[1] for r in results})
        codes = sorted({r[2] for r in results})
        print(f"| {moment} | {', '.join(map(str, counts))} | {shown} | {', '.join(map(str, codes))} |", flush=True)
    print(f"\nslowest: {worst:.2f} s (goal: 3 s)")


if __name__ == "__main__":
    main()

"""bench.proc_stats.cpu_seconds: a process's CPU time to well under the 10 ms of /proc's ticks."""

from __future__ import annotations

import subprocess
import sys

from bench.proc_stats import cpu_seconds

_SPIN = """
import sys, time
started = time.process_time()
while time.process_time() - started < 0.123:
    pass
print(time.process_time(), flush=True)
sys.stdin.read()
"""


def test_a_process_cpu_time_is_read_to_the_millisecond() -> None:
    child = subprocess.Popen([sys.executable, "-c", _SPIN], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None
        own = float(child.stdout.readline())  # what the process itself counted, its start-up included
        read = cpu_seconds(child.pid)
        assert own <= read < own + 0.002, (own, read)
    finally:
        child.communicate("")

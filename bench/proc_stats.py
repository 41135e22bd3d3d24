"""What the benches read of a process in /proc: its CPU time, each thread's, its memory, and the
machine's load average; and a window of CPU time measured across processes at once."""

from __future__ import annotations

import os
import re
import subprocess
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from bench.exporter_process import VENV_BIN

if TYPE_CHECKING:
    from bench.txn_load import Load

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
PAGE_KIB = os.sysconf("SC_PAGE_SIZE") // 1024
_CPUCLOCK_SCHED = 2  # <linux/posix-timers.h>: the clock of CPU time run


def _stat_fields(path: str) -> tuple[str, list[str]]:
    with open(path) as f:
        text = f.read()
    # comm is in parentheses and may hold spaces: split around the last ")".
    comm = text[text.index("(") + 1 : text.rindex(")")]
    return comm, text[text.rindex(")") + 2 :].split()


def cpu_seconds(pid: int) -> float:
    """The CPU time of the whole process (every thread, exited ones included), to the nanosecond: its
    CPU-time clock, whose id Linux makes of the pid ((~pid << 3) | CPUCLOCK_SCHED, as
    clock_getcpuclockid(3) does). /proc's utime + stime count 10 ms ticks: an idle exporter's 16 s
    window holds 2 or 3 of them, 0.0012 or 0.0019 cores for the same process. Ticks where the clock
    cannot be read."""
    try:
        return time.clock_gettime((~pid << 3) | _CPUCLOCK_SCHED)
    except OSError:
        _, fields = _stat_fields(f"/proc/{pid}/stat")
        return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def thread_cpu(pid: int) -> dict[int, tuple[str, float]]:
    """tid -> (comm, CPU time s) of every live thread: the time it ran, to the nanosecond
    (schedstat's first field), where utime + stime count ticks (an idle exporter's thread waking five
    times a second reads 0 or 1 tick in most windows); ticks where schedstat cannot be read."""
    threads = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            comm, fields = _stat_fields(f"/proc/{pid}/task/{tid}/stat")
        except OSError:
            continue
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                cpu = int(f.read().split()[0]) / 1e9
        except (OSError, ValueError, IndexError):
            cpu = (int(fields[11]) + int(fields[12])) / CLOCK_TICKS
        threads[int(tid)] = (comm, cpu)
    return threads


def thread_cores(
    before: dict[int, tuple[str, float]],
    after: dict[int, tuple[str, float]],
    python_names: dict[int, str],
    seconds: float,
) -> dict[str, float]:
    """Each thread's cores between two thread_cpu() readings, busiest first: librdkafka's by name,
    Python's by their Python name (python_thread_names, read while it ran), else by thread id."""
    cores: dict[str, float] = {}
    for tid, (comm, cpu) in after.items():
        name = comm if comm.startswith("rdk:") else f"python:{python_names.get(tid, tid)}"
        cores[name] = cores.get(name, 0) + (cpu - before.get(tid, (comm, 0.0))[1]) / seconds
    return {name: round(c, 4) for name, c in sorted(cores.items(), key=lambda kv: -kv[1])}


def thread_group_cores(
    before: dict[int, tuple[str, float]], after: dict[int, tuple[str, float]], names: dict[int, str], seconds: float
) -> dict[str, float]:
    """A JVM's cores between two thread_cpu() readings by kind of thread: its threads' Java names
    (jvm_thread_names; else /proc's, cut to 15 characters) by thread_kind, so the broker's
    extra can be placed on its request handlers, network threads, GC, JIT or log appenders. Threads
    born in the window count from zero."""
    cores: dict[str, float] = {}
    for tid, (comm, cpu) in after.items():
        group = thread_kind(names.get(tid, comm))
        cores[group] = cores.get(group, 0.0) + (cpu - before.get(tid, (comm, 0.0))[1]) / seconds
    return cores


def thread_kind(name: str) -> str:
    """A JVM thread's kind: its name with its numbers as N, so a numbered pool counts as one
    ("ReplicaFetcherThread-0-2" -> "ReplicaFetcherThread-N-N", "GC Thread#1" -> "GC Thread#N")."""
    return _THREAD_NUMBER.sub("N", name)


_THREAD_NUMBER = re.compile(r"(?<=[-#])\d+")


def jvm_thread_names(pid: int) -> dict[int, str]:
    """Thread id -> its Java name, from `jcmd PID Thread.print` (/proc cuts names to 15 characters:
    the broker's network threads and request handlers both read "data-plane-kafk"); empty if it cannot."""
    try:
        dump = subprocess.run(["jcmd", str(pid), "Thread.print"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return {}
    return {int(m[2], 16): m[1] for m in re.finditer(r'^"(.*)" .* nid=0x([0-9a-f]+)', dump, re.MULTILINE)}


def python_thread_names(pid: int) -> dict[int, str]:
    """Thread id -> its Python thread's name ("sources", "metrics-http", ...), as `py-spy dump` reads
    them from the running process; empty if it cannot."""
    try:
        dump = subprocess.run(
            [str(VENV_BIN / "py-spy"), "dump", "-p", str(pid)], capture_output=True, text=True, timeout=30
        ).stdout
    except (OSError, subprocess.TimeoutExpired):
        return {}
    return {int(m[1]): m[2] for m in re.finditer(r'^Thread (\d+) \(\w+\): "([^"]*)"', dump, re.MULTILINE)}


def rss_mib(pid: int) -> tuple[float, float]:
    """(VmRSS, VmHWM) in MiB."""
    values = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(("VmRSS:", "VmHWM:")):
                key, kib = line.split()[:2]
                values[key] = int(kib) / 1024
    return values["VmRSS:"], values["VmHWM:"]


def loadavg() -> float:
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])


@dataclass
class Window:
    seconds: float
    load_before: float
    load_after: float
    cpu: dict[str, float]  # name -> CPU seconds in the window
    commits: int
    extra: dict = field(default_factory=dict)


def measure(pids: dict[str, int | list[int]], seconds: float, load: Load) -> Window:
    def snap() -> dict[str, float]:
        return {
            name: sum(cpu_seconds(p) for p in (pid if isinstance(pid, list) else [pid])) for name, pid in pids.items()
        }

    la = loadavg()
    c0, t0, r0 = snap(), time.monotonic(), load.reports()
    time.sleep(seconds)
    c1, t1, r1 = snap(), time.monotonic(), load.reports()
    return Window(t1 - t0, la, loadavg(), {k: c1[k] - c0[k] for k in c0}, round(load.commits_in(r0, r1, t1 - t0)))

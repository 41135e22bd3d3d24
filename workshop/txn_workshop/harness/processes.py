"""What every process the harness starts needs: a free loopback port, death with its parent, a
server's start with its log, a bounded stop, and the end of its log for an error message."""

from __future__ import annotations

import ctypes
import functools
import random
import signal
import socket
import subprocess
from pathlib import Path

# Ports are drawn from here up to the kernel's ephemeral range, which they stay out of.
LOWEST_PORT = 10_000


@functools.cache
def first_ephemeral_port() -> int:
    """The lowest port the kernel gives an outgoing connection (or a bind to port 0)."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default


def free_port() -> int:
    """A loopback port nothing is bound to, below the kernel's ephemeral range. bind(0) takes one from
    that range, from which every outgoing connection's local port comes too: a broker restarted on its
    kept port (KafkaBroker.restart) found it taken by a client's connection, and failed to start."""
    highest = max(first_ephemeral_port(), LOWEST_PORT + 1)
    for _ in range(100):
        port = random.randrange(LOWEST_PORT, highest)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise OSError(f"no free loopback port in {LOWEST_PORT}-{highest - 1}")


def die_with_parent() -> None:
    """A `preexec_fn`: PR_SET_PDEATHSIG, so the child gets SIGTERM if the Python process dies without
    running atexit (SIGKILL, unhandled SIGTERM). Caveat: it fires when the *thread* that started the
    child exits."""
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)


def start_server(command: list[str], log: Path, workdir: Path) -> subprocess.Popen[bytes]:
    """Starts a server's JVM (a broker, ZooKeeper) in `workdir`, its output appended to `log`, dying
    with its parent. Its own process group: a terminal's Ctrl-C goes to the Python process, which stops
    its servers in order, instead of also killing each JVM under its clients' feet."""
    with log.open("ab") as out:
        return subprocess.Popen(
            command,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd=workdir,
            preexec_fn=die_with_parent,
            process_group=0,
        )


def terminate(process: subprocess.Popen, timeout: float) -> None:
    """SIGTERM (a JVM's controlled shutdown), SIGKILL after `timeout` seconds."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def tail(path: Path, lines: int = 60) -> str:
    if not path.exists():
        return f"({path} does not exist)"
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])

"""What every process the harness starts needs: a free loopback port, death with its parent, a
bounded stop, and the end of its log for an error message."""

from __future__ import annotations

import ctypes
import signal
import socket
import subprocess
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def die_with_parent() -> None:
    """A `preexec_fn`: PR_SET_PDEATHSIG, so the child gets SIGTERM if the Python process dies without
    running atexit (SIGKILL, unhandled SIGTERM). Caveat: it fires when the *thread* that started the
    child exits."""
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)


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

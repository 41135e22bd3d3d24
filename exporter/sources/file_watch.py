"""Waiting for followed files to change: Linux's inotify, called through libc, on their directories.

An idle exporter's broker-log thread read its files twice a second, each wake-up costing more than
the read (0.0006 cores of an idle exporter's 0.003: docs/benchmarks.md#the-broker-logs-reads);
watched, it sleeps until its broker writes. Where inotify is not to be had (another system, a
directory not there yet, a watch refused), waits are plain timeouts, as are they once a read finds
lines that no notice announced (a file system whose writers the kernel does not see, as on NFS).
"""

from __future__ import annotations

import ctypes
import functools
import logging
import os
import select
import struct
import time
from collections.abc import Iterable
from pathlib import Path

log = logging.getLogger("txn_exporter")

# From <sys/inotify.h>: what a watched directory reports. Rotation renames (MOVED_*), creates and
# deletes files; copytruncate and appends modify them; a permission change (ATTRIB) may make an
# unreadable file readable.
_IN_MODIFY = 0x002
_IN_ATTRIB = 0x004
_IN_MOVED_FROM = 0x040
_IN_MOVED_TO = 0x080
_IN_CREATE = 0x100
_IN_DELETE = 0x200
_IN_Q_OVERFLOW = 0x4000  # notices were lost: counts as a change
_IN_IGNORED = 0x8000  # the directory's watch is gone (deleted, unmounted)
_MASK = _IN_MODIFY | _IN_ATTRIB | _IN_MOVED_FROM | _IN_MOVED_TO | _IN_CREATE | _IN_DELETE
_EVENT = struct.Struct("iIII")  # wd, mask, cookie, length of the NUL-padded name after it


class FileWatch:
    """Waits until one of `paths`, or a file whose name starts with its name (its rotated copies),
    is written, created, renamed, removed or has its permissions changed; or until wake()."""

    def __init__(self, paths: Iterable[str | Path]) -> None:
        self._names: dict[bytes, set[bytes]] = {}  # directory -> the followed files' names in it
        for path in paths:
            # Resolved: two spellings of one directory get one watch descriptor.
            path = Path(path).resolve()
            self._names.setdefault(os.fsencode(path.parent), set()).add(os.fsencode(path.name))
        self._watched: dict[int, bytes] = {}  # watch descriptor -> its directory
        self._fd = _inotify()
        self._trusted = self._fd is not None
        self._waited_in_vain = False  # the last wait ended with no notice
        self._pending = False  # the next wait ends at once (a notice taken early, a watch added)
        self._wake_read, self._wake_write = os.pipe()
        os.set_blocking(self._wake_write, False)

    def watching(self) -> bool:
        """Whether wait() returns at a change: every directory watched, the notices trusted (a
        directory not there yet is tried again at each call)."""
        self._add_watches()
        return self._trusted and len(self._watched) == len(self._names)

    def wait(self, timeout: float) -> bool:
        """Waits for a change of a followed file (or wake()) for at most `timeout` seconds; returns
        whether one was noticed. Unwatched, it sleeps the whole timeout (unless woken)."""
        watching = self.watching()
        if watching and self._pending:
            self._pending = False
            return True
        fds = [self._wake_read, self._fd] if watching and self._fd is not None else [self._wake_read]
        deadline = time.monotonic() + timeout
        noticed = woken = False
        while not (noticed or woken):
            ready, _, _ = select.select(fds, [], [], max(0.0, deadline - time.monotonic()))
            woken = self._wake_read in ready
            noticed = self._fd in ready and self._changed()
            if not ready:
                break
        self._waited_in_vain = watching and not noticed and not woken
        return noticed

    def read_found_lines(self) -> None:
        """Tells the watch that the read after its last wait found lines. If that wait noticed
        nothing and no notice has come since (one written just after the wait ended), the kernel
        does not see the writes: from then on, waits are timeouts."""
        if not (self._waited_in_vain and self._trusted):
            return
        self._waited_in_vain = False
        if self._changed():
            self._pending = True  # its bytes may be after the read's end
        else:
            self._trusted = False
            log.info("broker log: lines came that the kernel did not announce; reading by the clock from now on")

    def unwatch(self) -> None:
        """Removes the watches until watching() or wait() adds them again (and that wait then ends at
        once, as a new watch's does). While a file grows, its reader comes back by the clock anyway,
        and a watch costs only its writer: the kernel's notice path on each of the writer's writes, a
        fifth of a broker's CPU under its coordinator's DEBUG lines at 1,000 transactions a second
        (docs/benchmarks.md#the-clock-mode-at-high-rates)."""
        if self._fd is None or not self._watched:
            return
        for wd in self._watched:
            _libc().inotify_rm_watch(self._fd, wd)
        self._watched.clear()
        self._changed()  # (the removals' own notices, and any before them: the next watch reads anyway)

    def wake(self) -> None:
        """Ends the current wait and every later one at once (for stopping)."""
        os.write(self._wake_write, b"\0")

    def close(self) -> None:
        for fd in (self._fd, self._wake_read, self._wake_write):
            if fd is not None:
                os.close(fd)
        self._fd = None

    def _add_watches(self) -> None:
        if self._fd is None or len(self._watched) == len(self._names):
            return
        for directory in self._names.keys() - set(self._watched.values()):
            wd = _libc().inotify_add_watch(self._fd, directory, _MASK)
            if wd >= 0:  # else not there yet, or refused: tried again at the next wait
                self._watched[wd] = directory
                # What was written before the watch has no notice: the next wait ends at once.
                self._pending = True

    def _changed(self) -> bool:
        """Reads the pending notices: whether one is about a followed file (or notices were lost)."""
        try:
            data = os.read(self._fd, 64 * 1024) if self._fd is not None else b""
        except BlockingIOError:
            return False
        changed = False
        offset = 0
        while offset + _EVENT.size <= len(data):
            wd, mask, _cookie, length = _EVENT.unpack_from(data, offset)
            name = data[offset + _EVENT.size : offset + _EVENT.size + length].rstrip(b"\0")
            offset += _EVENT.size + length
            if mask & _IN_Q_OVERFLOW:
                changed = True
            elif mask & _IN_IGNORED:
                self._watched.pop(wd, None)
                changed = True
            elif wd in self._watched and any(name.startswith(n) for n in self._names[self._watched[wd]]):
                changed = True
        return changed


@functools.cache
def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _inotify() -> int | None:
    """A non-blocking inotify descriptor, or None where the system has none."""
    try:
        fd = _libc().inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
    except (AttributeError, OSError):  # not Linux
        return None
    return fd if fd >= 0 else None

"""exporter.sources.file_watch on this machine's kernel: what ends a wait, and what does not."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from exporter.sources import file_watch
from exporter.sources.file_watch import FileWatch

LONG = 30.0  # a wait that returns is ended by the change, not by this


@pytest.fixture
def log_file(tmp_path: Path) -> Path:
    path = tmp_path / "txn-coordinator.log"
    path.write_text("")
    return path


def _watch(path: Path) -> FileWatch:
    watch = FileWatch([path])
    assert watch.watching()
    assert watch.wait(LONG) is True  # a new watch's first wait ends at once (see below)
    return watch


def _later(action, seconds: float = 0.1) -> None:
    threading.Timer(seconds, action).start()


def test_an_append_to_the_followed_file_ends_the_wait(log_file: Path) -> None:
    watch = _watch(log_file)
    _later(lambda: log_file.open("a").write("[2026-11-29 01:00:00,000] DEBUG a line\n"))
    assert watch.wait(LONG) is True
    watch.close()


def test_another_file_in_its_directory_does_not(log_file: Path) -> None:
    watch = _watch(log_file)
    (log_file.parent / "controller.log").write_text("a line\n")
    started = time.monotonic()
    assert watch.wait(0.2) is False
    assert time.monotonic() - started >= 0.2  # the other file's notice did not end it
    watch.close()


@pytest.mark.parametrize("rotation", ["rename", "copytruncate"])
def test_a_rotation_ends_the_wait(log_file: Path, rotation: str) -> None:
    log_file.write_text("old line\n")
    watch = _watch(log_file)
    if rotation == "rename":
        log_file.rename(log_file.with_name(log_file.name + ".1"))
    else:
        log_file.with_name(log_file.name + ".1").write_bytes(log_file.read_bytes())
        os.truncate(log_file, 0)
    assert watch.wait(LONG) is True
    watch.close()


def test_a_directory_not_there_yet_is_watched_once_it_is(tmp_path: Path) -> None:
    path = tmp_path / "logs" / "server.log"
    watch = FileWatch([path])
    assert not watch.watching()
    started = time.monotonic()
    assert watch.wait(0.2) is False  # a plain timeout meanwhile
    assert time.monotonic() - started >= 0.2
    path.parent.mkdir()
    path.write_text("a line written before the watch\n")
    assert watch.watching()
    assert watch.wait(LONG) is True  # at once: what came before the watch has no notice
    _later(lambda: path.write_text("a line\n"))
    assert watch.wait(LONG) is True
    watch.close()


def test_wake_ends_this_wait_and_every_later_one(log_file: Path) -> None:
    watch = _watch(log_file)
    _later(watch.wake)
    started = time.monotonic()
    assert watch.wait(LONG) is False
    assert watch.wait(LONG) is False
    assert time.monotonic() - started < LONG
    watch.close()


def test_lines_no_notice_announced_turn_the_waits_into_timeouts(log_file: Path) -> None:
    watch = _watch(log_file)
    assert watch.wait(0.05) is False
    watch.read_found_lines()  # as on NFS: the reader found lines the kernel never announced
    assert not watch.watching()
    watch.close()


def test_lines_written_just_after_a_wait_ended_keep_the_notices_trusted(log_file: Path) -> None:
    watch = _watch(log_file)
    assert watch.wait(0.05) is False
    log_file.write_text("a line written between the wait's end and the read\n")
    watch.read_found_lines()
    assert watch.watching()
    assert watch.wait(LONG) is True  # the notice taken meanwhile is not lost
    watch.close()


def test_a_line_announced_keeps_the_notices_trusted(log_file: Path) -> None:
    watch = _watch(log_file)
    log_file.write_text("a line\n")
    assert watch.wait(LONG) is True
    watch.read_found_lines()
    assert watch.watching()
    watch.close()


def test_two_spellings_of_one_directory_are_one_watch(log_file: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(log_file.parent.parent)
    watch = FileWatch([log_file, Path(log_file.parent.name) / "server.log"])
    assert watch.watching()
    watch.close()


def test_without_inotify_a_wait_is_a_timeout(log_file: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(file_watch, "_inotify", lambda: None)
    watch = FileWatch([log_file])
    assert not watch.watching()
    log_file.write_text("a line\n")
    started = time.monotonic()
    assert watch.wait(0.2) is False
    assert time.monotonic() - started >= 0.2
    watch.close()


def _kernel_watches(watch: FileWatch) -> int:
    """The inotify watches the kernel holds for the watch's descriptor (/proc/self/fdinfo)."""
    info = Path(f"/proc/self/fdinfo/{watch._fd}").read_text()
    return sum(line.startswith("inotify wd:") for line in info.splitlines())


def test_unwatched_the_kernel_holds_no_watch_and_the_next_wait_reads_what_came_meanwhile(log_file: Path) -> None:
    """While the files grow the reader comes back by the clock and removes the watch, which would
    only cost the writer (the kernel's notice on each write); watched again, the first wait ends at
    once, and a later one waits for a change as ever (the removals left no notice behind)."""
    watch = _watch(log_file)
    assert _kernel_watches(watch) == 1
    watch.unwatch()
    assert _kernel_watches(watch) == 0
    with log_file.open("a") as f:
        f.write("[2026-11-29 01:00:00,000] DEBUG a line written unwatched\n")
    assert watch.watching() and _kernel_watches(watch) == 1
    assert watch.wait(LONG) is True  # at once: what came unwatched has no notice
    started = time.monotonic()
    assert watch.wait(0.2) is False
    assert time.monotonic() - started >= 0.2
    _later(lambda: log_file.open("a").write("[2026-11-29 01:00:01,000] DEBUG another\n"))
    assert watch.wait(LONG) is True
    watch.close()

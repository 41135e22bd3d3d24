"""Debian's chromium, headless, as the tests drive it: a fresh profile, nothing fetched but the page."""

from __future__ import annotations

import shutil
import subprocess
import tempfile

FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)


def chromium() -> str:
    path = shutil.which("chromium")
    assert path, "chromium is missing: scripts/setup installs it (Debian package chromium)"
    return path


def run(url: str, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    with tempfile.TemporaryDirectory(prefix="txn-chromium-") as profile:
        return subprocess.run(
            [chromium(), *FLAGS, f"--user-data-dir={profile}", *args, url],
            capture_output=True,
            text=True,
            timeout=timeout,
        )


def dump_dom(url: str, *args: str) -> str:
    """The page's DOM after loading, as chromium serialises it."""
    result = run(url, "--dump-dom", *args)
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout

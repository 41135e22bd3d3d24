"""Debian's chromium, headless, as the tests drive it: a fresh profile, nothing fetched but the page."""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from pathlib import Path

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


# A frame of the width wanted around a saved copy of the page (which has no script, and whose CSP
# forbids one): once the page is laid out in it, the frame's onload writes the page's widths where
# --dump-dom shows them. Headless chromium's window is never narrower than 500 px; a frame can be.
_FRAME = (
    '<!doctype html><html><body style="margin:0"><iframe src="{src}" style="width:{width}px;height:900px;border:0"'
    ' onload="var d = this.contentDocument.documentElement;'
    " document.body.setAttribute('data-widths', d.scrollWidth + ' ' + d.clientWidth)\"></iframe></body></html>"
)


def widths(page: str, width: int, directory: Path) -> tuple[int, int]:
    """The document's scrollWidth and clientWidth when chromium lays `page` (HTML) out `width` CSS
    pixels wide: the page scrolls sideways when the first is above the second."""
    saved = directory / f"page-{width}.html"
    saved.write_text(page)
    frame = directory / f"frame-{width}.html"
    frame.write_text(_FRAME.format(src=saved.name, width=width))
    dom = dump_dom(frame.as_uri(), f"--window-size={width + 200},1000", "--allow-file-access-from-files")
    match = re.search(r'data-widths="(\d+) (\d+)"', dom)
    assert match, dom[-2000:]
    return int(match[1]), int(match[2])

"""Write generated files, or check the committed ones are up to date: shared by every generator
(dashboards, alerts, deploy, mixin), so `--check` means the same thing for all of them."""

from __future__ import annotations

import sys
from pathlib import Path


def write_or_check(outputs: dict[Path, str], command: str, check: bool) -> int:
    """Write each path's text (printing it), or with check only compare and exit 1 naming the stale files."""
    if check:
        stale = [path for path, text in outputs.items() if not path.exists() or path.read_text() != text]
        if stale:
            print(f"out of date (run {command}):", *map(str, stale), file=sys.stderr)
            return 1
        return 0
    for path, text in outputs.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        print(f"wrote {path}")
    return 0

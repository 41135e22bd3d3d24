"""Writing generated files, or finding the committed ones that differ: the same for every generator."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COMMAND = "make generate"  # regenerates every file below (python -m generators)


def strays(outputs: Mapping[Path, str], owned: Iterable[str], root: Path = ROOT) -> list[Path]:
    """Files matching a generator's globs (relative to ``root``) that it no longer makes."""
    return sorted({path.resolve() for pattern in owned for path in root.glob(pattern)} - {p.resolve() for p in outputs})


def stale(outputs: Mapping[Path, str], owned: Iterable[str] = (), root: Path = ROOT) -> list[Path]:
    """The files that are missing, differ from what the generators make, or are no longer made."""
    differ = [path for path, text in outputs.items() if not path.exists() or path.read_text() != text]
    return differ + strays(outputs, owned, root)


def write(outputs: Mapping[Path, str], owned: Iterable[str] = (), root: Path = ROOT) -> list[Path]:
    """Write the files that changed and remove the strays; return both."""
    changed = []
    for path in strays(outputs, owned, root):
        path.unlink()
        changed.append(path)
    for path, text in outputs.items():
        if not path.exists() or path.read_text() != text:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            changed.append(path)
    return changed


def relative(path: Path) -> str:
    """The path as the repository names it (as it is when outside)."""
    path = path.resolve()
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)

"""Jars from Maven Central into a cache outside git: what exporter.pipeline.connector_jars (Spark's
Kafka connector) and the workshop's harness (Kafka's broker and tools) share.

A resolution runs `mvn dependency:copy-dependencies` on a pom into a temp dir
beside the cache entry, checks what came, writes the `.complete` marker last and renames the dir into
place: an interrupted run never leaves a half cache, and a cached entry needs no mvn (offline).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Sequence
from importlib.resources.abc import Traversable
from pathlib import Path

MARKER = ".complete"


def cache_root() -> Path:
    """Where resolved jars (and the workshop's other downloads) are kept: TXN_EXPORTER_CACHE, else
    ~/.cache/kafka-txn-exporter."""
    return Path(os.environ.get("TXN_EXPORTER_CACHE") or Path.home() / ".cache" / "kafka-txn-exporter")


def cached(home: Path) -> bool:
    return (home / MARKER).exists()


def resolve(
    home: Path,
    pom: Traversable,
    arguments: Sequence[str],
    what: str,
    problem: Callable[[list[str]], str | None],
    marker: dict,
    error: type[Exception],
) -> None:
    """Resolves `home`/libs with `mvn -f <pom> <arguments> dependency:copy-dependencies`.

    `what` names the jars in messages; `problem(jar names)` says what is wrong with the result (None:
    nothing); `marker` is recorded in the marker file. Raises `error` with a one-line cause first."""
    mvn = shutil.which("mvn")
    if mvn is None:
        raise error(f"{what} is not cached in {home} and `mvn` is not on PATH")
    home.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{home.name}-", dir=home.parent))
    try:
        cmd = [
            mvn,
            "-B",
            "-q",
            "-f",
            str(pom),
            *arguments,
            "dependency:copy-dependencies",
            f"-DoutputDirectory={tmp / 'libs'}",
        ]
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        found = sorted(p.name for p in (tmp / "libs").glob("*.jar"))
        wrong = f"exit {proc.returncode}" if proc.returncode != 0 else problem(found)
        if wrong is not None:
            tail = "\n".join(proc.stdout.splitlines()[-40:])
            raise error(f"mvn failed to resolve {what} ({wrong}):\n{tail}")
        (tmp / MARKER).write_text(json.dumps(marker) + "\n")
        if home.exists():  # left by an older layout or a crashed run without marker
            shutil.rmtree(home)
        try:
            tmp.rename(home)
        except OSError:
            if not cached(home):  # else another process finished first: its copy is as good
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

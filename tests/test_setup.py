"""scripts/setup as a newcomer meets it: `make demo`'s setup installs only what the demo needs, and
says so in three lines (pip's and the build backend's notices go to a log shown on failure only)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_the_license_is_an_spdx_expression() -> None:
    """A `{text = ...}` table makes setuptools print a deprecation banner three times per install."""
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert pyproject["project"]["license"] == "Apache-2.0"
    assert "setuptools>=77" in pyproject["build-system"]["requires"]  # the first to read PEP 639's string


@pytest.mark.image
def test_demo_setup_is_quiet_and_installs_neither_spark_nor_test_tools(tmp_path: Path) -> None:
    for name in ("pyproject.toml", "README.md", "Makefile"):
        shutil.copy(ROOT / name, tmp_path / name)
    for name in ("exporter", "workshop", "scripts"):
        shutil.copytree(ROOT / name, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__"))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "PYTHON", "VIRTUAL_ENV"))}
    env["PYTHON"] = sys.executable
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"  # the pip cache stays allowed here: it keeps this fast

    def setup() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(tmp_path / "scripts" / "setup"), "demo"],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )

    first = setup()
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    assert first.stdout.splitlines() == [
        "setup: creating .venv",
        "setup: installing kafka-txn-exporter and its workshop (the demo) into .venv",
        "setup: ready for the demo",
    ]
    assert first.stderr == ""
    again = setup()
    assert (again.returncode, again.stdout, again.stderr) == (0, "setup: ready for the demo\n", "")

    python = tmp_path / ".venv" / "bin" / "python"
    modules = subprocess.run(
        [
            str(python),
            "-c",
            "import importlib.util as u; print([m for m in ('pyspark', 'pyarrow', 'pandas', "
            "'pytest', 'hypothesis') if u.find_spec(m)])",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert modules.stdout.strip() == "[]", modules.stdout + modules.stderr
    demo = subprocess.run(
        [str(tmp_path / ".venv" / "bin" / "txn-exporter"), "demo", "--help"], capture_output=True, text=True, timeout=60
    )
    assert demo.returncode == 0 and "--keep-work-dir" in demo.stdout

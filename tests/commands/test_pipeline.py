"""`txn-exporter pipeline` without the `spark` extra (exporter.commands.pipeline), and the sidecar's
commands, which never import it. The wheel's own check, in a fresh venv with and without the extra:
tests/test_wheel.py."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from exporter import cli
from exporter.commands import pipeline

ROOT = Path(__file__).resolve().parents[2]


def test_the_modules_checked_are_the_spark_extras_packages() -> None:
    extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["spark"]
    assert sorted(pipeline.SPARK_EXTRA) == sorted(re.split(r"[<>=!~\[; ]", r, maxsplit=1)[0] for r in extra)


@pytest.fixture
def without_the_extra(monkeypatch):
    """None of the extra's modules to be found, whichever this venv has (make check's has pyarrow
    alone, with its stubs)."""
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name in pipeline.SPARK_EXTRA else find_spec(name, *a)
    )


@pytest.mark.parametrize(
    "argv",
    [
        ["pipeline"],
        ["pipeline", "build", "--out", "out", "--segments", "c=/nowhere"],
        ["pipeline", "report", "--out", "o", "--html", "r.html"],
    ],
    ids=["no step", "build", "report"],
)
def test_without_the_extra_one_line_says_how_to_install_it(without_the_extra, capsys, argv) -> None:
    assert cli.main(argv) == 2
    assert capsys.readouterr().err == (
        "txn-exporter pipeline: needs the spark extra (pyspark, pyarrow, pandas, numpy, matplotlib not installed): "
        "pip install 'kafka-txn-exporter[spark]'\n"
    )


def test_with_the_extra_a_missing_step_is_a_usage_error(capsys) -> None:
    if pipeline.missing_spark_extra():
        pytest.skip("the spark extra is not installed here")
    assert cli.main(["pipeline"]) == 2
    assert capsys.readouterr().err.endswith("txn-exporter pipeline: a STEP is required\n")


def test_the_sidecars_commands_import_nothing_of_the_extra() -> None:
    # In a fresh interpreter: the parser of every command, and the exporter's assembly.
    check = (
        "import sys\n"
        "from exporter import app, cli\n"
        "cli.build_parser()\n"
        f"print(sorted(m for m in {pipeline.SPARK_EXTRA!r} if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"

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

from exporter.pipeline.maven import cache_root

ROOT = Path(__file__).resolve().parent.parent


def test_the_license_is_an_spdx_expression() -> None:
    """A `{text = ...}` table makes setuptools print a deprecation banner three times per install."""
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert pyproject["project"]["license"] == "Apache-2.0"
    assert "setuptools>=77" in pyproject["build-system"]["requires"]  # the first to read PEP 639's string


def test_make_test_runs_the_checks_first_and_the_tests_last() -> None:
    """The README's test command: format, lint and types (make stops at the first that fails), then
    the tests, make check's first (tests/fast_first.py), whose summary line of both ends what CI reads."""
    dry = subprocess.run(["make", "-n", "test"], cwd=ROOT, capture_output=True, text=True, timeout=60, check=True)
    commands = [line for line in dry.stdout.splitlines() if line.startswith(".venv/bin/")]
    assert commands == [
        ".venv/bin/ruff format --check .",
        ".venv/bin/ruff check .",
        ".venv/bin/mypy",
        '.venv/bin/python -m tests.fast_first "not kafka and not spark and not image and not tools"',
    ]


def test_make_check_runs_the_same_checks_then_the_tests_that_need_nothing_fetched() -> None:
    """The fast loop: its setup installs the Python packages only, no spark extra (no Java, jars,
    Debian packages, Go or npm), and pytest leaves out every marker that needs more (pyproject.toml's
    markers)."""
    dry = subprocess.run(["make", "-n", "check"], cwd=ROOT, capture_output=True, text=True, timeout=60, check=True)
    # (Under a make of its own, make also says which directory it enters.)
    lines = [line for line in dry.stdout.splitlines() if not line.startswith("make")]
    assert lines[0] == "scripts/setup check"
    commands = [line for line in lines if line.startswith(".venv/bin/")]
    assert commands == [
        ".venv/bin/ruff format --check .",
        ".venv/bin/ruff check .",
        ".venv/bin/mypy",
        '.venv/bin/pytest -n 2 -m "not kafka and not spark and not image and not tools"',
    ]
    markers = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]["markers"]
    assert {m.split(":")[0] for m in markers} == {"kafka", "spark", "image", "tools"}


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


# -- the full setup's tool output (go, npm): to the setup log, shown only when a step fails ----------


def _tools_env(tmp_path: Path, fetched: tuple[str, ...] = ()) -> dict[str, str]:
    """scripts/setup's environment with deploy/'s validators fetched again into an empty cache:
    a fresh module cache for go, served from this machine's module cache (a file proxy: the same
    `go: downloading` lines as a fresh machine, no network), npm from its cache. The Kafka and Spark
    jars stay this machine's (symlinked), as do the validators named in `fetched`."""
    home = cache_root()
    gomodcache = subprocess.run(["go", "env", "GOMODCACHE"], capture_output=True, text=True).stdout.strip()
    stamp = ROOT / ".venv" / ".installed"
    inputs = (ROOT / "pyproject.toml", ROOT / "workshop" / "pyproject.toml", ROOT / "requirements" / "ci.txt")
    if not stamp.exists() or any(p.stat().st_mtime > stamp.stat().st_mtime for p in inputs):
        pytest.skip("run make setup first: this test must not install into .venv")
    if not (home / "schemas").is_dir() or not Path(gomodcache, "cache", "download").is_dir():
        pytest.skip("run make setup first: the validators are fetched again from this machine's caches")
    cache = tmp_path / "cache"
    cache.mkdir()
    for name in ("kafka", "spark-kafka", *fetched):
        (cache / name).parent.mkdir(parents=True, exist_ok=True)
        (cache / name).symlink_to(home / name)
    (cache / "schemas").mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "VIRTUAL_ENV"))}
    env.update(
        TXN_EXPORTER_CACHE=str(cache),
        GOMODCACHE=str(tmp_path / "gomod"),
        GOPROXY=f"file://{gomodcache}/cache/download,https://proxy.golang.org",
        GOSUMDB="off",  # the file proxy serves what was verified when it was downloaded
        GOFLAGS="-modcacherw -buildvcs=false",  # -modcacherw: tmp_path can be removed
        npm_config_prefer_offline="true",
    )
    return env


def _setup(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(ROOT / "scripts" / "setup")], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600
    )


@pytest.mark.tools
def test_setup_sends_go_and_npm_output_to_its_log(tmp_path: Path) -> None:
    env = _tools_env(tmp_path)
    done = _setup(env)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert done.stderr == ""
    assert done.stdout.splitlines() == [
        "setup: fetching kustomize, the Prometheus Operator's CRDs, Strimzi's validators (go, npm)",
        "setup: ready",
    ]
    cache = Path(env["TXN_EXPORTER_CACHE"])
    assert list(cache.glob("tools/kustomize-*/kustomize")) and len(list(cache.glob("schemas/*"))) == 2
    again = _setup(env)
    assert (again.returncode, again.stdout, again.stderr) == (0, "setup: ready\n", "")


@pytest.mark.tools
@pytest.mark.parametrize("tool", ["go", "npm"])
def test_a_failing_setup_step_shows_its_log(tmp_path: Path, tool: str) -> None:
    """The tool's own output, then one line saying which step failed; no traceback."""
    env = _tools_env(tmp_path, fetched=("tools",) if tool == "npm" else ())
    if tool == "npm":
        operator = next((cache_root() / "schemas").glob("prometheus-operator-*"))
        (Path(env["TXN_EXPORTER_CACHE"]) / "schemas" / operator.name).symlink_to(operator)
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / tool).write_text(
        f"#!/bin/sh\necho '{tool} said this on stdout'\necho '{tool}: 404 Not Found' >&2\nexit 1\n"
    )
    (fake / tool).chmod(0o755)
    env["PATH"] = f"{fake}:{env['PATH']}"
    done = _setup(env)
    assert done.returncode != 0
    assert "Traceback" not in done.stderr, done.stderr
    assert f"{tool} said this on stdout" in done.stderr and f"{tool}: 404 Not Found" in done.stderr
    assert done.stderr.splitlines()[-1].startswith("setup: could not fetch "), done.stderr
    assert not any(tool in line for line in done.stdout.splitlines()[1:]), done.stdout

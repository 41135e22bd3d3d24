"""The wheel as a user installs it: built from the checkout, installed with its dependencies into a
fresh venv (not .venv, whose editable install reads exporter/ in place and so hides any file the
wheel leaves out), and run from a directory outside the checkout, where only what the wheel carries
can be imported or read: without extras (every command's help; the pipeline saying how to install
what it needs), and with the `spark` extra (the pipeline runs). The image installs this same wheel
(tests/deploy/test_dockerfile.py)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

from exporter.pipeline.connector_jars import CONNECTOR_ARTIFACTS, connector_versions

ROOT = Path(__file__).resolve().parent.parent

# What the checkout holds beside the exporter and must stay out of its wheel: the workshop is a
# distribution of its own (workshop/pyproject.toml), the rest is never installed.
NOT_SHIPPED = ("txn_workshop", "workshop", "tests", "bench", "generators", "queries", "dashboards", "alerts", "mixin")


def _checkout_files() -> list[str]:
    """The working tree's files as git sees them (tracked, and new ones not ignored): what a user's
    checkout holds, without .venv, caches or an earlier build's leftovers."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout.split("\0")
    return sorted({name for name in listed if name and (ROOT / name).is_file()})


def _exporter_data_files(files: list[str]) -> list[str]:
    """Every file of the exporter's packages that is not Python: what it reads through
    importlib.resources, so what pyproject.toml's package-data must declare."""
    return [name for name in files if name.startswith("exporter/") and not name.endswith(".py")]


def _build_wheel(tmp_path: Path, files: list[str]) -> Path:
    # Built from a copy: setuptools writes build/ and an egg-info beside the sources, and the working
    # tree is shared with others. No build isolation: .venv's setuptools (pyproject's build-system
    # requirement) builds it, without fetching another.
    source = tmp_path / "checkout"
    for name in files:
        target = source / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes((ROOT / name).read_bytes())
    dist = tmp_path / "dist"
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(dist), str(source)],
        cwd=tmp_path,
        env=_pip_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (wheel,) = dist.glob("kafka_txn_exporter-*.whl")
    return wheel


def _fresh_venv(tmp_path: Path, requirement: str) -> Path:
    """A fresh venv (the interpreter running the tests, none of .venv's packages) with `requirement`
    (the wheel, with or without an extra) installed with its dependencies as a user's pip would."""
    venv = tmp_path / "venv"
    made = subprocess.run(
        [sys.executable, "-m", "venv", str(venv)], env=_pip_env(), capture_output=True, text=True, timeout=120
    )
    assert made.returncode == 0, made.stderr
    installed = subprocess.run(
        # --no-compile: pip would otherwise compile every module of the stack (pyspark's thousands) to
        # bytecode, most of this install's time; Python compiles what a command imports when it runs.
        [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--no-compile", requirement],
        cwd=tmp_path,
        env=_pip_env(),
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert installed.returncode == 0, installed.stdout[-3000:] + installed.stderr[-3000:]
    return venv


def _runner(tmp_path: Path, venv: Path):
    """Runs a command from elsewhere: the checkout is neither the working directory nor on any path."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    bin_dir = tmp_path / "bin"  # for stand-ins of other tools (the fake mvn below)
    bin_dir.mkdir()
    run_env = {
        "PATH": f"{venv / 'bin'}:{bin_dir}:/usr/bin:/bin",
        "HOME": str(tmp_path / "home"),
        "TXN_EXPORTER_CACHE": str(tmp_path / "cache"),
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    if "JAVA_HOME" in os.environ:
        run_env["JAVA_HOME"] = os.environ["JAVA_HOME"]

    def run(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return subprocess.run(args, cwd=elsewhere, env=run_env, capture_output=True, text=True, timeout=timeout)

    return run, bin_dir


# Every command and subcommand of the installed parser, by its words (["pipeline", "build"], ...).
_LIST_COMMANDS = """
import argparse, json
from exporter.cli import build_parser

def commands(parser, words=()):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield [*words, name]
                yield from commands(sub, (*words, name))

print(json.dumps(list(commands(build_parser()))))
"""


def _pip_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "PYTHON", "VIRTUAL_ENV"))}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"  # the pip cache stays allowed here: it keeps this fast
    return env


def test_the_pyproject_declares_package_data_only_for_its_own_packages() -> None:
    """A declaration for another distribution's package (the workshop's harness was one) ships
    nothing and reads as if it did."""
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    declared = pyproject["tool"]["setuptools"]["package-data"]
    assert all(package == "exporter" or package.startswith("exporter.") for package in declared), declared


@pytest.mark.image
def test_the_installed_wheel_runs_and_reads_its_resources_outside_the_checkout(tmp_path: Path) -> None:
    files = _checkout_files()
    data = _exporter_data_files(files)
    assert "exporter/pipeline/spark-kafka-pom.xml" in data
    wheel = _build_wheel(tmp_path, files)

    # What the wheel holds: every file of exporter/ (its data byte for byte), and nothing else of the
    # checkout.
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        missing = [name for name in files if name.startswith("exporter/") and name not in names]
        assert missing == [], f"not in the wheel (pyproject.toml's package-data): {missing}"
        for name in data:
            assert archive.read(name) == (ROOT / name).read_bytes(), name
    tops = {name.split("/", 1)[0] for name in names}
    assert tops == {"exporter", wheel.name.split("-py3")[0] + ".dist-info"}, tops
    assert not [name for name in names if name.split("/", 1)[0] in NOT_SHIPPED]

    # The wheel alone, without extras (about 10 s from pip's cache).
    venv = _fresh_venv(tmp_path, str(wheel))
    run, bin_dir = _runner(tmp_path, venv)

    # Every command's help, the pipeline's too, without the spark extra the pipeline needs.
    helped = run("txn-exporter", "--help")
    assert helped.returncode == 0 and "run" in helped.stdout, helped.stderr
    listed = run("python", "-c", _LIST_COMMANDS)
    assert listed.returncode == 0, listed.stderr
    commands = json.loads(listed.stdout)
    assert {"run", "decode", "hanging", "transactions", "pipeline"} <= {c[0] for c in commands}, commands
    assert ["pipeline", "build"] in commands and "demo" not in {c[0] for c in commands}, commands
    for words in commands:
        command_help = run("txn-exporter", *words, "--help")
        assert command_help.returncode == 0 and command_help.stdout.startswith("usage:"), (words, command_help.stderr)
    assert "--web-config-file" in run("txn-exporter", "run", "--help").stdout
    assert "--kafka" in run("txn-exporter", "pipeline", "build", "--help").stdout
    # The pipeline itself: one line on how to install what it needs, exit 2.
    for words in (["pipeline"], ["pipeline", "build", "--out", "out", "--segments", "c=nowhere"]):
        refused = run("txn-exporter", *words)
        assert refused.returncode == 2 and refused.stdout == "", (words, refused.stdout, refused.stderr)
        assert refused.stderr.count("\n") == 1 and refused.stderr.endswith(
            ": pip install 'kafka-txn-exporter[spark]'\n"
        ), (words, refused.stderr)

    # Every data file, read through the installed package as the exporter reads it.
    read = run(
        "python",
        "-c",
        "import exporter, hashlib, importlib.resources as r, json, sys\n"
        "found = {}\n"
        "for name in sys.argv[1:]:\n"
        "    package, _, file = name.rpartition('/')\n"
        "    found[name] = hashlib.sha256(r.files(package.replace('/', '.')).joinpath(file).read_bytes()).hexdigest()\n"
        "print(json.dumps({'exporter': exporter.__file__, 'files': found}))",
        *data,
    )
    assert read.returncode == 0, read.stderr
    found = json.loads(read.stdout)
    assert Path(found["exporter"]).is_relative_to(venv), found["exporter"]
    assert found["files"] == {name: hashlib.sha256((ROOT / name).read_bytes()).hexdigest() for name in data}

    # Spark's Kafka connector resolved by the installed package's own code (what `txn-exporter
    # pipeline --kafka` and scripts/setup run), with an mvn that records the pom it is given and
    # lays out the four jars: the pom is a real file inside the installed package, the repo's bytes.
    record = tmp_path / "mvn-args.json"
    given = tmp_path / "mvn-pom.xml"
    versions = connector_versions("4.3.0")
    jars = [f"{artifact}-{version}.jar" for artifact, version in zip(CONNECTOR_ARTIFACTS, versions)]
    mvn = bin_dir / "mvn"
    mvn.write_text(
        f"#!{venv / 'bin' / 'python'}\n"
        "import json, pathlib, shutil, sys\n"
        "args = sys.argv[1:]\n"
        f"pathlib.Path({str(record)!r}).write_text(json.dumps(args))\n"
        f"shutil.copyfile(args[args.index('-f') + 1], {str(given)!r})\n"
        "out = pathlib.Path(next(a.split('=', 1)[1] for a in args if a.startswith('-DoutputDirectory=')))\n"
        "out.mkdir(parents=True)\n"
        f"for jar in {jars!r}:\n"
        "    (out / jar).write_bytes(b'')\n"
    )
    mvn.chmod(0o755)
    resolved = run("python", "-m", "exporter.pipeline.connector_jars", "4.3.0")
    assert resolved.returncode == 0, resolved.stdout + resolved.stderr
    assert sorted(Path(line).name for line in resolved.stdout.splitlines()) == sorted(jars)
    args = json.loads(record.read_text())
    pom = Path(args[args.index("-f") + 1])
    assert pom.is_relative_to(venv) and pom.name == "spark-kafka-pom.xml", pom
    assert given.read_bytes() == (ROOT / "exporter" / "pipeline" / "spark-kafka-pom.xml").read_bytes()
    assert "-Dconnector.version=4.2.0" in args


@pytest.mark.image
@pytest.mark.spark
@pytest.mark.timeout(1500)
def test_the_wheel_with_the_spark_extra_runs_the_pipeline(tmp_path: Path) -> None:
    """`pip install 'kafka-txn-exporter[spark]'` (pyspark is big: a minute or two from pip's cache),
    then the pipeline's batch build and its report, on segment files, from outside the checkout."""
    if shutil.which("java") is None and "JAVA_HOME" not in os.environ:
        pytest.skip("Spark needs Java")
    from exporter.codec import TransactionState
    from tests.pipeline.builders import Log

    wheel = _build_wheel(tmp_path, _checkout_files())
    venv = _fresh_venv(tmp_path, f"{wheel}[spark]")
    run, _ = _runner(tmp_path, venv)
    t = 1_764_000_000_000
    log = Log(partition=0)
    log.transaction("app-1", t, t + 200, t + 300)
    log.transaction("app-2", t + 1_000, t + 1_500, t + 1_600, commit=False, pid=2)
    log.add("app-3", t + 2_000, TransactionState.ONGOING, pid=3, partitions={"orders": [0]}, start=t + 2_000)
    log.write(tmp_path / "segments")
    out = tmp_path / "out"

    built = run(
        "txn-exporter", "pipeline", "build", "--out", str(out), "--segments", f"c={tmp_path / 'segments'}", timeout=600
    )
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    assert list((out / "lifecycles").rglob("*.parquet")), sorted(p.name for p in out.iterdir())
    reported = run(
        "txn-exporter", "pipeline", "report", "--out", str(out), "--html", str(tmp_path / "report.html"), timeout=600
    )
    assert reported.returncode == 0, reported.stdout[-3000:] + reported.stderr[-3000:]
    assert "<html" in (tmp_path / "report.html").read_text().lower()

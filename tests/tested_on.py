"""The "Tested on" table of docs/supported-versions.md (the one page that holds it; the README links
there): per pinned Kafka version (workshop/txn_workshop/harness/versions.py), the checks a run of the
tests passed on a real broker of it. Produced by the run, never typed.

- A per-version test declares its checks, `@pytest.mark.tested_on("<check>")` (one mark per check)
  with keys of CHECKS, and gets its Kafka version as the parameter `version` (a fixture or a parametrize
  argument) and, where it runs in both, the cluster's mode as the parameter `mode` (KRAFT without it):
  `runs(check)` is what to parametrize them with.
- The rows: every pinned version in KRaft mode, and the version table's `zookeeper_checks` versions (the
  newest and oldest 3.x; 4.0 removed ZooKeeper mode) in ZooKeeper mode, for ZOOKEEPER_CHECKS.
- tests/conftest.py records each such test's outcome. A (version, mode, check) cell is ✓ when every test
  of it passed, ✗ when one failed, was skipped or xfailed: a red or skipped check never shows ✓.
- At the end of a run that collected every cell, the run writes its table to
  .pytest_cache/tested-on.md and fails when the page's differs. `python -m tests.tested_on`
  copies the last run's table into the page; `--check` compares without writing.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pytest

from txn_workshop.harness.versions import VERSIONS, kafka_version

ROOT = Path(__file__).parents[1]
PAGE = ROOT / "docs" / "supported-versions.md"  # the page that holds the table
LAST_RUN = ROOT / ".pytest_cache" / "tested-on.md"
BEGIN = "<!-- BEGIN TESTED-ON: written by a run of `make test` (`python -m tests.tested_on`); do not edit -->"
END = "<!-- END TESTED-ON -->"

# Column -> what a ✓ says, and where it is tested.
CHECKS: dict[str, str] = {
    "broker-log corpus": "the broker's own coordinator lines (failed appends at INFO and DEBUG, marker "
    "errors, the final-append retry queue, election and resignation) parse as expected "
    "(tests/sources/test_broker_log_corpus.py)",
    "counts": "commits, aborts and a timeout abort: the exporter's record counts and current states equal "
    "Kafka's DumpLogSegments of `__transaction_state` (tests/integration/broker_truth.py)",
    "held markers": "markers held back: pending 1 with a growing oldest age, 0 after the release "
    "(tests/integration/broker_truth.py)",
    "marker retries": "`kafka_transaction_marker_retries_total` by error equals the WriteTxnMarkers errors the data "
    "broker counted (its RequestMetrics over JMX, Kafka's JmxTool) (tests/integration/broker_truth.py)",
    "append errors": "failed `__transaction_state` appends by target state and error, at INFO and DEBUG, equal the "
    "EndTxn errors the coordinator counted (JMX) (tests/integration/broker_truth.py)",
    "append latency": "every transition the coordinator logged (its TRACE and DEBUG lines) received once and matched; the "
    "append-latency bound (at `--latency-resolution-ms 10`, its finest setting) at most 5 ms above the coordinator's "
    "own at p50 and p99 (or 3 ms above a bare client's in the same run, where the machine alone makes more), and "
    "below it no more often than that client's "
    "(tests/integration/broker_truth.py)",
    "coordinator clock": "with the coordinator's DEBUG lines read (its JVM in UTC+05:30, the exporter told nothing), every "
    "transition, idle and under 48 Java and librdkafka producers back to back, timed as its `succeeded` line minus the "
    "record's CreateTime in Kafka's DumpLogSegments, to the ms, by an exporter on a stock server.log and one on "
    "deploy/'s txn-coordinator.log (tests/integration/test_coordinator_clock.py)",
}
PASSED, FAILED, NOT_RUN = "✓", "✗", "-"
_CELLS = "tested_on_cells"  # the user property a report carries its cells in (to xdist's controller)

KRAFT, ZOOKEEPER = "kraft", "zookeeper"
# The checks that run in ZooKeeper mode too. Not P4 (append latency): it runs alone for minutes per
# version and measures the fetch path, which is the same in both modes.
ZOOKEEPER_CHECKS: tuple[str, ...] = tuple(check for check in CHECKS if check != "append latency")
# The checks only the full suite's versions (the newest 3.x and 4.x) run: the fetch-timed bound's P4
# runs alone (tests/machine.py) and measures the exporter's own fetch path, the same on every version;
# on every other version the coordinator's clock is held to the coordinator's lines to the ms.
FULL_SUITE_CHECKS: tuple[str, ...] = ("append latency",)
MODE_NAMES = {KRAFT: "KRaft", ZOOKEEPER: "ZooKeeper"}

Cell = tuple[str, str, str]  # (version, mode, check)
Outcomes = dict[Cell, bool]  # cell -> every test of it passed


def rows() -> list[tuple[str, str]]:
    """The table's (version, mode) rows, in its order: each version in KRaft mode, then in ZooKeeper
    mode where the version table's row says `zookeeper_checks`."""
    return [
        (row.version, mode) for row in VERSIONS for mode in (KRAFT, ZOOKEEPER) if mode == KRAFT or row.zookeeper_checks
    ]


def runs_check(version: str, mode: str, check: str) -> bool:
    if check in FULL_SUITE_CHECKS and not kafka_version(version).full_suite:
        return False
    return mode == KRAFT or check in ZOOKEEPER_CHECKS


def all_cells() -> set[Cell]:
    """Every cell the table claims: what a run must cover to say anything about it."""
    return {(version, mode, check) for version, mode in rows() for check in CHECKS if runs_check(version, mode, check)}


def runs(*checks: str) -> list[object]:
    """The `("version", "mode")` parameters of a test of ``checks``: every row that runs them all."""
    return [
        pytest.param(version, mode, id=version if mode == KRAFT else f"{version}-{mode}")
        for version, mode in rows()
        if all(runs_check(version, mode, check) for check in checks)
    ]


def table(outcomes: Outcomes) -> str:
    """The markdown table of ``outcomes`` (a cell missing from them is a failure too)."""
    lines = [
        "| Kafka | " + " | ".join(CHECKS) + " | whole suite, applications |",
        "|---" * (len(CHECKS) + 2) + "|",
    ]
    for version, mode in rows():
        cells = [
            (PASSED if outcomes.get((version, mode, check)) else FAILED)
            if runs_check(version, mode, check)
            else NOT_RUN
            for check in CHECKS
        ]
        label = version if mode == KRAFT else f"{version} ({MODE_NAMES[mode]})"
        whole = "yes" if mode == KRAFT and kafka_version(version).full_suite else ""
        lines.append(f"| {label} | " + " | ".join(cells) + f" | {whole} |")
    legend = "\n".join(f"- **{check}**: {what}" for check, what in CHECKS.items())
    modes = (
        "A row is a KRaft cluster (`process.roles`, the harness's default); a row marked (ZooKeeper) ran "
        "on a ZooKeeper-mode cluster of that version (`broker.id`, `zookeeper.connect`, a ZooKeeper from "
        "the distribution's own jars): the newest and the oldest 3.x, as 4.0 removed ZooKeeper mode. "
        f"{NOT_RUN}: not run there (append latency, the fetch-timed bound, runs in KRaft mode on the whole "
        "suite's versions only; on every version the coordinator clock check holds each transition's latency to "
        "the coordinator's own lines). The whole suite runs "
        "in KRaft mode; on its rows it runs the applications too: a Kafka Streams exactly_once_v2 application "
        "(kafka-streams of the broker's version, through a rebalance and a kill) and consume-transform-produce "
        "from librdkafka and Kafka's Java client, each against DumpLogSegments "
        "(tests/integration/test_streams_eos.py, tests/integration/test_consume_transform_produce.py)."
    )
    return "\n".join(lines) + "\n\n" + legend + "\n\n" + modes + "\n"


def page_table(text: str) -> str | None:
    """The table between the markers of ``text`` (None without them)."""
    if BEGIN not in text or END not in text:
        return None
    return text.split(BEGIN, 1)[1].split(END, 1)[0].strip("\n") + "\n"


def render(text: str, generated: str) -> str:
    head, rest = text.split(BEGIN, 1)
    return head + BEGIN + "\n" + generated + END + rest.split(END, 1)[1]


class Recorder:
    """The pytest plugin (registered by tests/conftest.py) that records the cells' outcomes.

    Under pytest-xdist (`make test` runs two workers) the workers collect and run the tests and the
    controller sees only their reports: each report of a per-version test carries its cells in its
    user_properties, and only the controller (or a run without workers) judges the table."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.cells: dict[str, list[tuple[str, str]]] = {}  # node id -> its (version, check) cells
        self.passed: set[str] = set()  # node ids whose call passed
        self.failed: set[str] = set()  # node ids with a phase failed, skipped or xfailed
        self.deselected = False
        self.worker = hasattr(config, "workerinput")

    def pytest_deselected(self, items: list[pytest.Item]) -> None:
        self.deselected = self.deselected or bool(items)

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        for item in session.items:
            checks = [marker.args[0] if marker.args else None for marker in item.iter_markers("tested_on")]
            if not checks:
                continue
            callspec = getattr(item, "callspec", None)
            version = callspec.params.get("version") if callspec else None
            mode = callspec.params.get("mode", KRAFT) if callspec else KRAFT
            found = [(version, mode, check) for check in checks]
            if not set(found) <= all_cells():
                raise pytest.UsageError(
                    f"{item.nodeid}: tested_on needs a check of tests/tested_on.CHECKS and a `version` parameter "
                    f"(and `mode`, of a row that runs the check: tests/tested_on.runs); found {found}"
                )
            self.cells[item.nodeid] = found
            item.user_properties.append((_CELLS, self.cells[item.nodeid]))

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.nodeid not in self.cells:
            carried = [value for name, value in report.user_properties if name == _CELLS]
            if not carried:
                return
            self.cells[report.nodeid] = [(version, mode, check) for version, mode, check in carried[0]]
        if report.failed or report.skipped or hasattr(report, "wasxfail"):
            self.failed.add(report.nodeid)
        elif report.when == "call":
            self.passed.add(report.nodeid)

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if self.worker:
            return  # the controller judges, from every worker's reports
        every = all_cells()
        covered = {cell for cells in self.cells.values() for cell in cells}
        # The whole suite (`pytest`, no arguments: testpaths) with nothing deselected, or its rest after
        # the fast tests (`make test`'s second run: tests/fast_first.py; the broker-log corpus's checks
        # are fast, their cells carried over from the first run): every cell must be there, so a check or
        # version that lost its tests shows as failed too. (With workers, deselection happens in them:
        # -k and -m are read here instead.)
        option = self.config.option
        rest_of_suite = getattr(option, "rest_of_suite", False)
        selecting = bool(getattr(option, "keyword", "") or (getattr(option, "markexpr", "") and not rest_of_suite))
        whole_suite = (
            self.config.args_source is pytest.Config.ArgsSource.TESTPATHS
            and not selecting
            and (not self.deselected or rest_of_suite)
        )
        outcomes = dict.fromkeys(covered, True)
        for nodeid, cells in self.cells.items():  # a test that never ran (-x, Ctrl-C) did not pass
            if nodeid in self.failed or nodeid not in self.passed:
                outcomes.update(dict.fromkeys(cells, False))
        carried = getattr(option, "cells_file", None)  # make test's two runs: the fast one's cells (fast_first.py)
        if carried:
            outcomes = carry(Path(carried), outcomes)
        if set(outcomes) != every and not whole_suite:
            return  # a run of some tests only: it says nothing about the table
        generated = table(outcomes)
        LAST_RUN.parent.mkdir(exist_ok=True)
        LAST_RUN.write_text(generated)
        if page_table(PAGE.read_text()) != generated:
            reporter = self.config.pluginmanager.get_plugin("terminalreporter")
            if reporter is not None:
                reporter.write_line(
                    f"{_shown(PAGE)}'s Tested-on table is not what this run verified; the run's table:\n"
                    f"{generated}(a green run's table goes into {_shown(PAGE)} with: python -m tests.tested_on)",
                    red=True,
                )
            session.exitstatus = pytest.ExitCode.TESTS_FAILED


def carry(path: Path, outcomes: Outcomes) -> Outcomes:
    """``outcomes`` with those an earlier run of the same `make test` wrote to ``path`` (a cell of both
    passed only if it passed in both), written back for a later run."""
    earlier: Outcomes = {}
    if path.exists():
        earlier = {(version, mode, check): passed for version, mode, check, passed in json.loads(path.read_text())}
    merged = {cell: earlier.get(cell, True) and outcomes.get(cell, True) for cell in {*earlier, *outcomes}}
    path.write_text(json.dumps(sorted([*cell, passed] for cell, passed in merged.items())))
    return merged


def _shown(path: Path) -> str:
    """The page's path as a message names it: from the repository's root when inside it."""
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=f"Copy the last complete test run's Tested-on table into {_shown(PAGE)}"
    )
    parser.add_argument("--check", action="store_true", help=f"exit 1 if {_shown(PAGE)}'s table differs")
    args = parser.parse_args(argv)
    if not LAST_RUN.exists():
        print(f"no complete run recorded in {LAST_RUN}: run `make test` first", file=sys.stderr)
        return 1
    generated, text = LAST_RUN.read_text(), PAGE.read_text()
    if page_table(text) == generated:
        return 0
    if args.check:
        print(
            f"{_shown(PAGE)}'s Tested-on table differs from the last run's: python -m tests.tested_on", file=sys.stderr
        )
        return 1
    PAGE.write_text(render(text, generated))
    return 0


if __name__ == "__main__":
    sys.exit(main())

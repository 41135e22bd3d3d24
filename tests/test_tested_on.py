"""The Tested-on table of docs/supported-versions.md (tests/tested_on.py): it claims every check on every pinned version
(in KRaft mode, and but the append-latency one in ZooKeeper mode on the newest and oldest 3.x), and a
run whose per-version tests do not all pass can never end green beside it."""

from __future__ import annotations

import textwrap

import pytest

from tests import tested_on
from txn_workshop.harness.versions import KAFKA_VERSIONS, ZOOKEEPER_CHECK_VERSIONS, kafka_version

pytest_plugins = ["pytester"]

KRAFT, ZOOKEEPER = tested_on.KRAFT, tested_on.ZOOKEEPER
ALL_PASSED = dict.fromkeys(tested_on.all_cells(), True)


def test_the_page_table_is_every_check_passed_on_every_version():
    assert tested_on.PAGE == tested_on.ROOT / "docs" / "supported-versions.md"
    assert tested_on.page_table(tested_on.PAGE.read_text()) == tested_on.table(ALL_PASSED), (
        "after a green `make test`: python -m tests.tested_on"
    )


def test_a_failed_cell_shows_as_failed():
    version, check = KAFKA_VERSIONS[-1], next(iter(tested_on.CHECKS))
    rendered = tested_on.table({**ALL_PASSED, (version, KRAFT, check): False})
    row = next(line for line in rendered.splitlines() if line.startswith(f"| {version} |"))
    assert row.split(" | ")[1] == tested_on.FAILED
    assert rendered != tested_on.table(ALL_PASSED)


def test_the_zookeeper_rows_are_the_newest_and_oldest_3x_without_append_latency():
    threes = [v for v in KAFKA_VERSIONS if v.startswith("3.")]
    assert (threes[0], threes[-1]) == ZOOKEEPER_CHECK_VERSIONS
    assert tuple(c for c in tested_on.CHECKS if c != "append latency") == tested_on.ZOOKEEPER_CHECKS
    assert tested_on.FULL_SUITE_CHECKS == ("append latency",)
    rows = tested_on.rows()
    for version in ZOOKEEPER_CHECK_VERSIONS:  # right below its KRaft row
        assert rows[rows.index((version, KRAFT)) + 1] == (version, ZOOKEEPER)
    assert len(rows) == len(KAFKA_VERSIONS) + len(ZOOKEEPER_CHECK_VERSIONS)
    rendered = tested_on.table(ALL_PASSED).splitlines()
    row = next(line for line in rendered if line.startswith(f"| {threes[0]} (ZooKeeper) |"))
    assert row.split(" | ")[1:] == [tested_on.PASSED] * 5 + [tested_on.NOT_RUN, tested_on.PASSED, " |"]
    failed = tested_on.table({**ALL_PASSED, (threes[-1], ZOOKEEPER, "counts"): False}).splitlines()
    row = next(line for line in failed if line.startswith(f"| {threes[-1]} (ZooKeeper) |"))
    assert row.split(" | ")[2] == tested_on.FAILED
    assert next(line for line in failed if line.startswith(f"| {threes[-1]} |")) in rendered


def test_the_fetch_timed_bound_runs_on_the_whole_suites_versions_only():
    """P4 of the fetch-timed bound (append latency) on the newest 3.x and 4.x; every version's row runs
    the coordinator clock check."""
    column = list(tested_on.CHECKS).index("append latency")
    clock = list(tested_on.CHECKS).index("coordinator clock")
    rendered = tested_on.table(ALL_PASSED).splitlines()
    for version in KAFKA_VERSIONS:
        row = next(line for line in rendered if line.startswith(f"| {version} |")).split(" | ")[1:]
        assert row[column] == (tested_on.PASSED if kafka_version(version).full_suite else tested_on.NOT_RUN), version
        assert row[clock] == tested_on.PASSED, version


def _project(pytester: pytest.Pytester, body: str) -> None:
    """A test project of per-version tests for every (version, check), with the page's table
    claiming all passed, and the recorder of tests/tested_on.py."""
    page = pytester.path / "supported-versions.md"
    page.write_text(f"x\n{tested_on.BEGIN}\n{tested_on.table(ALL_PASSED)}{tested_on.END}\n")
    pytester.makeini("[pytest]\ntestpaths = checks\nmarkers =\n    fast: a check of make test's fast run\n")
    pytester.makeconftest(
        textwrap.dedent(f"""
        import sys
        from pathlib import Path
        sys.path.insert(0, {str(tested_on.ROOT)!r})  # pytest-xdist's workers import the recorder too
        from tests import tested_on
        tested_on.PAGE = Path({str(page)!r})
        tested_on.LAST_RUN = Path({str(pytester.path / "last.md")!r})

        def pytest_configure(config):
            config.addinivalue_line("markers", "tested_on(check): per-version check")
            config.pluginmanager.register(tested_on.Recorder(config), "tested-on")
    """)
    )
    (pytester.path / "checks").mkdir()
    (pytester.path / "checks" / "test_checks.py").write_text(
        textwrap.dedent("""
        import pytest
        from tests.tested_on import CHECKS, runs

        @pytest.mark.parametrize(
            "check, version, mode",
            [
                pytest.param(
                    c, *run.values, id=f"{c}-{run.id}",
                    marks=[pytest.mark.tested_on(c), *([pytest.mark.fast] if c == "broker-log corpus" else [])],
                )
                for c in CHECKS for run in runs(c)
            ],
        )
        def test_check(check, version, mode):
            pass
    """)
        + body
    )


@pytest.fixture
def restore_tested_on():
    saved = tested_on.PAGE, tested_on.LAST_RUN
    yield
    tested_on.PAGE, tested_on.LAST_RUN = saved


@pytest.mark.parametrize("outcome, code", [("pass", 0), ("fail", 1), ("skip", 1), ("xfail", 1)])
def test_a_run_ends_green_only_when_every_cell_passed(pytester, restore_tested_on, outcome, code):
    action = "pass" if outcome == "pass" else f"pytest.{outcome}('this check')"
    _project(
        pytester, f"    if (version, mode, check) == ({KAFKA_VERSIONS[0]!r}, 'kraft', 'counts'):\n        {action}\n"
    )
    result = pytester.runpytest_inprocess()
    assert result.ret == code, result.stdout.str()
    last = (pytester.path / "last.md").read_text()
    assert (last == tested_on.table(ALL_PASSED)) == (outcome == "pass")
    if code:
        result.stdout.fnmatch_lines(["*supported-versions.md's Tested-on table is not what this run verified*"])


def test_a_run_of_some_tests_only_leaves_the_table_alone(pytester, restore_tested_on):
    _project(pytester, "")
    result = pytester.runpytest_inprocess("-k", KAFKA_VERSIONS[0])
    assert result.ret == 0
    assert not (pytester.path / "last.md").exists()


def test_two_workers_judge_the_table_as_one_run(pytester, restore_tested_on):
    """`make test` runs two pytest-xdist workers: the controller collects nothing, so the cells come
    with the workers' reports, and a failed cell still fails the run."""
    _project(
        pytester,
        f"    if (version, mode, check) == ({ZOOKEEPER_CHECK_VERSIONS[0]!r}, 'zookeeper', 'counts'):\n"
        "        pytest.fail('x')\n",
    )
    result = pytester.runpytest_inprocess("-n", "2", "-p", "xdist")
    assert result.ret == 1, result.stdout.str()
    result.stdout.fnmatch_lines(["*supported-versions.md's Tested-on table is not what this run verified*"])
    last = (pytester.path / "last.md").read_text()
    assert last == tested_on.table({**ALL_PASSED, (ZOOKEEPER_CHECK_VERSIONS[0], ZOOKEEPER, "counts"): False})


@pytest.mark.parametrize("corpus_passes", [True, False])
def test_make_tests_rest_judges_the_table_with_the_fast_runs_cells(pytester, restore_tested_on, corpus_passes):
    """`make test` runs the fast tests (the broker-log corpus's checks among them), then the rest: the
    rest's run judges the whole table, the fast run's cells carried in the file both are given."""
    failing = (KAFKA_VERSIONS[0], "kraft", "broker-log corpus")
    _project(pytester, "" if corpus_passes else f"    assert (version, mode, check) != {failing!r}\n")
    cells = f"--cells-file={pytester.path / 'cells.json'}"
    fast = pytester.runpytest_inprocess("-p", "tests.fast_first", "-m", "fast", cells)
    assert fast.ret == (0 if corpus_passes else 1), fast.stdout.str()
    assert not (pytester.path / "last.md").exists()  # a run of some tests only
    rest = pytester.runpytest_inprocess("-p", "tests.fast_first", "-m", "not fast", "--rest-of-suite", cells)
    assert rest.ret == (0 if corpus_passes else 1), rest.stdout.str()
    failed = {} if corpus_passes else {failing: False}
    assert (pytester.path / "last.md").read_text() == tested_on.table({**ALL_PASSED, **failed})


def test_the_table_is_on_one_page_and_the_readme_links_there():
    readme = (tested_on.ROOT / "README.md").read_text()
    assert tested_on.BEGIN not in readme and "docs/supported-versions.md" in readme
    pages = [tested_on.ROOT / "deploy" / "README.md", *(tested_on.ROOT / "docs").glob("*.md")]
    assert [page for page in pages if tested_on.BEGIN in page.read_text()] == [tested_on.PAGE]

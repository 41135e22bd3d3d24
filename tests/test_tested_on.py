"""The README's Tested-on table (tests/tested_on.py): it claims every check on every pinned version,
and a run whose per-version tests do not all pass can never end green beside it."""

from __future__ import annotations

import textwrap

import pytest

from tests import tested_on
from txn_workshop.harness.versions import KAFKA_VERSIONS

pytest_plugins = ["pytester"]

ALL_PASSED = {(version, check): True for version in KAFKA_VERSIONS for check in tested_on.CHECKS}


def test_the_readme_table_is_every_check_passed_on_every_version():
    assert tested_on.readme_table(tested_on.README.read_text()) == tested_on.table(ALL_PASSED), (
        "after a green `make test`: python -m tests.tested_on"
    )


def test_a_failed_cell_shows_as_failed():
    version, check = KAFKA_VERSIONS[-1], next(iter(tested_on.CHECKS))
    rendered = tested_on.table({**ALL_PASSED, (version, check): False})
    row = next(line for line in rendered.splitlines() if line.startswith(f"| {version} |"))
    assert row.split(" | ")[1] == tested_on.FAILED
    assert rendered != tested_on.table(ALL_PASSED)


def _project(pytester: pytest.Pytester, body: str) -> None:
    """A test project of per-version tests for every (version, check), with the README's table
    claiming all passed, and the recorder of tests/tested_on.py."""
    readme = pytester.path / "README.md"
    readme.write_text(f"x\n{tested_on.BEGIN}\n{tested_on.table(ALL_PASSED)}{tested_on.END}\n")
    pytester.makeini("[pytest]\ntestpaths = checks\n")
    pytester.makeconftest(
        textwrap.dedent(f"""
        import sys
        from pathlib import Path
        sys.path.insert(0, {str(tested_on.ROOT)!r})  # pytest-xdist's workers import the recorder too
        from tests import tested_on
        tested_on.README = Path({str(readme)!r})
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
        from txn_workshop.harness.versions import KAFKA_VERSIONS
        from tests.tested_on import CHECKS

        @pytest.mark.parametrize("version", KAFKA_VERSIONS)
        @pytest.mark.parametrize("check", [pytest.param(c, marks=pytest.mark.tested_on(c)) for c in CHECKS])
        def test_check(version, check):
            pass
    """)
        + body
    )


@pytest.fixture
def restore_tested_on():
    saved = tested_on.README, tested_on.LAST_RUN
    yield
    tested_on.README, tested_on.LAST_RUN = saved


@pytest.mark.parametrize("outcome, code", [("pass", 0), ("fail", 1), ("skip", 1), ("xfail", 1)])
def test_a_run_ends_green_only_when_every_cell_passed(pytester, restore_tested_on, outcome, code):
    action = "pass" if outcome == "pass" else f"pytest.{outcome}('this check')"
    _project(pytester, f"    if (version, check) == ({KAFKA_VERSIONS[0]!r}, 'counts'):\n        {action}\n")
    result = pytester.runpytest_inprocess()
    assert result.ret == code, result.stdout.str()
    last = (pytester.path / "last.md").read_text()
    assert (last == tested_on.table(ALL_PASSED)) == (outcome == "pass")
    if code:
        result.stdout.fnmatch_lines(["*README.md's Tested-on table is not what this run verified*"])


def test_a_run_of_some_tests_only_leaves_the_table_alone(pytester, restore_tested_on):
    _project(pytester, "")
    result = pytester.runpytest_inprocess("-k", KAFKA_VERSIONS[0])
    assert result.ret == 0
    assert not (pytester.path / "last.md").exists()


def test_two_workers_judge_the_table_as_one_run(pytester, restore_tested_on):
    """`make test` runs two pytest-xdist workers: the controller collects nothing, so the cells come
    with the workers' reports, and a failed cell still fails the run."""
    _project(pytester, f"    if (version, check) == ({KAFKA_VERSIONS[0]!r}, 'counts'):\n        pytest.fail('x')\n")
    result = pytester.runpytest_inprocess("-n", "2", "-p", "xdist")
    assert result.ret == 1, result.stdout.str()
    result.stdout.fnmatch_lines(["*README.md's Tested-on table is not what this run verified*"])
    last = (pytester.path / "last.md").read_text()
    assert last == tested_on.table({**ALL_PASSED, (KAFKA_VERSIONS[0], "counts"): False})

"""The one drift check: every generated file is what `make generate` makes from its source now."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from generators import output, run


def test_every_generated_file_is_up_to_date() -> None:
    stale = run.check()
    assert stale == [], f"out of date (run {output.COMMAND}): {', '.join(map(output.relative, stale))}"


def test_no_placeholder_is_left_in_a_generated_file() -> None:
    for path, text in run.outputs().items():
        assert "\ue000" not in text and "\ue001" not in text, path


def test_check_names_the_stale_files_and_the_command(tmp_path: Path, monkeypatch, capsys) -> None:
    edited, missing, fresh = tmp_path / "edited.json", tmp_path / "missing.json", tmp_path / "fresh.json"
    edited.write_text("edited by hand\n")
    fresh.write_text("generated\n")
    step = run.Step("x", lambda: {edited: "generated\n", missing: "generated\n", fresh: "generated\n"})
    monkeypatch.setattr(run, "steps", lambda: (step,))
    assert run.main(["--check"]) == 1
    err = capsys.readouterr().err
    assert "run make generate" in err and str(edited) in err and str(missing) in err and str(fresh) not in err
    assert run.main([]) == 0
    assert run.main(["--check"]) == 0 and edited.read_text() == missing.read_text() == "generated\n"


def test_a_file_no_longer_generated_is_stale_and_removed(tmp_path: Path) -> None:
    kept, stray = tmp_path / "kept.json", tmp_path / "renamed-away.json"
    kept.write_text("x")
    stray.write_text("x")
    assert output.stale({kept: "x"}, ["*.json"], root=tmp_path) == [stray.resolve()]
    assert output.write({kept: "x"}, ["*.json"], root=tmp_path) == [stray.resolve()]
    assert not stray.exists() and output.stale({kept: "x"}, ["*.json"], root=tmp_path) == []


def test_make_generate_runs_every_generator() -> None:
    makefile = (output.ROOT / "Makefile").read_text()
    recipe = makefile.split("\ngenerate:", 1)[1].split("\n\n", 1)[0]
    assert "-m generators" in recipe


def test_each_dashboard_is_committed_once() -> None:
    """The JSON in mixin/dashboards/ is what Grafana users, kustomize and the mixin all read."""
    from dashboards.generate import DASHBOARDS

    files = subprocess.run(["git", "ls-files", "-z"], cwd=output.ROOT, capture_output=True, text=True, check=True)
    for spec in DASHBOARDS:
        uid = f'"uid": {json.dumps(spec.uid)}'  # as the JSON has it, also inside a YAML or jsonnet copy
        holding = [
            name
            for name in files.stdout.split("\0")
            if name and (output.ROOT / name).is_file() and uid in (output.ROOT / name).read_text(errors="replace")
        ]
        assert holding == [f"mixin/dashboards/{spec.uid}.json"], spec.uid

"""The floor plan holds (txn_workshop.architecture): no import runs up or sideways between parts of a
floor, no files import each other, no product module outgrows a reading, and docs/architecture.md
draws the code as it is."""

from __future__ import annotations

from pathlib import Path

import exporter
from txn_workshop import architecture

# A module a maintainer reads in one sitting: past this, it holds more than one job (the tail, the
# diagnosis and the codec each did at 790-945 lines, and were split along their parts).
MAX_MODULE_LINES = 600


def test_no_import_runs_up_or_sideways_and_no_files_import_each_other():
    edges = architecture.graph()
    assert architecture.violations(edges) == []
    assert architecture.cycles(edges) == []


def test_every_module_stands_in_a_part_of_the_plan():
    for module in architecture.module_files():
        architecture.part_of(module)  # LookupError names a module no part holds


def test_the_check_sees_an_arrow_up_a_sideways_one_and_a_circle():
    edges = {
        "exporter.codec.states": {"exporter.model.coordinator"},
        "exporter.view.page": {"exporter.metrics.catalogue"},
        "exporter.model.coordinator": {"exporter.model.partition"},
        "exporter.model.partition": {"exporter.model.coordinator"},
    }
    assert architecture.violations(edges) == [
        "exporter.codec.states (codec) imports exporter.model.coordinator (model): runs up",
        "exporter.view.page (view) imports exporter.metrics.catalogue (metrics): runs sideways",
    ]
    assert architecture.cycles(edges) == [["exporter.model.coordinator", "exporter.model.partition"]]


def test_no_product_module_is_over_600_lines():
    package = Path(exporter.__file__).parent
    sizes = {
        str(path.relative_to(package.parent)): len(path.read_text().splitlines()) for path in package.rglob("*.py")
    }
    assert len(sizes) > 50
    assert {path: lines for path, lines in sizes.items() if lines > MAX_MODULE_LINES} == {}


def test_the_architecture_page_is_current():
    assert architecture.main(["--check"]) == 0, "docs/architecture.md is stale: run `make generate`"

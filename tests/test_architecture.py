"""The floor plan holds (txn_workshop.architecture): no import runs up or sideways between parts of a
floor, no files import each other, no Python file of the repository outgrows a reading, and
docs/architecture.md draws the code as it is."""

from __future__ import annotations

from txn_workshop import architecture

# A module a maintainer reads in one sitting: past this, it holds more than one job (the tail, the
# diagnosis, the codec and the dashboards each did at 790-945 lines, and were split along their parts).
MAX_MODULE_LINES = 600


def test_no_import_runs_up_or_sideways_and_no_files_import_each_other():
    edges = architecture.graph()
    assert architecture.violations(edges) == []
    assert architecture.cycles(edges) == []


def test_every_module_stands_in_a_part_of_the_plan():
    for module in architecture.module_files():
        architecture.part_of(module)  # LookupError names a module no part holds


def test_make_generate_stands_above_all_it_runs_and_none_of_them_imports_it():
    """generators/ (`make generate`) imports the generators; what they share, queries/, stands below
    them. An import of generators/ from below would make the two floors one loop again."""
    (top,) = architecture.FLOORS[-1]
    assert top.modules == ("generators",)
    floor = {module: architecture.part_of(module)[0] for module in architecture.module_files()}
    assert floor["queries.metrics"] < floor["dashboards.generate"] < floor["generators.run"]
    importers = {
        module
        for module, targets in architecture.graph().items()
        if module.split(".")[0] != "generators" and any(t.split(".")[0] == "generators" for t in targets)
    }
    assert importers == set()


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


def test_no_python_file_is_over_600_lines():
    """Every .py the repository holds (the product, the workshop, the benches, the generators, the
    tests), not only the product's modules."""
    root = architecture.ROOT
    sizes = {
        path.relative_to(root).as_posix(): len(path.read_text().splitlines())
        for path in root.rglob("*.py")
        if not any(part.startswith(".") or part.endswith(".egg-info") for part in path.relative_to(root).parts)
    }
    assert {"exporter/app/__init__.py", "bench/sidecar_cost.py", "workshop/txn_workshop/demo.py"} <= set(sizes)
    over = {path: lines for path, lines in sizes.items() if lines > MAX_MODULE_LINES}
    assert over == {}


def test_the_architecture_page_is_current():
    assert architecture.main(["--check"]) == 0, "docs/architecture.md is stale: run `make generate`"

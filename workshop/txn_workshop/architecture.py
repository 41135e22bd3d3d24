"""The floor plan: which part of the code stands on which, read from the code's own imports.

FLOORS below is the plan, bottom up. A module may import modules of its own part and of parts on
lower floors, nothing else: no import runs up, none runs sideways between two parts of one floor,
and no two files import each other, directly or round a circle. `violations()` and `cycles()` say
where the code breaks that (tests/test_architecture.py keeps both empty); `python -m
txn_workshop.architecture` writes docs/architecture.md from the plan and the imports it finds, so the
drawing cannot drift from the code.
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "architecture.md"


@dataclass(frozen=True)
class Part:
    name: str
    modules: tuple[str, ...]  # module names or package prefixes (a package holds its submodules)
    holds: str


# Bottom up. Parts on one floor are independent of each other.
FLOORS: tuple[tuple[Part, ...], ...] = (
    (
        Part("codec", ("exporter.codec",), "`__transaction_state` bytes in, records out; the transaction states"),
        Part(
            "utilities",
            ("exporter", "exporter.logs", "exporter.web_config"),
            "logging, the web config file, the settings' defaults",
        ),
    ),
    (
        Part(
            "contracts",
            ("exporter.contracts",),
            "the events sources emit; the KIP rules (lifecycles, hanging); Kafka versions and the known-bug table",
        ),
    ),
    (Part("broker_log", ("exporter.broker_log",), "the broker's log lines parsed into events"),),
    (
        Part("sources", ("exporter.sources",), "topic tail, segment files, broker-log tail, hanging scan"),
        Part("model", ("exporter.model",), "per-partition coordinator state, and its queries"),
    ),
    (
        Part("pipeline", ("exporter.pipeline",), "the Spark pipeline: decode, lifecycles, history, backfill"),
        Part("metrics", ("exporter.metrics",), "sinks: the metric catalogue, Prometheus, OTLP"),
        Part("view", ("exporter.view",), "the transactions view: JSON, page, terminal table"),
    ),
    (
        Part("server", ("exporter.http_server", "exporter.probe"), "the HTTP server and its probe"),
        Part("config", ("exporter.config",), "settings: flags, environment, file"),
    ),
    (Part("app", ("exporter.app",), "the composition root: one exporter process wired"),),
    (Part("commands", ("exporter.commands", "exporter.cli", "exporter.__main__"), "`txn-exporter` and its commands"),),
    (
        Part("workshop", ("txn_workshop",), "the broker harness and the demo (not in the wheel)"),
        Part("queries", ("queries",), "what dashboards and rules are written in: metric names, placeholders"),
    ),
    (
        Part(
            "generated",
            ("dashboards", "alerts", "mixin", "deploy"),
            "the dashboards' and rules' definitions, and the generators of them, the mixin, manifests",
        ),
        Part("bench", ("bench",), "benchmarks"),
    ),
    # Above all it runs, which import none of it.
    (
        Part(
            "generators",
            ("generators",),
            "`make generate`: every generator, in order; docs/metrics.md's metric table",
        ),
    ),
)
SOURCES = (
    ROOT / "exporter",
    ROOT / "workshop" / "txn_workshop",
    *(ROOT / d for d in ("generators", "queries", "dashboards", "alerts", "mixin", "deploy", "bench")),
)


def module_files() -> dict[str, Path]:
    """Every module of the plan's code, by name."""
    files = {}
    for top in SOURCES:
        base = top.parent
        for path in sorted(top.rglob("*.py")):
            parts = path.relative_to(base).with_suffix("").parts
            files[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return files


def imports(path: Path, name: str, known: Iterable[str]) -> Iterator[str]:
    """The plan's modules that `path` (module `name`) imports, wherever in the file."""
    known = set(known)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(
                    package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else [])
                )
            # `from package import module` imports the module; `from module import name`, the module.
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names]
        else:
            continue
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name:
                yield target


def graph() -> dict[str, set[str]]:
    files = module_files()
    return {name: set(imports(path, name, files)) for name, path in files.items()}


def part_of(module: str) -> tuple[int, Part]:
    """(floor, part) of `module`: the part naming it or its longest package prefix."""
    best: tuple[int, int, Part] | None = None
    for floor, parts in enumerate(FLOORS):
        for part in parts:
            for prefix in part.modules:
                if (module == prefix or module.startswith(prefix + ".")) and (best is None or len(prefix) > best[0]):
                    best = (len(prefix), floor, part)
    if best is None:
        raise LookupError(f"{module} is in no part of the floor plan ({__name__}.FLOORS)")
    return best[1], best[2]


def violations(edges: dict[str, set[str]]) -> list[str]:
    """Imports that run up a floor or sideways between two parts of one floor."""
    found = []
    for module, targets in sorted(edges.items()):
        floor, part = part_of(module)
        for target in sorted(targets):
            target_floor, target_part = part_of(target)
            if target_floor > floor or (target_floor == floor and target_part != part):
                way = "up" if target_floor > floor else "sideways"
                found.append(f"{module} ({part.name}) imports {target} ({target_part.name}): runs {way}")
    return found


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Files that import each other, directly or round a circle (Tarjan's strongly connected components)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(edges.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def document(edges: dict[str, set[str]]) -> str:
    """docs/architecture.md: the floors, the parts' modules, and the arrows between parts."""
    files = module_files()
    by_part: dict[str, list[str]] = {}
    for module in files:
        by_part.setdefault(part_of(module)[1].name, []).append(module)
    arrows = sorted(
        {(part_of(m)[1].name, part_of(t)[1].name) for m, ts in edges.items() for t in ts}
        - {(p.name, p.name) for f in FLOORS for p in f}
    )
    out = [
        "# Architecture: the floor plan",
        "",
        "<!-- Written by `python -m txn_workshop.architecture` (`make generate`) from the code's imports; do not edit. -->",
        "",
        "Data flows one way: sources → codec → coordinator model → sinks and the view. Each part below",
        "imports only parts on lower floors (an arrow points at what a part imports); parts on one",
        "floor are independent; no two files import each other. `tests/test_architecture.py` fails on",
        "any import that breaks this, and on this page being out of date.",
        "",
        "```mermaid",
        "flowchart TB",
    ]
    for floor in reversed(range(len(FLOORS))):
        out.append(f'  subgraph floor{floor + 1}["floor {floor + 1}"]')
        out += [f'    {p.name}["{p.name}"]' for p in FLOORS[floor]]
        out.append("  end")
    out += [f"  {a} --> {b}" for a, b in arrows]
    out += ["```", "", "| floor | part | holds | modules |", "|---|---|---|---|"]
    for floor in reversed(range(len(FLOORS))):
        for part in FLOORS[floor]:
            modules = sorted(by_part.get(part.name, ()))
            names = ", ".join(f"`{m}`" for m in modules)
            out.append(f"| {floor + 1} | {part.name} | {part.holds} | {names} |")
    out += ["", "Where common changes land:", ""]
    out += [f"- {change}" for change in CHANGES]
    return "\n".join(out) + "\n"


CHANGES = (
    "a new Kafka log-line format: `exporter/broker_log/lines.py` (the line's pattern and its event), its "
    "corpus under `tests/sources/broker_log_corpus/` and `tests/broker_log/`;",
    "a new counter or gauge end to end: `exporter/metrics/catalogue.py` (name, type, unit, labels, help, "
    "and `reads`, the snapshot field it renders), the model (`exporter/model/coordinator.py` counts it, "
    "`exporter/model/reading.py`'s snapshot carries it), their tests, then `make generate` (dashboards, "
    "alerts, mixin, docs); the Prometheus and OTLP sinks render it, and the drill-down dashboard graphs it, with "
    "no code of their own (a panel or an alert of its own is a choice, not a step);",
    "a change to the view: `exporter/view/` (query, page, table), and the model's query in "
    "`exporter/model/reading.py` if it needs a field the rows do not carry.",
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m txn_workshop.architecture", description=__doc__)
    parser.add_argument("--check", action="store_true", help="fail if docs/architecture.md is not current")
    args = parser.parse_args(argv)
    text = document(graph())
    if args.check:
        if not DOC.exists() or DOC.read_text() != text:
            print(f"{DOC.relative_to(ROOT)} is stale: run `make generate`", file=sys.stderr)
            return 1
        return 0
    DOC.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The view's document is declared (exporter.view.document), not `Any`: at most MAX_ANY explicit
`Any` in exporter/view, so mypy's strict setting for the view checks what the JSON, the page and the
table read."""

from __future__ import annotations

import ast
from pathlib import Path

import exporter.view

VIEW = Path(exporter.view.__file__).parent
MAX_ANY = 5


def any_uses(source: str) -> int:
    """How many times `Any` (or `typing.Any`, `t.Any`) is used in the code: in annotations, casts,
    aliases and quoted annotations; not in its import, comments or other strings."""
    count = 0
    for node in ast.walk(ast.parse(source)):
        if (isinstance(node, ast.Name) and node.id == "Any") or (
            isinstance(node, ast.Attribute) and node.attr == "Any"
        ):
            count += 1
        annotations = []
        if isinstance(node, ast.arg | ast.AnnAssign) and node.annotation is not None:
            annotations.append(node.annotation)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.returns is not None:
            annotations.append(node.returns)
        for annotation in annotations:
            for inner in ast.walk(annotation):
                if isinstance(inner, ast.Constant) and isinstance(inner.value, str):
                    count += any_uses(inner.value)
    return count


def test_the_view_has_at_most_five_explicit_any():
    counts = {str(path.relative_to(VIEW)): any_uses(path.read_text()) for path in sorted(VIEW.rglob("*.py"))}
    assert sum(counts.values()) <= MAX_ANY, {name: n for name, n in counts.items() if n}


def test_the_count_sees_annotations_casts_and_quoted_annotations_not_strings_or_imports():
    source = """
from typing import Any, cast
import typing
x: Any = 1
def f(a: dict[str, Any], b: "Mapping[str, Any]") -> typing.Any:
    return cast(Any, a)  # Any in a comment
y = "Any in a string"
"""
    assert any_uses(source) == 5

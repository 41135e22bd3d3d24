"""The hashed locks pip installs from (requirements/, made by `make lock`): CI's (scripts/setup) holds
every dependency of the product, its dev and spark extras, and the workshop's; the checks'
(`scripts/setup check`) the product's and the dev extra's; the image's (the Dockerfile) the
product's alone; the last two at CI's versions. A pyproject.toml edited without `make lock` after it
fails here, naming the requirement the lock no longer meets."""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parent.parent
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
ADAPTER = ROOT / "exporter" / "sources" / "kafka_python_adapter.py"
WORKSHOP = tomllib.loads((ROOT / "workshop" / "pyproject.toml").read_text())["project"]
# A pinned requirement: `name==version \`, then its hashes one a line.
_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+) \\$")


def pins(name: str) -> dict[str, tuple[str, int]]:
    """requirements/<name>: {canonical name: (version, how many hashes)}."""
    found: dict[str, tuple[str, int]] = {}
    current = None
    for line in (ROOT / "requirements" / name).read_text().splitlines():
        pin = _PIN.match(line)
        if pin:
            current = canonicalize_name(pin[1])
            found[current] = (pin[2], 0)
        elif line.strip().startswith("--hash=sha256:") and current is not None:
            version, hashes = found[current]
            found[current] = (version, hashes + 1)
        elif line and not line.startswith(" ") and not line.startswith("#"):
            raise AssertionError(f"requirements/{name}: a line that is no pin: {line!r}")
    return found


def unmet(requirements: list[str], locked: dict[str, tuple[str, int]]) -> list[str]:
    return [
        text
        for text in requirements
        if canonicalize_name((r := Requirement(text)).name) not in locked
        or not r.specifier.contains(locked[canonicalize_name(r.name)][0], prereleases=True)
    ]


def test_every_file_of_every_lock_is_pinned_with_its_hash() -> None:
    for name in ("ci.txt", "check.txt", "image.txt"):
        locked = pins(name)
        assert locked, name
        assert [n for n, (_, hashes) in locked.items() if hashes == 0] == [], name
        assert "kafka-txn-exporter" not in locked, "the project is installed from its source, --no-deps"
        assert "make lock" in (ROOT / "requirements" / name).read_text().splitlines()[1], "how to remake it"


def test_cis_lock_meets_every_requirement_of_the_product_its_extras_and_the_workshop() -> None:
    requirements = [*PROJECT["dependencies"], *PROJECT["optional-dependencies"]["dev"]]
    requirements += PROJECT["optional-dependencies"]["spark"]
    assert unmet(requirements, pins("ci.txt")) == [], "run make lock"
    # The workshop's one dependency is the product (installed from its source): nothing to lock.
    assert WORKSHOP["dependencies"] == ["kafka-txn-exporter"]


def test_the_checks_lock_is_the_products_and_the_dev_extras_at_cis_versions() -> None:
    check, ci = pins("check.txt"), pins("ci.txt")
    assert unmet([*PROJECT["dependencies"], *PROJECT["optional-dependencies"]["dev"]], check) == [], "run make lock"
    assert {n: v for n, (v, _) in check.items()} == {n: ci[n][0] for n in check}, "run make lock"
    # `make check` runs no test of the spark extra: its setup fetches none of it (pyarrow comes with
    # its stubs, which mypy reads).
    assert not {"pyspark", "pandas", "numpy", "matplotlib"} & set(check)


def test_the_images_lock_is_the_products_dependencies_at_cis_versions() -> None:
    image, ci = pins("image.txt"), pins("ci.txt")
    assert unmet(PROJECT["dependencies"], image) == [], "run make lock"
    assert {n: v for n, (v, _) in image.items()} == {n: ci[n][0] for n in image}, "run make lock"
    # Nothing of the extras only: the image carries no test tools or Spark.
    assert not {"pytest", "hypothesis", "pyspark", "pandas", "mypy", "uv"} & set(image)


def reached_private_names(path: Path) -> tuple[set[str], bool]:
    """The private names (`_x`, no dunders) a module reads off objects other than its own (`x._y`, x
    neither self nor cls; getattr(x, "_y")), and whether it imports kafka-python."""
    names: set[str] = set()
    imports_kafka_python = False
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Attribute) and not (
            isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")
        ):
            names.add(node.attr)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("getattr", "hasattr"):
            names.update(a.value for a in node.args[1:2] if isinstance(a, ast.Constant) and isinstance(a.value, str))
        elif isinstance(node, ast.Import):
            imports_kafka_python |= any(a.name.split(".")[0] == "kafka" for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            imports_kafka_python |= (node.module or "").split(".")[0] == "kafka" and not node.level
    return {n for n in names if n.startswith("_") and not n.startswith("__")}, imports_kafka_python


def test_kafka_python_is_pinned_exactly() -> None:
    """The exporter calls kafka-python's private internals (exporter/sources/kafka_python_adapter.py, alone:
    the next test): a range would let a release that moved them in."""
    (kafka_python,) = [r for r in map(Requirement, PROJECT["dependencies"]) if r.name == "kafka-python"]
    (spec,) = kafka_python.specifier
    assert spec.operator == "==" and pins("image.txt")["kafka-python"][0] == spec.version


def test_kafka_pythons_private_parts_are_the_adapters_alone() -> None:
    """So the pin above, and tests/sources/test_kafka_python_adapter.py's check of each private name
    at the pinned version, cover one file: no other module of the exporter reads a name the adapter
    reads, and one that imports kafka-python reads no private name of another object at all."""
    adapter, _ = reached_private_names(ADAPTER)
    assert "_manager" in adapter  # the check sees what it looks for
    strays = {}
    for path in sorted((ROOT / "exporter").rglob("*.py")):
        if path == ADAPTER:
            continue
        names, imports_kafka_python = reached_private_names(path)
        if stray := names if imports_kafka_python else names & adapter:
            strays[path.relative_to(ROOT).as_posix()] = sorted(stray)
    assert strays == {}, "kafka-python's private parts belong in exporter/sources/kafka_python_adapter.py"

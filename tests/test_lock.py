"""The hashed locks pip installs from (requirements/, made by `make lock`): CI's (scripts/setup) holds
every dependency of the product, its dev and spark extras, and the workshop's; the image's (the
Dockerfile) the product's alone, at CI's versions. A pyproject.toml edited without `make lock` after
it fails here, naming the requirement the lock no longer meets."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parent.parent
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
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
    for name in ("ci.txt", "image.txt"):
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


def test_the_images_lock_is_the_products_dependencies_at_cis_versions() -> None:
    image, ci = pins("image.txt"), pins("ci.txt")
    assert unmet(PROJECT["dependencies"], image) == [], "run make lock"
    assert {n: v for n, (v, _) in image.items()} == {n: ci[n][0] for n in image}, "run make lock"
    # Nothing of the extras only: the image carries no test tools or Spark.
    assert not {"pytest", "hypothesis", "pyspark", "pandas", "mypy", "uv"} & set(image)


def test_kafka_python_is_pinned_exactly() -> None:
    """The cluster-state client calls kafka-python's private internals: a range would let a release
    that moved them in."""
    (kafka_python,) = [r for r in map(Requirement, PROJECT["dependencies"]) if r.name == "kafka-python"]
    (spec,) = kafka_python.specifier
    assert spec.operator == "==" and pins("image.txt")["kafka-python"][0] == spec.version

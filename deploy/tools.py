"""The tools deploy/'s tests use, from registries, pinned, cached in ~/.cache/kafka-txn-exporter
(scripts/setup: ``python -m deploy.tools``): kustomize (the Go module of the kustomize that
`kubectl apply -k` embeds) renders the overlays; the real schemas validate what it renders:

- Kubernetes' own objects: the JSON schemas of Kubernetes KUBERNETES_VERSION that PyPI's
  ``kubernetes-validate`` bundles, with its strict variant (unknown fields are errors).
- The Prometheus Operator's PodMonitor and PrometheusRule: the ``openAPIV3Schema`` of its CRDs, from
  the prometheus-operator Go module (Go module proxy, ``go mod download``), made strict the way
  the API server treats them (unknown fields are errors, except where the CRD preserves them).
- Strimzi's Kafka, KafkaNodePool and KafkaUser: npm's ``@kubernetes-models/strimzi-kafka-operator``,
  validators compiled from Strimzi's released CRDs (STRIMZI_CRDS), run by node. They check types,
  enums and required fields but, as the CRDs say nothing against them, not unknown fields.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from exporter.pipeline.maven import cache_root

KUSTOMIZE = "sigs.k8s.io/kustomize/kustomize/v5@v5.5.0"  # as in kubectl 1.32
KUBERNETES_VERSION = "1.32.0"
PROMETHEUS_OPERATOR = "github.com/prometheus-operator/prometheus-operator@v0.85.0"
PROMETHEUS_OPERATOR_CRDS = ("podmonitors", "prometheusrules")  # the kinds deploy/ uses
STRIMZI_MODELS = "@kubernetes-models/strimzi-kafka-operator@1.0.1"
STRIMZI_CRDS = "0.49.0"  # what STRIMZI_MODELS was generated from (its package.json)
HOME = cache_root()  # the Kafka jars' cache (TXN_EXPORTER_CACHE)
KUSTOMIZE_BIN = HOME / "tools" / ("kustomize-" + KUSTOMIZE.rsplit("@", 1)[1]) / "kustomize"
CACHE = HOME / "schemas"
CRD_DIR = CACHE / ("prometheus-operator-" + PROMETHEUS_OPERATOR.rsplit("@", 1)[1])
STRIMZI_DIR = CACHE / ("strimzi-models-" + STRIMZI_MODELS.rsplit("@", 1)[1])
STRIMZI_PACKAGE = STRIMZI_DIR / "node_modules" / "@kubernetes-models" / "strimzi-kafka-operator"
STRIMZI_VALIDATE = Path(__file__).parent / "validate_strimzi.mjs"


class CheckError(Exception):
    """A manifest the real schema refuses, no schema or tool for it (setup not run), a kustomize failure."""


# -- fetching (setup) ------------------------------------------------------------------------------
# What the tools print (go's `go: downloading ...`, npm's notices) goes to stderr, which scripts/setup
# sends to its log, shown only if the step fails (it names what it fetches: `--missing`).


def _run(command: list[str], capture: bool = False, **kwargs) -> str:
    """Runs a fetching tool, its output on stderr (its stdout too, unless `capture`: then returned).
    A failure raises CheckError naming the command."""
    sys.stderr.flush()
    done = subprocess.run(command, stdout=subprocess.PIPE if capture else sys.stderr, text=True, **kwargs)
    if done.returncode != 0:
        said = (done.stdout or "").strip()[-2000:] if capture else ""
        raise CheckError(f"`{' '.join(command)}` failed (exit {done.returncode})" + (f": {said}" if said else ""))
    return done.stdout or ""


def fetch_kustomize() -> None:
    if KUSTOMIZE_BIN.exists():
        return
    staging = KUSTOMIZE_BIN.parent.with_suffix(".tmp")
    shutil.rmtree(staging, ignore_errors=True)
    _run(["go", "install", KUSTOMIZE], env={**os.environ, "GOBIN": str(staging)})
    staging.rename(KUSTOMIZE_BIN.parent)


def _strict(schema: dict) -> dict:
    """A CRD's structural schema as JSON schema, with the API server's field validation: no unknown
    fields where the CRD lists properties, int-or-string as either."""
    schema = {k: v for k, v in schema.items() if not k.startswith("x-kubernetes-validations")}
    if schema.pop("x-kubernetes-int-or-string", False):
        schema.pop("type", None)
        schema["anyOf"] = [{"type": "integer"}, {"type": "string"}]
    preserve = schema.pop("x-kubernetes-preserve-unknown-fields", False)
    if schema.pop("nullable", False) and "type" in schema:
        schema["type"] = [schema["type"], "null"]
    if "properties" in schema:
        schema["properties"] = {k: _strict(v) for k, v in schema["properties"].items()}
        if not preserve and "additionalProperties" not in schema:
            schema["additionalProperties"] = False
    for key in ("items", "additionalProperties"):
        if isinstance(schema.get(key), dict):
            schema[key] = _strict(schema[key])
    for key in ("allOf", "anyOf", "oneOf"):
        if key in schema:
            schema[key] = [_strict(s) for s in schema[key]]
    return schema


def fetch_prometheus_operator() -> None:
    if CRD_DIR.is_dir():
        return
    module = json.loads(_run(["go", "mod", "download", "-json", PROMETHEUS_OPERATOR], capture=True))
    staging = CRD_DIR.with_suffix(".tmp")
    shutil.rmtree(staging, ignore_errors=True)
    for name in PROMETHEUS_OPERATOR_CRDS:
        path = Path(module["Dir"], "example", "prometheus-operator-crd", f"monitoring.coreos.com_{name}.yaml")
        crd = yaml.safe_load(path.read_text())
        for version in crd["spec"]["versions"]:
            out = staging / crd["spec"]["group"] / f"{crd['spec']['names']['kind']}_{version['name']}.json"
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(json.dumps(_strict(version["schema"]["openAPIV3Schema"])))
    staging.rename(CRD_DIR)


def fetch_strimzi() -> None:
    if STRIMZI_PACKAGE.is_dir():
        return
    staging = STRIMZI_DIR.with_suffix(".tmp")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    quiet = ["--no-audit", "--no-fund", "--no-update-notifier", "--ignore-scripts", "--loglevel=error"]
    _run(["npm", "install", *quiet, "--prefix", str(staging), STRIMZI_MODELS])
    package = json.loads((staging / STRIMZI_PACKAGE.relative_to(STRIMZI_DIR) / "package.json").read_text())
    if not any(f"/{STRIMZI_CRDS}/" in url for url in package["crd-generate"]["input"]):
        raise CheckError(f"{STRIMZI_MODELS} is not generated from Strimzi {STRIMZI_CRDS}'s CRDs")
    staging.rename(STRIMZI_DIR)


# -- validating (tests) ----------------------------------------------------------------------------


def _api_group(document: dict) -> str:
    return document["apiVersion"].rpartition("/")[0]


def validate_kubernetes(document: dict) -> None:
    import kubernetes_validate

    try:
        kubernetes_validate.validate(document, KUBERNETES_VERSION, strict=True)
    except kubernetes_validate.ValidationError as e:
        raise CheckError(f"{'/'.join(map(str, e.absolute_path))}: {e.message[:300]}") from None
    except kubernetes_validate.SchemaNotFoundError as e:
        raise CheckError(e.message) from None


def validate_crd(document: dict) -> None:
    import jsonschema

    version = document["apiVersion"].rpartition("/")[2]
    path = CRD_DIR / _api_group(document) / f"{document['kind']}_{version}.json"
    if not path.exists():
        raise CheckError(f"no schema for {document['apiVersion']} {document['kind']} (run scripts/setup)")
    validator = jsonschema.Draft202012Validator(json.loads(path.read_text()))
    errors = sorted(validator.iter_errors(document), key=lambda e: list(e.absolute_path))
    if errors:
        raise CheckError("; ".join(f"{'/'.join(map(str, e.absolute_path))}: {e.message[:300]}" for e in errors))


def validate_strimzi(documents: list[dict]) -> list[str]:
    """One message per document: "" when valid."""
    if not STRIMZI_PACKAGE.is_dir():
        raise CheckError(f"no Strimzi validators in {STRIMZI_PACKAGE} (run scripts/setup)")
    done = subprocess.run(
        ["node", str(STRIMZI_VALIDATE), str(STRIMZI_PACKAGE)],
        input=json.dumps(documents),
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(done.stdout)


def validate_all(documents: list[dict]) -> dict[str, str]:
    """``kind/name`` -> what the real schema says is wrong, for every invalid document."""
    problems = {}
    strimzi = [d for d in documents if _api_group(d).endswith("strimzi.io")]
    for document, message in zip(strimzi, validate_strimzi(strimzi) if strimzi else []):
        if message:
            problems[f"{document['kind']}/{document['metadata']['name']}"] = message
    for document in documents:
        group = _api_group(document)
        if group.endswith("strimzi.io"):
            continue
        try:
            (validate_crd if "." in group else validate_kubernetes)(document)
        except CheckError as e:
            problems[f"{document['kind']}/{document['metadata']['name']}"] = str(e)
    return problems


def kustomize(directory: Path) -> list[dict]:
    """The objects `kubectl apply -k directory` would apply."""
    if not KUSTOMIZE_BIN.exists():
        raise CheckError(f"no kustomize at {KUSTOMIZE_BIN} (run scripts/setup)")
    done = subprocess.run([str(KUSTOMIZE_BIN), "build", str(directory)], capture_output=True, text=True)
    if done.returncode != 0:
        raise CheckError(f"kustomize build {directory}: {done.stderr.strip()}")
    return [d for d in yaml.safe_load_all(done.stdout) if d is not None]


def missing() -> list[str]:
    """What fetching would fetch: the tools and schemas not in the cache yet."""
    return [
        name
        for name, there in (
            ("kustomize", KUSTOMIZE_BIN.exists()),
            ("the Prometheus Operator's CRDs", CRD_DIR.is_dir()),
            ("Strimzi's validators", STRIMZI_PACKAGE.is_dir()),
        )
        if not there
    ]


def main(argv: list[str] | None = None) -> int:
    """Fetches what is missing; `--missing`: names it (one line, nothing when all is there)."""
    if (sys.argv[1:] if argv is None else argv) == ["--missing"]:
        if missing():
            print(", ".join(missing()))
        return 0
    try:
        fetch_kustomize()
        fetch_prometheus_operator()
        fetch_strimzi()
    except (CheckError, OSError) as e:
        print(f"deploy.tools: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

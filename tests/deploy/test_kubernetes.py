"""deploy/: the Kubernetes and Strimzi examples, checked against a vendored minimal schema
(k8s-minimal-schema.yaml; kubeconform is not installable here) plus the cross-references a schema
cannot see: mounts name volumes, probes and Services name ports, selectors select, the exporter's
flags and environment variables exist, and the sidecar runs hardened."""

from __future__ import annotations

import re
import ssl
from pathlib import Path

import jsonschema
import pytest
import yaml

from exporter import config
from exporter.cli import build_parser

ROOT = Path(__file__).resolve().parents[2]
MANIFESTS = sorted((ROOT / "deploy").rglob("*.yaml"))
SCHEMA = yaml.safe_load((Path(__file__).parent / "k8s-minimal-schema.yaml").read_text())


def _documents(path: Path) -> list[dict]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d is not None]


def _pod_specs(document: dict) -> list[tuple[dict, dict]]:
    """(pod template labels, pod spec) of a workload."""
    if document["kind"] in ("StatefulSet", "Deployment"):
        template = document["spec"]["template"]
        return [(template["metadata"].get("labels", {}), template["spec"])]
    return []


def _exporters(documents: list[dict]) -> list[tuple[dict, dict]]:
    return [(spec, c) for d in documents for _, spec in _pod_specs(d) for c in spec["containers"]
            if "txn-exporter" in c["image"]]


def test_there_are_manifests() -> None:
    assert {p.name for p in MANIFESTS} >= {"kafka-with-exporter.yaml", "kafka-txn-exporter.yaml"}


@pytest.mark.parametrize("path", MANIFESTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_manifest_matches_schema(path: Path) -> None:
    validator = jsonschema.Draft202012Validator(SCHEMA)
    for document in _documents(path):
        errors = sorted(validator.iter_errors(document), key=lambda e: e.path)
        assert not errors, f"{document.get('kind')} {document.get('metadata', {}).get('name')}: " + "; ".join(
            f"{'/'.join(map(str, e.absolute_path))}: {e.message[:200]}" for e in errors)


@pytest.mark.parametrize("path", MANIFESTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_references_resolve(path: Path) -> None:
    documents = _documents(path)
    for document in documents:
        for labels, spec in _pod_specs(document):
            selector = document["spec"]["selector"]["matchLabels"]
            assert selector.items() <= labels.items(), "the selector selects the pod template"
            volumes = {v["name"] for v in spec.get("volumes", [])}
            volumes |= {c["metadata"]["name"] for c in document["spec"].get("volumeClaimTemplates", [])}
            for container in spec["containers"]:
                for mount in container.get("volumeMounts", []):
                    assert mount["name"] in volumes, f"{container['name']} mounts unknown volume {mount['name']}"
                ports = {p.get("name") for p in container.get("ports", [])}
                for probe in ("livenessProbe", "readinessProbe"):
                    port = container.get(probe, {}).get("httpGet", {}).get("port")
                    assert port is None or port in ports
    services = [d for d in documents if d["kind"] == "Service"]
    pods = [(labels, spec) for d in documents for labels, spec in _pod_specs(d)]
    for service in services:
        selected = [spec for labels, spec in pods if service["spec"]["selector"].items() <= labels.items()]
        assert selected, f"Service {service['metadata']['name']} selects no pod"
        names = {p.get("name") for spec in selected for c in spec["containers"] for p in c.get("ports", [])}
        for port in service["spec"]["ports"]:
            assert port["targetPort"] in names
    for monitor in (d for d in documents if d["kind"] == "ServiceMonitor"):
        wanted = monitor["spec"]["selector"]["matchLabels"].items()
        matching = [s for s in services if wanted <= s["metadata"].get("labels", {}).items()]
        assert matching, "the ServiceMonitor selects the Service"
        service_ports = {p["name"] for s in matching for p in s["spec"]["ports"]}
        assert {e["port"] for e in monitor["spec"]["endpoints"]} <= service_ports
    for monitor in (d for d in documents if d["kind"] == "PodMonitor"):
        wanted = monitor["spec"]["selector"]["matchLabels"].items()
        assert any(wanted <= labels.items() for labels, _ in pods)


@pytest.mark.parametrize("path", MANIFESTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_exporter_container_is_hardened_and_configured_with_real_options(path: Path) -> None:
    exporters = _exporters(_documents(path))
    assert exporters
    for _, container in exporters:
        security = container["securityContext"]
        assert security["runAsNonRoot"] and security["readOnlyRootFilesystem"]
        assert security["allowPrivilegeEscalation"] is False and security["capabilities"]["drop"] == ["ALL"]
        assert security["runAsUser"] == 10001  # the Dockerfile's USER
        assert "limits" in container["resources"] and container["livenessProbe"] and container["readinessProbe"]
        # Every flag exists: parse them as `txn-exporter` does ($(VAR) references as placeholders).
        args = [re.sub(r"\$\(\w+\)", "x", a) for a in container["args"]]
        build_parser().parse_args(args)
        known = {config.env_name(f) for f in config.Settings.model_fields} | {config.CONFIG_ENV}
        for variable in container.get("env", []):
            name = variable["name"]
            if name.startswith("TXN_EXPORTER_") and not name.startswith("TXN_EXPORTER_PROBE_"):
                assert name in known, f"{name} is not an exporter setting"


def test_sidecar_shares_the_broker_log_volume_read_only() -> None:
    documents = _documents(ROOT / "deploy/kubernetes/kafka-with-exporter.yaml")
    (spec, exporter), = _exporters(documents)
    broker = next(c for c in spec["containers"] if c is not exporter)
    log_flag = next(a for a in exporter["args"] if a.startswith("--broker-log="))
    log_dir = str(Path(log_flag.split("=", 1)[1]).parent)
    exporter_mount = next(m for m in exporter["volumeMounts"] if m["mountPath"] == log_dir)
    assert exporter_mount["readOnly"] is True
    broker_mount = next(m for m in broker["volumeMounts"] if m["name"] == exporter_mount["name"])
    assert broker_mount["mountPath"] == log_dir


def test_example_kafka_client_config_is_a_valid_exporter_config(tmp_path: Path) -> None:
    documents = _documents(ROOT / "deploy/kubernetes/kafka-with-exporter.yaml")
    secret = next(d for d in documents if d["metadata"]["name"] == "txn-exporter-kafka")
    path = tmp_path / "config.yml"
    # librdkafka loads the CA file as it checks the settings: this host's CAs stand in for the pod's.
    path.write_text(secret["stringData"]["config.yml"].replace(
        "/etc/txn-exporter/kafka/ca.crt", ssl.get_default_verify_paths().capath))
    import argparse

    settings = config.load(argparse.Namespace(config=str(path)), {"TXN_EXPORTER_BOOTSTRAP_SERVERS": "k:9092"})
    assert settings.redacted()["kafka"]["sasl.password"] == "***"


def test_strimzi_user_has_least_privilege() -> None:
    documents = _documents(ROOT / "deploy/strimzi/kafka-txn-exporter.yaml")
    user = next(d for d in documents if d["kind"] == "KafkaUser")
    acls = [(a["resource"]["type"], a["resource"]["name"], sorted(a["operations"]))
            for a in user["spec"]["authorization"]["acls"]]
    assert acls == [("topic", "__transaction_state", ["Describe", "Read"])]

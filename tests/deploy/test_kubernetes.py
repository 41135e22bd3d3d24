"""deploy/: every kustomize overlay rendered by the real kustomize, every rendered object validated
against the real schemas (deploy/tools.py: Kubernetes' own, the Prometheus Operator's CRDs,
Strimzi's CRD validators; all pinned, fetched and cached by scripts/setup), the generated monitoring
component holding the generated rules and the one copy of the dashboards' JSON, plus the cross-references a schema cannot see: mounts name volumes, probes
name ports, selectors select, the PodMonitor finds the exporters and labels them as the rules
expect, the exporter's flags and variables exist, the sidecar runs hardened, reaches the whole
cluster and outlives its broker's shutdown."""

from __future__ import annotations

import argparse
import functools
import re
import ssl
from pathlib import Path

import pytest
import yaml

from alerts.generate import RULES_PATH
from dashboards.generate import DASHBOARDS, path_of
from deploy import generate, tools
from exporter import config, defaults
from exporter.cli import build_parser

ROOT = Path(__file__).resolve().parents[2]
OVERLAYS = sorted(p.parent.name for p in (ROOT / "deploy" / "overlays").glob("*/kustomization.yaml"))
pytestmark = pytest.mark.tools


@functools.cache
def render(overlay: str) -> tuple[dict, ...]:
    return tuple(tools.kustomize(ROOT / "deploy" / "overlays" / overlay))


def _of_kind(documents, kind: str) -> list[dict]:
    return [d for d in documents if d["kind"] == kind]


def _pod_templates(documents) -> list[tuple[dict, dict]]:
    """(pod template labels, pod spec) of each workload."""
    return [
        (d["spec"]["template"]["metadata"].get("labels", {}), d["spec"]["template"]["spec"])
        for d in documents
        if d["kind"] in ("StatefulSet", "Deployment")
    ]


def _containers(spec: dict) -> list[dict]:
    """A pod spec's containers, its init containers (native sidecars among them) included."""
    return spec.get("initContainers", []) + spec["containers"]


def _exporters(documents) -> list[tuple[dict, dict, dict]]:
    return [
        (labels, spec, c)
        for labels, spec in _pod_templates(documents)
        for c in _containers(spec)
        if "txn-exporter" in c["image"]
    ]


def test_overlays_are_the_three_ways_to_deploy() -> None:
    assert OVERLAYS == ["kubernetes", "monitoring", "strimzi"]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_rendered_objects_match_the_real_schemas(overlay: str) -> None:
    documents = list(render(overlay))
    assert documents
    assert tools.validate_all(documents) == {}


def test_schema_validation_refuses_what_the_api_server_would() -> None:
    """The validators are strict where the real schemas are: a misspelt field, a bad enum."""
    documents = {d["kind"]: d for overlay in ("kubernetes", "strimzi") for d in render(overlay)}
    statefulset = yaml.safe_load(yaml.safe_dump(documents["StatefulSet"]))
    statefulset["spec"]["template"]["spec"]["initContainers"][0]["volumeMount"] = []
    monitor = yaml.safe_load(yaml.safe_dump(documents["PodMonitor"]))
    monitor["spec"]["podMetricsEndpoints"][0]["intervall"] = "15s"
    rule = yaml.safe_load(yaml.safe_dump(documents["PrometheusRule"]))
    rule["spec"]["groups"][1]["rules"][0]["for"] = "ten minutes"
    user = yaml.safe_load(yaml.safe_dump(documents["KafkaUser"]))
    user["spec"]["authorization"]["acls"][0]["operations"] = ["Reed"]
    kafka = yaml.safe_load(yaml.safe_dump(documents["Kafka"]))
    kafka["spec"]["kafka"]["logging"]["type"] = "file"
    problems = tools.validate_all([statefulset, monitor, rule, user, kafka])
    assert "'volumeMount' was unexpected" in problems["StatefulSet/kafka"]
    assert "'intervall' was unexpected" in problems["PodMonitor/kafka-txn-exporter"]
    assert "ten minutes" in problems["PrometheusRule/kafka-txn-exporter"]
    assert "operations/0" in problems["KafkaUser/txn-exporter"]
    assert "logging/type" in problems["Kafka/my-kafka"]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_monitoring_component_holds_the_generated_rules_and_dashboards(overlay: str) -> None:
    documents = render(overlay)
    (rule,) = _of_kind(documents, "PrometheusRule")
    assert rule["spec"] == yaml.safe_load(RULES_PATH.read_text())
    dashboards = {
        m["metadata"]["name"]: m
        for m in _of_kind(documents, "ConfigMap")
        if m["metadata"].get("labels", {}).get("grafana_dashboard") == "1"
    }
    assert len(dashboards) == len(DASHBOARDS)
    for spec in DASHBOARDS:
        config_map = dashboards[generate.config_map_name(spec.uid)]
        assert config_map["metadata"]["annotations"]["grafana_folder"] == generate.GRAFANA_FOLDER
        assert config_map["data"] == {path_of(spec).name: path_of(spec).read_text()}


def _setting(container: dict, field: str) -> str | None:
    """The exporter setting `field` as ``container`` gives it: its flag, else its variable (a literal
    value; one from a reference as "ref"), else None."""
    flag = "--" + field.replace("_", "-") + "="
    flags = [a.removeprefix(flag) for a in container.get("args", []) if a.startswith(flag)]
    env = [v.get("value", "ref") for v in container.get("env", []) if v["name"] == config.env_name(field)]
    return (flags or env or [None])[0]


def _listen_port(container: dict) -> int:
    """The port the exporter in ``container`` serves on: its --listen, else TXN_EXPORTER_LISTEN, else
    the default (YAML cannot import exporter.defaults: this holds the manifests to it)."""
    return int((_setting(container, "listen") or defaults.LISTEN).rpartition(":")[2])


@pytest.mark.parametrize("overlay", ["kubernetes", "strimzi"])
def test_pod_monitor_scrapes_every_exporter_as_the_rules_expect(overlay: str) -> None:
    documents = render(overlay)
    (monitor,) = _of_kind(documents, "PodMonitor")
    wanted = monitor["spec"]["selector"]["matchLabels"].items()
    (endpoint,) = monitor["spec"]["podMetricsEndpoints"]
    exporters = _exporters(documents)
    assert exporters
    for labels, _, container in exporters:
        assert wanted <= labels.items(), "the PodMonitor selects the exporter's pods"
        ports = {p["name"]: p["containerPort"] for p in container["ports"]}
        assert ports.get(endpoint["port"]) == _listen_port(container), "the port scraped is the one served"
        assert labels.get("txn-exporter/cluster"), "the cluster label the rules group by"
    relabel = {r["targetLabel"]: r for r in endpoint["relabelings"]}
    assert relabel["job"]["replacement"] == defaults.SCRAPE_JOB
    assert relabel["cluster"]["sourceLabels"] == ["__meta_kubernetes_pod_label_txn_exporter_cluster"]
    web_config = any(a.startswith("--web-config-file") for _, _, c in exporters for a in c["args"])
    assert (endpoint.get("scheme") == "https" and "basicAuth" in endpoint) == web_config


@pytest.mark.parametrize("overlay", ["kubernetes", "strimzi"])
def test_references_resolve(overlay: str) -> None:
    documents = render(overlay)
    for workload in (d for d in documents if d["kind"] in ("StatefulSet", "Deployment")):
        template = workload["spec"]["template"]
        assert workload["spec"]["selector"]["matchLabels"].items() <= template["metadata"]["labels"].items()
        volumes = {v["name"] for v in template["spec"].get("volumes", [])}
        volumes |= {c["metadata"]["name"] for c in workload["spec"].get("volumeClaimTemplates", [])}
        secrets = {s["metadata"]["name"] for s in _of_kind(documents, "Secret")}
        for volume in template["spec"].get("volumes", []):
            name = volume.get("secret", {}).get("secretName")
            # Secrets of the base, or those Strimzi makes (the CA, the KafkaUser's password).
            assert name is None or name in secrets or name.startswith("my-kafka-")
        for container in _containers(template["spec"]):
            for mount in container.get("volumeMounts", []):
                assert mount["name"] in volumes, f"{container['name']} mounts unknown volume {mount['name']}"
            ports = {p.get("name") for p in container.get("ports", [])}
            for probe in ("livenessProbe", "readinessProbe"):
                port = container.get(probe, {}).get("httpGet", {}).get("port")
                assert port is None or port in ports


@pytest.mark.parametrize("overlay", ["kubernetes", "strimzi"])
def test_exporter_container_is_hardened_and_configured_with_real_options(overlay: str) -> None:
    exporters = _exporters(render(overlay))
    assert exporters
    for _, _, container in exporters:
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
    ((_, spec, exporter),) = _exporters(render("kubernetes"))
    broker = next(c for c in spec["containers"] if c is not exporter)
    log_flag = next(a for a in exporter["args"] if a.startswith("--broker-log="))
    log_dir = str(Path(log_flag.split("=", 1)[1]).parent)
    exporter_mount = next(m for m in exporter["volumeMounts"] if m["mountPath"] == log_dir)
    assert exporter_mount["readOnly"] is True
    broker_mount = next(m for m in broker["volumeMounts"] if m["name"] == exporter_mount["name"])
    assert broker_mount["mountPath"] == log_dir


# What a broker pod's grace period is when unset (Kubernetes' default, and Strimzi's): the time its
# broker's controlled shutdown had before the exporter's drain needed more.
BROKER_SHUTDOWN_SECONDS = 30


def _beside_a_broker(spec: dict, exporter: dict) -> bool:
    return any(c is not exporter and "kafka" in c["image"] for c in _containers(spec))


@pytest.mark.parametrize("overlay", ["kubernetes", "strimzi"])
def test_exporter_reaches_the_whole_cluster_and_names_its_broker(overlay: str) -> None:
    """An exporter drains the partitions its broker gave up from their new leaders, its own broker
    perhaps down: it bootstraps from more than that broker, and --broker-id names it (a bootstrap
    list naming several brokers does not)."""
    for _, spec, exporter in _exporters(render(overlay)):
        assert "--all-partitions" in exporter["args"] or _setting(exporter, "broker_id") is not None
        servers = (_setting(exporter, "bootstrap_servers") or "").split(",")
        assert any("$(POD_NAME)" not in s for s in servers), "an address that is not its own broker's"
        if _beside_a_broker(spec, exporter):
            assert any(s.startswith("$(POD_NAME).") for s in servers), "and its own broker"


def test_sidecar_outlives_its_brokers_shutdown() -> None:
    """A native sidecar (an init container that restarts Always) is stopped once the broker has
    exited: it sees the controlled shutdown move its broker's partitions and drains them; the grace
    period covers that shutdown and then the drain."""
    ((_, spec, exporter),) = _exporters(render("kubernetes"))
    assert exporter in spec.get("initContainers", []) and exporter["restartPolicy"] == "Always"
    drain = float(_setting(exporter, "shutdown_drain_seconds") or defaults.SHUTDOWN_DRAIN_SECONDS)
    assert spec["terminationGracePeriodSeconds"] >= BROKER_SHUTDOWN_SECONDS + drain


def test_strimzi_pods_give_an_injected_sidecar_its_drain() -> None:
    """Strimzi's pod template cannot add the sidecar (deploy/strimzi/kafka-txn-exporter.yaml, way A);
    it sets the grace period an injected one needs. The sidecar-less exporter's own pod lets it drain."""
    documents = render("strimzi")
    (pool,) = _of_kind(documents, "KafkaNodePool")
    grace = pool["spec"]["template"]["pod"]["terminationGracePeriodSeconds"]
    assert grace >= BROKER_SHUTDOWN_SECONDS + defaults.SHUTDOWN_DRAIN_SECONDS
    for _, spec, exporter in _exporters(documents):
        drain = float(_setting(exporter, "shutdown_drain_seconds") or defaults.SHUTDOWN_DRAIN_SECONDS)
        assert spec.get("terminationGracePeriodSeconds", BROKER_SHUTDOWN_SECONDS) >= drain


def test_example_kafka_client_config_is_a_valid_exporter_config(tmp_path: Path) -> None:
    secret = next(d for d in render("kubernetes") if d["metadata"]["name"] == "txn-exporter-kafka")
    path = tmp_path / "config.yml"
    # librdkafka loads the CA file as it checks the settings: this host's CAs stand in for the pod's.
    path.write_text(
        secret["stringData"]["config.yml"].replace(
            "/etc/txn-exporter/kafka/ca.crt", ssl.get_default_verify_paths().capath
        )
    )
    settings = config.load(argparse.Namespace(config=str(path)), {"TXN_EXPORTER_BOOTSTRAP_SERVERS": "k:9092"})
    assert settings.redacted()["kafka"]["sasl.password"] == "***"


def test_strimzi_user_has_exactly_the_least_privilege_acls() -> None:
    """deploy/README.md's list: reading __transaction_state, and the hanging scan's two rights."""
    (user,) = _of_kind(render("strimzi"), "KafkaUser")
    acls = sorted(
        (
            a["resource"]["type"],
            a["resource"]["name"],
            a["resource"].get("patternType", "literal"),
            sorted(a["operations"]),
        )
        for a in user["spec"]["authorization"]["acls"]
    )
    assert acls == [
        ("topic", "*", "literal", ["Read"]),
        ("topic", "__transaction_state", "literal", ["Describe", "Read"]),
        ("transactionalId", "*", "literal", ["Describe"]),
    ]


def _properties(text: str) -> dict[str, str]:
    pairs = (line.split("=", 1) for line in text.splitlines() if line.strip() and not line.startswith("#"))
    return {k.strip(): v.strip() for k, v in pairs}


def test_strimzi_broker_logs_what_broker_log_reads_to_the_shared_volume() -> None:
    """Kafka's layout with full logger names, to a file on the volume the pod template adds, and
    TransactionStateManager at DEBUG (deploy/README.md's table)."""
    documents = render("strimzi")
    (kafka,) = _of_kind(documents, "Kafka")
    reference = kafka["spec"]["kafka"]["logging"]
    assert reference["type"] == "external"
    ref = reference["valueFrom"]["configMapKeyRef"]
    config_map = next(m for m in _of_kind(documents, "ConfigMap") if m["metadata"]["name"] == ref["name"])
    log4j = _properties(config_map["data"][ref["key"]])
    appender = next(k.rsplit(".", 1)[0] for k, v in log4j.items() if k.endswith(".type") and v == "RollingFile")
    assert log4j[f"{appender}.layout.pattern"] == "[%d] %p %m (%c)%n"
    assert f"{appender}.name" in log4j and log4j["rootLogger.level"] == "INFO"
    assert any(k.startswith("rootLogger.appenderRef.") and v == log4j[f"{appender}.name"] for k, v in log4j.items())
    loggers = {
        log4j[k]: log4j[k.replace(".name", ".level")] for k in log4j if k.startswith("logger.") and k.endswith(".name")
    }
    assert loggers == {
        "kafka.coordinator.transaction": "INFO",
        "kafka.coordinator.transaction.TransactionStateManager": "DEBUG",
        "org.apache.kafka.coordinator.transaction": "INFO",
        "org.apache.kafka.clients.NetworkClient": "INFO",
        # The broker's startup line (`Kafka version: X`), which the known bugs are matched on; its
        # package moved in 4.4.
        "org.apache.kafka.common.utils.AppInfoParser": "INFO",
        "org.apache.kafka.common.utils.internals.AppInfoParser": "INFO",
    }
    # The coordinator's lines in txn-coordinator.log, which --broker-log reads; server.log at INFO.
    files = {Path(log4j[k]).name: k.removesuffix(".fileName") for k in log4j if k.endswith(".fileName")}
    assert log4j[f"{files['server.log']}.filter.threshold.level"] == "INFO"
    assert log4j[f"{files['txn-coordinator.log']}.layout.pattern"] == "[%d] %p %m (%c)%n"
    (pool,) = _of_kind(documents, "KafkaNodePool")
    mounts = pool["spec"]["template"]["kafkaContainer"]["volumeMounts"]
    log_dir = str(Path(log4j[f"{appender}.fileName"]).parent)
    mount = next(m for m in mounts if m["mountPath"] == log_dir)
    assert mount["name"] in {v["name"] for v in pool["spec"]["template"]["pod"]["volumes"]}


def _deploy_page_section() -> str:
    text = (ROOT / "docs" / "deploy.md").read_text()
    start = text.index("## On Kubernetes")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else None]


def test_the_deploy_page_applies_exactly_the_overlays_the_tests_render() -> None:
    applied = re.findall(r"kubectl apply (?:-n \S+ )?(?:--server-side )?-k (\S+)", _deploy_page_section())
    assert sorted(Path(p).name for p in applied) == OVERLAYS
    assert all(p == f"deploy/overlays/{Path(p).name}" for p in applied)

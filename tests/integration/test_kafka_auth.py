"""The exporter against a broker with SASL/SCRAM and ACLs on (harness: sasl_users): it works with
only Describe and Read on __transaction_state, never logs its password, and with rights missing
stays up (liveness 200) and not ready (readiness 503) instead of crash-looping. The hanging scan works
with the rights deploy/README.md lists for it, and says once which ACL is missing otherwise."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

from tests.integration.exporter_process import ExporterProcess
from txn_workshop.harness.admin import create_internal_topics, create_topic
from txn_workshop.harness.broker import KafkaBroker
from txn_workshop.harness.versions import FULL_SUITE_VERSIONS, kafka_version
from txn_workshop.harness.workload import commit_transactions, timed_out_producer

PASSWORD = "Scram-pw-4d1f9a"
OTHER_PASSWORD = "Scram-pw-other-77c2"


def _grant(
    bootstrap: str,
    user: str,
    *operations: AclOperation,
    resource: ResourceType = ResourceType.TOPIC,
    name: str = "__transaction_state",
) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    bindings = [
        AclBinding(resource, name, ResourcePatternType.LITERAL, f"User:{user}", "*", operation, AclPermissionType.ALLOW)
        for operation in operations
    ]
    for future in admin.create_acls(bindings).values():
        future.result(30)


def _config(tmp_path: Path, user: str, password: str) -> Path:
    path = tmp_path / f"{user}.yml"
    path.write_text(
        f"log_format: json\nkafka:\n  security.protocol: SASL_PLAINTEXT\n"
        f"  sasl.mechanism: SCRAM-SHA-512\n  sasl.username: {user}\n  sasl.password: {password}\n"
    )
    return path


@pytest.fixture(
    scope="module",
    params=[(v, kafka_version(v).newest_transaction_version) for v in FULL_SUITE_VERSIONS],
    ids=FULL_SUITE_VERSIONS,
)
def secured(request, kafka_broker_factory, tmp_path_factory):
    # One broker per version for the module (as conftest's own_broker does, but shared by the tests).
    version, transaction_version = request.param
    broker = KafkaBroker(
        version=version,
        transaction_version=transaction_version,
        transaction_state_partitions=3,
        sasl_users={
            "txn-exporter": PASSWORD,
            "describe-only": OTHER_PASSWORD,
            "hanging-scan": OTHER_PASSWORD,
            "no-read": OTHER_PASSWORD,
        },
        workdir=tmp_path_factory.mktemp("kafka-sasl"),
    )
    kafka_broker_factory.make_room()
    kafka_broker_factory.own.append(broker)
    try:
        broker.start()
        create_internal_topics(broker.bootstrap_servers)
        _grant(broker.bootstrap_servers, "txn-exporter", AclOperation.DESCRIBE, AclOperation.READ)
        _grant(broker.bootstrap_servers, "describe-only", AclOperation.DESCRIBE)
        # The hanging scan's rights as deploy/README.md lists them; and the same with Describe, not Read, on a topic.
        for user, topic_right in (("hanging-scan", AclOperation.READ), ("no-read", AclOperation.DESCRIBE)):
            _grant(broker.bootstrap_servers, user, AclOperation.DESCRIBE, AclOperation.READ)
            _grant(broker.bootstrap_servers, user, topic_right, name="*")
            _grant(
                broker.bootstrap_servers, user, AclOperation.DESCRIBE, resource=ResourceType.TRANSACTIONAL_ID, name="*"
            )
        yield broker
    finally:
        broker.stop()
        kafka_broker_factory.own.remove(broker)


def _stop(process: ExporterProcess) -> None:
    assert process.stop() == 0


@contextmanager
def _least_privilege_exporter(secured, tmp_path: Path, *args: str) -> Iterator[ExporterProcess]:
    """The exporter as the least-privilege user, its hanging scan (no rights) every 0.5 s; stopped on exit."""
    process = ExporterProcess(
        secured.sasl_bootstrap_servers,
        "--config",
        str(_config(tmp_path, "txn-exporter", PASSWORD)),
        "--hanging-scan-interval-seconds",
        "0.5",
        *args,
        log=tmp_path / "exporter.log",
    )
    try:
        process.wait_ready(90)
        yield process
    finally:
        _stop(process)


def _failed_scan_rounds(process: ExporterProcess, rounds: int) -> None:
    process.wait_for(
        lambda: (process.value("txn_exporter_hanging_scan_errors_total") or 0) >= rounds,
        60,
        "failed hanging-scan rounds",
    )


def test_least_privilege_user_reads_the_log_and_no_secret_is_logged(secured, tmp_path: Path) -> None:
    with _least_privilege_exporter(secured, tmp_path) as process:
        create_topic(secured.bootstrap_servers, "auth-orders", partitions=2)
        commit_transactions(secured.bootstrap_servers, "auth-1", "auth-orders", count=20)
        process.wait_for(
            lambda: process.value("kafka_transactions", state="COMPLETE_COMMIT") == 1, 60, "the committed transaction"
        )
        # The client returns at the last EndTxn; its COMPLETE_COMMIT is appended after the markers, and
        # read a moment later (the gauge above is 1 from the first commit on).
        process.wait_for(
            lambda: process.value("kafka_transaction_marker_completion_seconds_count", result="commit") == 20,
            60,
            "the 20 commits' markers completed",
        )
        # The hanging scan (on by default) lacks its rights: every round fails and is counted.
        _failed_scan_rounds(process, 3)
        assert process.value("kafka_hanging_transactions") is None
        assert process.value("txn_exporter_http_rejected_connections_total") == 0
    text = process.log.read_text()
    assert PASSWORD not in text
    lines = [json.loads(line) for line in text.splitlines()]
    # The first line names the client settings, not their values (the settings, masked, are at DEBUG: below).
    assert any("client settings" in line["message"] and "sasl.password" in line["message"] for line in lines)
    # The scan says once that it lacks its rights, naming the missing ACL.
    scan = [line for line in lines if "hanging-transaction scan failed" in line["message"]]
    assert len(scan) == 1 and scan[0]["level"] == "WARNING", scan
    assert "no Describe on transactional ids" in scan[0]["message"] and "--transactional-id '*'" in scan[0]["message"]
    # Nothing per record at INFO: 20 transactions (~100 records) and a handful of lines.
    assert len(lines) < 20, text


def test_at_debug_the_settings_are_masked_and_no_client_logs_the_password(secured, tmp_path: Path) -> None:
    with _least_privilege_exporter(secured, tmp_path, "--log-level", "DEBUG") as process:
        _failed_scan_rounds(process, 1)  # the scan's kafka-python client was made (it logs its configuration at DEBUG)
    text = process.log.read_text()
    assert PASSWORD not in text
    lines = [json.loads(line) for line in text.splitlines()]
    assert any("sasl.password" in line["message"] and "***" in line["message"] for line in lines)


def test_missing_read_right_keeps_the_process_up_and_not_ready(secured, tmp_path: Path) -> None:
    create_topic(secured.bootstrap_servers, "auth-more", partitions=1)
    commit_transactions(secured.bootstrap_servers, "auth-2", "auth-more", count=2)
    log = tmp_path / "exporter.log"
    process = ExporterProcess(
        secured.sasl_bootstrap_servers, "--config", str(_config(tmp_path, "describe-only", OTHER_PASSWORD)), log=log
    )
    try:
        process.wait_for(lambda: process.get("/healthz")[0] == 200, 60, "the HTTP server")
        time.sleep(8)  # several polls and metadata refreshes: no crash, no restart loop
        assert process.get("/healthz")[0] == 200
        status, body = process.get("/readyz")
        assert status == 503, body
        assert "access denied by Kafka" in body and "authoriz" in body.lower(), body
    finally:
        _stop(process)
    text = log.read_text()
    assert OTHER_PASSWORD not in text
    denied = [json.loads(line) for line in text.splitlines() if "authoriz" in line.lower()]
    assert any("TOPIC_AUTHORIZATION_FAILED" in line["message"] for line in denied), text[-2000:]
    # Every poll meets the error; the log has it once, then "repeated K times" (exporter.logs).
    assert len(denied) <= 6, "repeats are not collapsed:\n" + "\n".join(str(line) for line in denied)


def test_wrong_password_keeps_the_process_up_and_not_ready(secured, tmp_path: Path) -> None:
    log = tmp_path / "exporter.log"
    process = ExporterProcess(
        secured.sasl_bootstrap_servers, "--config", str(_config(tmp_path, "txn-exporter", "not-" + PASSWORD)), log=log
    )
    try:
        process.wait_for(lambda: process.get("/healthz")[0] == 200, 60, "the HTTP server")
        time.sleep(6)
        assert process.get("/healthz")[0] == 200
        status, body = process.get("/readyz")
        assert status == 503 and "access denied by Kafka" in body, body
    finally:
        _stop(process)
    text = log.read_text()
    assert PASSWORD not in text
    assert "authentication" in text.lower(), text[-2000:]


def _hanging(secured, user: str, password: str) -> subprocess.CompletedProcess[str]:
    settings = [
        "security.protocol=SASL_PLAINTEXT",
        "sasl.mechanism=SCRAM-SHA-512",
        f"sasl.username={user}",
        f"sasl.password={password}",
    ]
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "exporter",
            "hanging",
            "--bootstrap-servers",
            secured.sasl_bootstrap_servers,
            "--topic",
            "auth-open",
            "--max-transaction-timeout-seconds",
            "0",
            "--padding-seconds",
            "0",
            "--json",
            *(arg for setting in settings for arg in ("--kafka-config", setting)),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_hanging_scan_works_with_the_documented_rights_and_names_a_missing_one(secured) -> None:
    create_topic(secured.bootstrap_servers, "auth-open", partitions=1)
    # An open transaction (its producer killed mid-transaction, the timeout far off): late, not hanging.
    timed_out_producer(
        secured.bootstrap_servers, "auth-open-1", "auth-open", transaction_timeout_ms=600_000, messages=1, wait=False
    )
    documented = _hanging(secured, "hanging-scan", OTHER_PASSWORD)
    assert documented.returncode == 0, documented.stderr
    [row] = [json.loads(line) for line in documented.stdout.splitlines()]
    assert (row["topic"], row["transactional_id"], row["verdict"]) == ("auth-open", "auth-open-1", "late"), row
    # Without Describe on transactional ids the transaction would look hanging: refused, naming the ACL.
    least = _hanging(secured, "txn-exporter", PASSWORD)
    assert least.returncode == 2 and least.stdout == ""
    assert least.stderr.count("\n") == 1 and "no Describe on transactional ids" in least.stderr, least.stderr
    assert "--operation Describe --transactional-id '*'" in least.stderr and PASSWORD not in least.stderr
    # Describe without Read on the topic: left out of the scan, named once.
    no_read = _hanging(secured, "no-read", OTHER_PASSWORD)
    assert no_read.returncode == 0 and no_read.stdout == "", no_read.stderr
    assert no_read.stderr.count("no Read on topic(s) auth-open,") == 1, no_read.stderr

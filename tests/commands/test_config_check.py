from __future__ import annotations

from pathlib import Path

import pytest

from exporter.cli import main


def write(tmp_path: Path, text: str, name: str = "exporter.yml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_valid_file_prints_summary_with_secrets_masked(tmp_path: Path, capsys, monkeypatch) -> None:
    monkeypatch.delenv("TXN_EXPORTER_KAFKA", raising=False)
    path = write(
        tmp_path,
        "bootstrap_servers: kafka-0:9092\nlog_format: json\nkafka:\n"
        "  security.protocol: SASL_SSL\n  sasl.mechanism: SCRAM-SHA-512\n"
        "  sasl.username: txn-exporter\n  sasl.password: s3cr3t-pw\n",
    )
    assert main(["config", "check", str(path)]) == 0
    out = capsys.readouterr().out
    assert "OK" in out and "bootstrap_servers: kafka-0:9092" in out and "log_format: json" in out
    assert "kafka.sasl.password: ***" in out and "kafka.sasl.username: txn-exporter" in out
    assert "s3cr3t-pw" not in out


@pytest.mark.parametrize(
    "text, message",
    [
        ("bootstrap_servers: k:9092\nlisten: ':9464'\n", "exporter.yml: listen: missing host"),
        ("bootstrap_servers: k:9092\nlog_fromat: json\n", "unknown key 'log_fromat' (did you mean 'log_format'?)"),
        ("bootstrap_servers: k:9092\nlog_format: xml\n", "log_format: expected one of 'text' or 'json'"),
        ("bootstrap_servers: k:9092\nkafka: {group.id: mine}\n", "'group.id': owned by the exporter"),
        ("listen: 0.0.0.0:9464\n", "bootstrap_servers: required"),
    ],
)
def test_invalid_file_exits_2_naming_the_key(tmp_path: Path, capsys, text: str, message: str) -> None:
    path = write(tmp_path, text)
    assert main(["config", "check", "--no-env", str(path)]) == 2
    err = capsys.readouterr().err
    assert message in err, err
    assert err.startswith("txn-exporter config check: ") and err.count("\n") == 1


def test_environment_completes_the_file_unless_no_env(tmp_path: Path, capsys, monkeypatch) -> None:
    path = write(tmp_path, "listen: 127.0.0.1:9464\n")
    monkeypatch.setenv("TXN_EXPORTER_BOOTSTRAP_SERVERS", "kafka-0:9092")
    assert main(["config", "check", str(path)]) == 0
    assert main(["config", "check", "--no-env", str(path)]) == 2


def test_web_config_errors_name_file_and_key(tmp_path: Path, capsys) -> None:
    web = write(tmp_path, "tls_server_config:\n  cert_file: missing.crt\n", "web.yml")
    path = write(tmp_path, f"bootstrap_servers: k:9092\nweb_config_file: {web}\n")
    assert main(["config", "check", "--no-env", str(path)]) == 2
    err = capsys.readouterr().err
    assert f"exporter.yml: web_config_file: {web}: tls_server_config.key_file: required" in err, err
    write(tmp_path, "basic_auth_users:\n  prometheus: plain-password\n", "web.yml")
    assert main(["config", "check", "--no-env", str(path)]) == 2
    err = capsys.readouterr().err
    assert "basic_auth_users.prometheus: expected a bcrypt hash" in err and "plain-password" not in err
    write(tmp_path, "basic_auth_user:\n  prometheus: x\n", "web.yml")
    assert main(["config", "check", "--no-env", str(path)]) == 2
    assert "unknown key 'basic_auth_user'" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["config check --no-env", "run --config"])
def test_bad_client_settings_exit_2_in_check_and_run_one_line_per_error(tmp_path: Path, capsys, command: str) -> None:
    path = write(
        tmp_path,
        "bootstrap_servers: k:9092\nlisten: 127.0.0.1:1\nkafka:\n  sasl.pasword: s3cr3t-pw\n"
        "  security.protocol: SASL_SSLL\n  sasl.password: s3cr3t-pw\n",
    )
    assert main([*command.split(), str(path)]) == 2
    lines = capsys.readouterr().err.splitlines()
    prefix = f"txn-exporter {command.split()[0] if command.startswith('run') else 'config check'}: {path}: kafka: "
    assert lines == [
        prefix + "'sasl.pasword': unknown client setting (librdkafka has no such property)",
        prefix + "'security.protocol': invalid value (Invalid value \"SASL_SSLL\" for configuration "
        'property "security.protocol")',
    ]


def test_every_error_of_a_file_is_reported(tmp_path: Path, capsys) -> None:
    path = write(tmp_path, "bootstrap_servers: k:9092\nbroker_id: x\nlog_fromat: json\nkafka_config: {a: b}\n")
    assert main(["config", "check", "--no-env", str(path)]) == 2
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 3 and all(line.startswith(f"txn-exporter config check: {path}: ") for line in lines)
    assert "unknown key 'kafka_config' (the key of --kafka-config is 'kafka'" in lines[1]


def test_a_file_that_is_not_utf8_exits_2_in_one_line(tmp_path: Path, capsys) -> None:
    path = tmp_path / "exporter.yml"
    path.write_bytes(b"bootstrap_servers: k:9092\nlisten: \xff\n")
    assert main(["config", "check", "--no-env", str(path)]) == 2
    assert capsys.readouterr().err == f"txn-exporter config check: {path}: not UTF-8 text (byte 0xff at offset 34)\n"

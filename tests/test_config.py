from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

import pytest

from exporter.config import ConfigError, Settings, add_arguments, listen_address, load


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="txn-exporter run")
    add_arguments(parser)
    return parser


def _load(argv: list[str], env: dict[str, str] | None = None) -> Settings:
    return load(_parser().parse_args(argv), env or {})


def _error(argv: list[str], env: dict[str, str] | None = None) -> str:
    with pytest.raises(ConfigError) as caught:
        _load(argv, env)
    return str(caught.value)


@pytest.fixture
def yaml_file(tmp_path: Path):
    def write(text: str) -> str:
        path = tmp_path / "config.yaml"
        path.write_text(text)
        return str(path)

    return write


def test_defaults() -> None:
    settings = _load(["--bootstrap-servers", "k:9092"])
    assert settings == Settings(bootstrap_servers="k:9092")
    assert (settings.broker_id, settings.all_partitions, settings.listen) == (None, False, "0.0.0.0:9464")
    assert (settings.metadata_refresh_seconds, settings.latency_window_seconds) == (30, 300)
    assert (settings.log_level, settings.kafka) == ("INFO", {})


def test_precedence_flags_over_env_over_yaml_over_defaults(yaml_file) -> None:
    path = yaml_file("bootstrap_servers: yaml:9092\nbroker_id: 1\nlisten: 127.0.0.1:1\nlog_level: error\n")
    env = {"TXN_EXPORTER_CONFIG": path, "TXN_EXPORTER_BROKER_ID": "2", "TXN_EXPORTER_LISTEN": "127.0.0.1:2"}
    settings = _load(["--listen", "127.0.0.1:3"], env)
    assert settings.bootstrap_servers == "yaml:9092"  # only in YAML
    assert settings.log_level == "ERROR"  # YAML, case-insensitive
    assert settings.broker_id == 2  # env beats YAML
    assert settings.listen == "127.0.0.1:3"  # flag beats env
    assert settings.latency_window_seconds == 300  # nobody set it


def test_config_flag_beats_config_env(yaml_file, tmp_path: Path) -> None:
    path = yaml_file("bootstrap_servers: from-flag:9092\n")
    assert (
        _load(["--config", path], {"TXN_EXPORTER_CONFIG": str(tmp_path / "absent.yaml")}).bootstrap_servers
        == "from-flag:9092"
    )


def test_no_flag_overrides_a_true_from_a_lower_source() -> None:
    env = {"TXN_EXPORTER_BOOTSTRAP_SERVERS": "k:1", "TXN_EXPORTER_ALL_PARTITIONS": "true"}
    assert _load([], env).all_partitions is True
    assert _load(["--no-all-partitions"], env).all_partitions is False


def test_empty_env_counts_as_unset() -> None:
    assert _load(["--bootstrap-servers", "k:1"], {"TXN_EXPORTER_BROKER_ID": ""}).broker_id is None


def test_kafka_settings_merge_key_by_key(yaml_file) -> None:
    path = yaml_file(
        "bootstrap_servers: k:1\nkafka:\n  security.protocol: SASL_SSL\n"
        "  sasl.mechanism: PLAIN\n  enable.idempotence: false\n  socket.timeout.ms: 1000\n"
    )
    env = {"TXN_EXPORTER_KAFKA": "sasl.username=u, sasl.password=p=w,sasl.mechanism=SCRAM-SHA-256,"}
    settings = _load(["--config", path, "--kafka-config", "sasl.username=flag"], env)
    assert settings.kafka == {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-256",  # env beats YAML
        "enable.idempotence": "false",  # YAML scalars become librdkafka strings
        "socket.timeout.ms": "1000",
        "sasl.username": "flag",  # flag beats env
        "sasl.password": "p=w",  # only the first '=' splits
    }


@pytest.mark.parametrize("key", ["group.id", "enable.auto.commit", "bootstrap.servers"])
def test_reserved_kafka_keys_refused_naming_key_and_source(key: str, yaml_file) -> None:
    assert _error(["--bootstrap-servers", "k:1", "--kafka-config", f"{key}=x"]).startswith(
        f"--kafka-config: '{key}': owned by the exporter"
    )
    assert _error(["--bootstrap-servers", "k:1"], {"TXN_EXPORTER_KAFKA": f"{key}=x"}).startswith(
        f"TXN_EXPORTER_KAFKA: '{key}': owned by the exporter"
    )
    path = yaml_file(f"bootstrap_servers: k:1\nkafka:\n  {key}: x\n")
    assert _error(["--config", path]).startswith(f"{path}: kafka: '{key}': owned by the exporter")


@pytest.mark.parametrize(
    ("argv", "env", "message"),
    [
        (["--broker-id", "-1"], {}, "--broker-id: must be >= 0"),
        (["--broker-id", "x"], {}, "--broker-id: expected an integer, got 'x'"),
        ([], {"TXN_EXPORTER_BROKER_ID": "1.5"}, "TXN_EXPORTER_BROKER_ID: expected an integer"),
        ([], {"TXN_EXPORTER_LISTEN": "0.0.0.0:abc"}, "TXN_EXPORTER_LISTEN: invalid port 'abc'"),
        (["--listen", "0.0.0.0:0"], {}, "--listen: port must be 1-65535, got 0"),
        (["--listen", "0.0.0.0:65536"], {}, "--listen: port must be 1-65535, got 65536"),
        (["--listen", "9464"], {}, "--listen: expected HOST:PORT, got '9464'"),
        (["--listen", ":9464"], {}, "--listen: missing host"),
        (["--listen", "::1:9464"], {}, "--listen: IPv6 address must be in brackets"),
        (["--listen", "[nope]:9464"], {}, "--listen: invalid IPv6 address '[nope]'"),
        (["--listen", "bad_host!:9464"], {}, "--listen: invalid host 'bad_host!'"),
        (["--log-level", "trace"], {}, "--log-level: expected one of 'DEBUG', 'INFO', 'WARNING' or 'ERROR'"),
        ([], {"TXN_EXPORTER_ALL_PARTITIONS": "maybe"}, "TXN_EXPORTER_ALL_PARTITIONS: expected true or false"),
        (["--metadata-refresh-seconds", "0"], {}, "--metadata-refresh-seconds: must be > 0"),
        (["--latency-window-seconds", "nan"], {}, "--latency-window-seconds: must be a finite number"),
        (["--latency-window-seconds", "soon"], {}, "--latency-window-seconds: expected a number, got 'soon'"),
        (["--bootstrap-servers", ""], {}, "--bootstrap-servers: must not be empty"),
        (["--kafka-config", "sasl.password"], {}, "--kafka-config: item 1 is not KEY=VALUE"),
        ([], {"TXN_EXPORTER_KAFKA": "a=1,=2"}, "TXN_EXPORTER_KAFKA: item 2 is not KEY=VALUE"),
        (
            ["--broker-id", "1"],
            {"TXN_EXPORTER_ALL_PARTITIONS": "1"},
            "--broker-id and TXN_EXPORTER_ALL_PARTITIONS: broker_id and all_partitions are mutually exclusive",
        ),
    ],
)
def test_errors_name_the_key_and_source(argv: list[str], env: dict[str, str], message: str) -> None:
    env = {"TXN_EXPORTER_BOOTSTRAP_SERVERS": "k:1", **env}
    assert _error(argv, env).startswith(message)


def test_missing_bootstrap_servers_says_how_to_set_it() -> None:
    assert _error([]) == (
        "bootstrap_servers: required; set --bootstrap-servers, "
        "TXN_EXPORTER_BOOTSTRAP_SERVERS or 'bootstrap_servers' in the config file"
    )


def test_yaml_errors_name_file_and_key(yaml_file, tmp_path: Path) -> None:
    path = yaml_file("bootstrap_server: k:1\n")
    assert _error(["--config", path]).split("\n") == [
        f"{path}: unknown key 'bootstrap_server' (did you mean 'bootstrap_servers'?)",
        "bootstrap_servers: required; set --bootstrap-servers, TXN_EXPORTER_BOOTSTRAP_SERVERS or "
        "'bootstrap_servers' in the config file",
    ]
    path = yaml_file("bootstrap_servers: k:1\nlisten: 0.0.0.0:abc\n")
    assert _error(["--config", path]) == f"{path}: listen: invalid port 'abc'"
    path = yaml_file("bootstrap_servers: k:1\nkafka:\n  security:\n    protocol: SSL\n")
    assert _error(["--config", path]).startswith(f"{path}: kafka: 'security': expected a string")
    path = yaml_file("bootstrap_servers: k:1\nkafka: [a, b]\n")
    assert _error(["--config", path]) == f"{path}: kafka: expected a mapping of client settings"
    path = yaml_file("- bootstrap_servers\n")
    assert _error(["--config", path]) == f"{path}: expected a mapping of settings, got list"
    path = yaml_file("bootstrap_servers: [\n")
    assert _error(["--config", path]).startswith(f"{path}: invalid YAML at line 2")
    absent = str(tmp_path / "absent.yaml")
    assert _error([], {"TXN_EXPORTER_CONFIG": absent}) == f"{absent}: cannot read: No such file or directory"


def test_empty_yaml_file_is_no_settings(yaml_file) -> None:
    assert _load(["--config", yaml_file(""), "--bootstrap-servers", "k:1"]).listen == "0.0.0.0:9464"


def test_error_is_one_line_without_pydantic_dump() -> None:
    message = _error(["--bootstrap-servers", "k:1", "--broker-id", "x"])
    assert "\n" not in message and "pydantic" not in message and "validation error" not in message


def test_help_explains_every_option_with_default_and_env() -> None:
    options = _parser().format_help().split("options:\n", 1)[1]
    # One entry per option, argparse's line wrapping undone.
    entries = [" ".join(entry.split()) for entry in re.split(r"\n  (?=-)", options)]
    for flag, default, env in [
        ("--config FILE", "YAML file", "TXN_EXPORTER_CONFIG"),
        ("--bootstrap-servers HOST:PORT", "required", "TXN_EXPORTER_BOOTSTRAP_SERVERS"),
        ("--broker-id N", "default: unset", "TXN_EXPORTER_BROKER_ID"),
        ("--all-partitions, --no-all-partitions", "default: false", "TXN_EXPORTER_ALL_PARTITIONS"),
        ("--listen HOST:PORT", "default: 0.0.0.0:9464", "TXN_EXPORTER_LISTEN"),
        ("--metadata-refresh-seconds SECONDS", "default: 30;", "TXN_EXPORTER_METADATA_REFRESH_SECONDS"),
        ("--latency-window-seconds SECONDS", "default: 300;", "TXN_EXPORTER_LATENCY_WINDOW_SECONDS"),
        ("--log-level LEVEL", "default: INFO", "TXN_EXPORTER_LOG_LEVEL"),
        ("--kafka-config KEY=VALUE", "default: none", "TXN_EXPORTER_KAFKA"),
    ]:
        [entry] = [e for e in entries if e.startswith(flag)]
        assert default in entry and f"env: {env})" in entry, entry


def test_every_field_has_a_description() -> None:
    assert all(info.description for info in Settings.model_fields.values())


def test_redaction_masks_secrets_only() -> None:
    settings = Settings(
        bootstrap_servers="k:1",
        kafka={
            "sasl.password": "p1",
            "ssl.key.password": "p2",
            "sasl.oauthbearer.client.secret": "p3",
            "ssl.key.pem": "p4",
            "sasl.oauthbearer.token.endpoint.url": "p5",
            "SASL.PASSWORD2": "p6",
            "security.protocol": "SASL_SSL",
            "sasl.username": "alice",
        },
    )
    redacted = settings.redacted()
    assert redacted["kafka"]["security.protocol"] == "SASL_SSL"
    assert redacted["kafka"]["sasl.username"] == "alice"
    assert redacted["bootstrap_servers"] == "k:1"
    for text in (str(redacted), repr(settings), str(settings)):
        assert not any(f"p{i}" in text for i in range(1, 7)), text
        assert "***" in text and "alice" in text
    assert settings.kafka["sasl.password"] == "p1"  # the real value is still there to use


def test_errors_never_echo_kafka_values(yaml_file) -> None:
    assert "hunter2" not in _error(["--bootstrap-servers", "k:1", "--kafka-config", "sasl.password:hunter2"])
    path = yaml_file("bootstrap_servers: k:1\nkafka:\n  group.id: hunter2\n")
    assert "hunter2" not in _error(["--config", path])


@pytest.mark.parametrize(
    ("listen", "address"),
    [
        ("0.0.0.0:9464", ("0.0.0.0", 9464)),
        ("[::]:9464", ("::", 9464)),
        ("[::1]:1", ("::1", 1)),
        ("exporter.local:65535", ("exporter.local", 65535)),
    ],
)
def test_listen_address(listen: str, address: tuple[str, int]) -> None:
    assert listen_address(Settings(bootstrap_servers="k:1", listen=listen)) == address


def test_settings_is_frozen_and_forbids_unknown_fields() -> None:
    with pytest.raises(ValueError):
        Settings(bootstrap_servers="k:1", bootstrap_server="k:1")  # type: ignore[call-arg]  # because the unknown name is the test
    settings = Settings(bootstrap_servers="k:1")
    with pytest.raises(ValueError):
        settings.listen = "0.0.0.0:1"  # type: ignore[misc]  # because frozen: the test


def test_yaml_value_of_wrong_type(yaml_file) -> None:
    path = yaml_file("bootstrap_servers: k:1\nlisten: 9464\n")
    assert _error(["--config", path]) == f"{path}: listen: expected a string"


def test_broker_logs_from_flags_env_and_yaml(yaml_file) -> None:
    assert _load(["--bootstrap-servers", "k:9092"]).broker_log == []
    flags = ["--bootstrap-servers", "k:9092", "--broker-log", "/a/server.log", "--broker-log", "/b/server.log"]
    settings = _load([*flags, "--broker-log-from-start"])
    assert settings.broker_log == ["/a/server.log", "/b/server.log"]
    assert settings.broker_log_from_start is True
    env = {"TXN_EXPORTER_BROKER_LOG": "/e/server.log, /f/server.log", "TXN_EXPORTER_BROKER_LOG_FROM_START": "true"}
    settings = _load(["--bootstrap-servers", "k:9092"], env)
    assert settings.broker_log == ["/e/server.log", "/f/server.log"]
    assert settings.broker_log_from_start is True
    assert _load(flags, env).broker_log == ["/a/server.log", "/b/server.log"]  # flags win, not merged
    path = yaml_file("bootstrap_servers: k:9092\nbroker_log: /y/server.log\n")
    assert _load(["--config", str(path)]).broker_log == ["/y/server.log"]
    path = yaml_file("bootstrap_servers: k:9092\nbroker_log: [/y/1.log, /y/2.log]\n")
    assert _load(["--config", str(path)]).broker_log == ["/y/1.log", "/y/2.log"]


def test_peers_from_flags_env_and_yaml(yaml_file, tmp_path: Path) -> None:
    base = ["--bootstrap-servers", "k:9092"]
    assert (_load(base).peers, _load(base).peer_timeout_seconds, _load(base).peer_ca_file) == ([], 2.0, None)
    settings = _load(
        [*base, "--peer", "https://b2:9464/", "--peer", "http://[::1]:9464", "--peer-timeout-seconds", "1"]
    )
    assert settings.peers == ["https://b2:9464", "http://[::1]:9464"] and settings.peer_timeout_seconds == 1
    env = {"TXN_EXPORTER_PEERS": "https://b2:9464, https://b3:9464", "TXN_EXPORTER_PEER_CA_FILE": str(tmp_path)}
    assert _error(base, env) == f"TXN_EXPORTER_PEER_CA_FILE: {tmp_path}: no such file"
    (tmp_path / "ca.crt").write_text("x")
    env["TXN_EXPORTER_PEER_CA_FILE"] = str(tmp_path / "ca.crt")
    assert _load(base, env).peers == ["https://b2:9464", "https://b3:9464"]
    path = yaml_file("bootstrap_servers: k:9092\npeers: [https://b2:9464, https://b3:9464/exporter]\n")
    assert _load(["--config", path]).peers == ["https://b2:9464", "https://b3:9464/exporter"]


@pytest.mark.parametrize(
    ("peer", "message"),
    [
        ("b2:9464", "expected http(s)://HOST:PORT, got 'b2:9464'"),
        ("ftp://b2:9464", "expected http(s)://HOST:PORT, got 'ftp://b2:9464'"),
        ("https://ops:secret@b2:9464", "no credentials in a peer's URL"),  # the password is not echoed
        ("https://b2:9464/?x=1", "no query or fragment in a peer's URL, got 'https://b2:9464/?x=1'"),
        ("https://b2:99999", "'https://b2:99999': Port out of range 0-65535"),
    ],
)
def test_bad_peers(peer: str, message: str) -> None:
    assert _error(["--bootstrap-servers", "k:9092", "--peer", peer]) == f"--peer: {message}"


def test_at_most_64_peers() -> None:
    flags = [arg for n in range(65) for arg in ("--peer", f"http://b{n}:9464")]
    assert _error(["--bootstrap-servers", "k:9092", *flags]) == "--peer: at most 64 items, got 65"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("kafka:\n  sasl.pasword: x\n", "kafka: 'sasl.pasword': unknown client setting"),
        (
            "kafka:\n  security.protocol: SASL_SSLL\n",
            "kafka: 'security.protocol': invalid value (Invalid value \"SASL_SSLL\" for configuration property",
        ),
        ("kafka:\n  socket.timeout.ms: -1\n", "kafka: 'socket.timeout.ms': invalid value (Configuration property"),
        ("kafka:\n  ssl.ca.location: /nonexistent/ca.crt\n", "kafka: 'ssl.ca.location': no such file on this host"),
    ],
)
def test_client_settings_checked_by_librdkafka_naming_the_key(yaml_file, text: str, message: str) -> None:
    path = yaml_file("bootstrap_servers: k:1\n" + text)
    assert _error(["--config", path]).startswith(f"{path}: {message}")
    key, value = text.split("\n")[1].strip().split(": ")
    assert _error(["--bootstrap-servers", "k:1", "--kafka-config", f"{key}={value}"]).startswith(
        f"--kafka-config: '{key}': "
    )
    assert _error(["--bootstrap-servers", "k:1"], {"TXN_EXPORTER_KAFKA": f"{key}={value}"}).startswith(
        f"TXN_EXPORTER_KAFKA: '{key}': "
    )


def test_client_settings_that_need_each_other_are_checked_together_without_echoing_secrets(yaml_file) -> None:
    path = yaml_file(
        "bootstrap_servers: k:1\nkafka:\n  security.protocol: SASL_SSL\n"
        "  sasl.mechanism: SCRAM-SHA-512\n  sasl.password: hunter2-pw\n"
    )
    message = _error(["--config", path])
    assert message == f"{path}: kafka: client settings refused: sasl.username and sasl.password must be set"
    path = yaml_file("bootstrap_servers: k:1\nkafka:\n  security.protocol: SSL\n  ssl.key.pem: hunter2-pem\n")
    message = _error(["--config", path])
    assert message.startswith(f"{path}: kafka: client settings refused: ssl.key.pem failed")
    assert "hunter2" not in message


def test_a_secret_with_a_bad_value_keeps_librdkafkas_reason_with_the_value_masked(monkeypatch) -> None:
    # No secret-named librdkafka property has a value it checks as set: a checked one is made secret.
    monkeypatch.setattr("exporter.config.schema._SECRET_MARKERS", ("oauthbearer.method",))
    message = _error(["--bootstrap-servers", "k:1", "--kafka-config", "sasl.oauthbearer.method=hunter2"])
    assert message == (
        "--kafka-config: 'sasl.oauthbearer.method': invalid value (Invalid value \"***\" for "
        'configuration property "sasl.oauthbearer.method")'
    )


_JAAS = {
    "org.apache.kafka.common.security.plain.PlainLoginModule": "sasl.mechanism=PLAIN with sasl.username and sasl.password",
    "org.apache.kafka.common.security.scram.ScramLoginModule": "sasl.mechanism=SCRAM-SHA-256 or SCRAM-SHA-512 with sasl.username and sasl.password",
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule": "sasl.mechanism=OAUTHBEARER with sasl.oauthbearer.method=oidc, sasl.oauthbearer.client.id, "
    "sasl.oauthbearer.client.secret, sasl.oauthbearer.token.endpoint.url (and sasl.oauthbearer.scope)",
    "com.sun.security.auth.module.Krb5LoginModule": "sasl.mechanism=GSSAPI with sasl.kerberos.service.name, sasl.kerberos.principal and sasl.kerberos.keytab",
}


@pytest.mark.parametrize("module", [*_JAAS, "com.example.CustomLoginModule"])
def test_a_java_jaas_config_keeps_librdkafkas_reason_and_names_the_settings_that_replace_it(yaml_file, module) -> None:
    path = yaml_file(
        f"bootstrap_servers: k:1\nkafka:\n  security.protocol: SASL_SSL\n  sasl.jaas.config: "
        f'\'{module} required username="svc" password="hunter2-pw";\'\n'
    )
    message = _error(["--config", path])
    reason = (
        "Java JAAS configuration is not supported, see "
        "https://github.com/confluentinc/librdkafka/wiki/Using-SASL-with-librdkafka for more information."
    )
    assert message.startswith(
        f"{path}: kafka: 'sasl.jaas.config': invalid value ({reason}); librdkafka's settings in its place: "
    )
    replacement = _JAAS.get(
        module,
        "sasl.mechanism with sasl.username and sasl.password (PLAIN, SCRAM-SHA-256, "
        "SCRAM-SHA-512), sasl.oauthbearer.* (OAUTHBEARER) or sasl.kerberos.* (GSSAPI)",
    )
    assert message.endswith(replacement) and "\n" not in message
    assert "hunter2" not in message and "svc" not in message


def test_a_java_truststore_keeps_librdkafkas_reason_even_when_the_file_is_missing(yaml_file) -> None:
    path = yaml_file("bootstrap_servers: k:1\nkafka:\n  ssl.truststore.location: /nonexistent/truststore.jks\n")
    assert _error(["--config", path]) == (
        f"{path}: kafka: 'ssl.truststore.location': invalid value (Java TrustStores are not supported, use "
        "`ssl.ca.location` and a certificate file instead. See "
        "https://github.com/confluentinc/librdkafka/wiki/Using-SSL-with-librdkafka for more information.)"
    )


def test_valid_client_settings_pass(yaml_file) -> None:
    path = yaml_file(
        "bootstrap_servers: k:1\nkafka:\n  security.protocol: SASL_SSL\n  sasl.mechanism: PLAIN\n"
        "  sasl.username: u\n  sasl.password: p\n  enable.idempotence: true\n  socket.timeout.ms: 1000\n"
    )
    assert _load(["--config", path]).kafka["socket.timeout.ms"] == "1000"


def test_a_file_that_is_not_utf8_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "latin1.yaml"
    path.write_bytes("bootstrap_servers: k:1\n# caf\u00e9\n".encode("latin-1"))
    assert _error(["--config", str(path)]) == f"{path}: not UTF-8 text (byte 0xe9 at offset 28)"


def test_broker_id_with_all_partitions_in_one_file_names_it_once(yaml_file) -> None:
    path = yaml_file("bootstrap_servers: k:1\nbroker_id: 1\nall_partitions: true\n")
    assert _error(["--config", path]) == f"{path}: broker_id and all_partitions are mutually exclusive"
    assert (
        _error(["--config", path, "--no-all-partitions", "--all-partitions"])
        == f"{path} and --all-partitions: broker_id and all_partitions are mutually exclusive"
    )


def test_kafka_config_key_points_to_kafka(yaml_file) -> None:
    path = yaml_file("bootstrap_servers: k:1\nkafka_config:\n  security.protocol: SSL\n")
    assert _error(["--config", path]) == (
        f"{path}: unknown key 'kafka_config' (the key of --kafka-config is "
        "'kafka', a mapping: kafka: {security.protocol: ...})"
    )


def test_every_error_is_reported_in_the_projects_words(yaml_file) -> None:
    path = yaml_file(
        "bootstrap_servers: k:1\nbroker_id: [1]\nlog_fromat: json\nlisten: 9464\n"
        "broker_log: 5\nall_partitions: [true]\nlatency_window_seconds: [1]\nkafka:\n  nope.nope: 1\n"
    )
    with pytest.raises(ConfigError) as caught:
        _load(["--config", path])
    assert caught.value.problems == [
        f"{path}: unknown key 'log_fromat' (did you mean 'log_format'?)",
        f"{path}: broker_id: expected an integer, got [1]",
        f"{path}: all_partitions: expected true or false, got [True]",
        f"{path}: listen: expected a string",
        f"{path}: latency_window_seconds: expected a number, got [1]",
        f"{path}: broker_log: expected a list",
        f"{path}: kafka: 'nope.nope': unknown client setting (librdkafka has no such property)",
    ]
    assert str(caught.value) == "\n".join(caught.value.problems)


def test_importing_the_config_loads_no_kafka_client():
    """The settings' defaults come from exporter.defaults, not from the parts that use them: reading
    the config (a --help, a config check) does not load confluent_kafka's librdkafka."""
    code = "import sys, exporter.config; print(sorted(m for m in sys.modules if m.split('.')[0] == 'confluent_kafka'))"
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert loaded.strip() == "[]"


def test_the_web_config_file_is_read_once_for_the_settings_and_the_server(tmp_path: Path, monkeypatch):
    from prometheus_client import CollectorRegistry

    from exporter import web_config
    from exporter.config import schema
    from exporter.http_server import MetricsServer

    web = tmp_path / "web.yml"
    web.write_text("basic_auth_users: {}\n")
    read = web_config.load
    reads: list[str] = []

    def counted(path: str) -> web_config.WebConfig:
        reads.append(path)
        return read(path)

    monkeypatch.setattr(schema, "read_web_config", counted)
    monkeypatch.setattr(web_config, "load", counted)
    settings = _load(["--bootstrap-servers", "k:9092", "--web-config-file", str(web)])
    assert settings.web_config is not None and settings.web_config.summary() == "no TLS, no basic auth"
    server = MetricsServer(
        "127.0.0.1", 0, CollectorRegistry(), lambda: True, lambda: True, web_config_file=settings.web_config
    )
    assert server.web is not None and not server.web.tls
    assert reads == [str(web)]

"""Settings of `txn-exporter run`: one schema, four sources.

Precedence, highest first: command-line flags, environment variables, the YAML config file,
defaults.
Every flag and environment variable is derived from the fields of `Settings`:
  field `broker_id`  ->  flag `--broker-id`, env `TXN_EXPORTER_BROKER_ID`, YAML key `broker_id`
(`kafka` is the one exception to the flag name: `--kafka-config KEY=VALUE`, since `--kafka` alone
says nothing). The `kafka` client settings are merged key by key across sources, so a YAML file can
hold `security.protocol` while the environment supplies `sasl.password`.
An empty environment variable counts as unset (deployment templates often render absent values so).
"""

from __future__ import annotations

import argparse
import difflib
import ipaddress
import logging
import os
import re
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    model_validator,
)

from exporter import web_config
from exporter.sources.topic_tail import DEFAULT_LATENCY_RESOLUTION_MS

ENV_PREFIX = "TXN_EXPORTER_"
CONFIG_ENV = ENV_PREFIX + "CONFIG"

# The exporter reads with its own consumer settings: it never joins a group nor commits offsets, and
# the brokers come from `bootstrap_servers`. Letting these through would silently change that.
RESERVED_KAFKA_KEYS = {
    "group.id": "the exporter uses no consumer group",
    "enable.auto.commit": "the exporter never commits offsets",
    "bootstrap.servers": "use bootstrap_servers (--bootstrap-servers) instead",
    "fetch.min.bytes": "the exporter's fetch pattern sets it; see latency_resolution_ms (--latency-resolution-ms)",
    "fetch.wait.max.ms": "the exporter's fetch pattern sets it; see latency_resolution_ms (--latency-resolution-ms)",
}
# Substrings of client setting names whose values must never reach a log. Over-masking a
# non-secret such as ssl.key.location is the cheaper mistake.
_SECRET_MARKERS = ("password", "passphrase", "secret", "token", "key", "credential", "jaas", "sasl.oauthbearer.config")
_MASK = "***"


class ConfigError(Exception):
    """Settings missing, unknown or invalid: one line per problem, each naming the setting and its source."""

    def __init__(self, *problems: str) -> None:
        super().__init__("\n".join(problems))
        self.problems = list(problems)


@dataclass(frozen=True)
class Cli:
    """Per-field command-line metadata, kept beside the field in `Settings`."""

    metavar: str | None = None
    flag: str | None = None  # defaults to --field-name


_LABEL = r"[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_HOSTNAME = re.compile(rf"{_LABEL}(\.{_LABEL})*")  # RFC 1123 names; dotted IPv4 matches too


def split_listen(value: str) -> tuple[str, int]:
    """A `listen` value, `HOST:PORT` or `[IPV6]:PORT`, as (host, port) to bind; ValueError with a readable reason."""
    host, sep, port_text = value.rpartition(":")
    if not sep:
        raise ValueError(f"expected HOST:PORT, got {value!r}")
    if not port_text.isdigit():
        raise ValueError(f"invalid port {port_text!r}")
    port = int(port_text)
    if not 1 <= port <= 65535:
        raise ValueError(f"port must be 1-65535, got {port}")
    if host.startswith("[") and host.endswith("]"):
        try:
            return str(ipaddress.IPv6Address(host[1:-1])), port
        except ValueError:
            raise ValueError(f"invalid IPv6 address {host!r}") from None
    if not host:
        raise ValueError(f"missing host in {value!r} (use 0.0.0.0:{port} for all interfaces)")
    if ":" in host:
        raise ValueError(f"IPv6 address must be in brackets, e.g. [{host}]:{port}")
    if not _HOSTNAME.fullmatch(host):
        raise ValueError(f"invalid host {host!r}")
    return host, port


def _check_listen(value: str) -> str:
    split_listen(value)
    return value


def _check_web_config(value: str | None) -> str | None:
    if value is not None:
        web_config.load(value)  # WebConfigError is a ValueError: reported with the key's source
    return value


MAX_PEERS = 64


def _check_peer(value: str) -> str:
    """A peer's base URL: http(s)://host[:port][/path], without credentials, query or fragment."""
    parts = urllib.parse.urlsplit(value.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"expected http(s)://HOST:PORT, got {value!r}")
    if parts.username is not None or parts.password is not None:
        # The page's own visitor's credentials are passed on (exporter.sources.peer_exporters): none in a URL.
        raise ValueError("no credentials in a peer's URL")
    if parts.query or parts.fragment:
        raise ValueError(f"no query or fragment in a peer's URL, got {value!r}")
    try:
        parts.port  # noqa: B018 - a port out of range raises here
    except ValueError as e:
        raise ValueError(f"{value!r}: {e}") from None
    return value.strip().rstrip("/")


def _check_file(value: str | None) -> str | None:
    if value is not None and not os.path.isfile(value):
        raise ValueError(f"{value}: no such file")
    return value


def _not_reserved(key: str) -> str:
    if key in RESERVED_KAFKA_KEYS:
        raise ValueError(f"owned by the exporter, remove it ({RESERVED_KAFKA_KEYS[key]})")
    return key


def _one_or_many(value: object) -> object:
    # YAML may give one path as a plain string.
    return [value] if isinstance(value, str) else value


def _scalar_to_str(value: object) -> object:
    # YAML turns `enable.idempotence: true` into a bool; librdkafka wants the string "true".
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, dict | list):
        raise ValueError(
            "expected a string, number or boolean (write dotted keys flat: "
            "'security.protocol: SASL_SSL', not nested mappings)"
        )
    return value


class _Conflict(ValueError):
    """A rule across fields; carries their names so `load` can say where each value came from."""

    def __init__(self, fields: tuple[str, ...], message: str) -> None:
        super().__init__(message)
        self.fields = fields


class Settings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    bootstrap_servers: Annotated[
        str,
        Cli("HOST:PORT[,HOST:PORT...]"),
        Field(min_length=1, description="Kafka brokers to bootstrap from (comma-separated)"),
    ]
    broker_id: Annotated[
        int | None,
        Cli("N"),
        Field(
            ge=0,
            description="follow the __transaction_state partitions this broker leads; "
            "unset: discover it when unambiguous",
        ),
    ] = None
    all_partitions: Annotated[
        bool,
        Cli(),
        Field(
            description="follow every __transaction_state partition (one exporter per cluster); excludes --broker-id"
        ),
    ] = False
    listen: Annotated[
        str,
        Cli("HOST:PORT"),
        AfterValidator(_check_listen),
        Field(description="address of the HTTP server for /metrics, /healthz, /readyz (IPv6: [::]:9464)"),
    ] = "0.0.0.0:9464"
    metadata_refresh_seconds: Annotated[
        float, Cli("SECONDS"), Field(gt=0, allow_inf_nan=False, description="how often partition leadership is re-read")
    ] = 30.0
    latency_resolution_ms: Annotated[
        int,
        Cli("MS"),
        Field(
            ge=1,
            le=1000,
            description="the append-latency bound's resolution: a __transaction_state record may be gathered "
            "with others for up to this long before it reaches the exporter, which adds up to this much to its "
            "bound; under load the exporter fetches at most this often (quiet, one fetch waits for the next "
            "record), so a larger value costs the exporter and its broker less (replaces fetch_interval_ms)",
        ),
    ] = DEFAULT_LATENCY_RESOLUTION_MS
    latency_window_seconds: Annotated[
        float,
        Cli("SECONDS"),
        Field(gt=0, allow_inf_nan=False, description="sliding window of the exact latency quantile gauges"),
    ] = 300.0
    log_level: Annotated[
        Literal["DEBUG", "INFO", "WARNING", "ERROR"],
        Cli("LEVEL"),
        BeforeValidator(lambda v: v.upper() if isinstance(v, str) else v),
        Field(description="DEBUG, INFO, WARNING or ERROR"),
    ] = "INFO"
    log_format: Annotated[
        Literal["text", "json"],
        Cli("FORMAT"),
        BeforeValidator(lambda v: v.lower() if isinstance(v, str) else v),
        Field(description="text or json (one object per line)"),
    ] = "text"
    log_repeat_seconds: Annotated[
        float,
        Cli("SECONDS"),
        Field(
            ge=0,
            allow_inf_nan=False,
            description="identical log messages within this window are printed once, then counted "
            "('repeated K times'); 0 prints them all",
        ),
    ] = 60.0
    web_config_file: Annotated[
        str | None,
        Cli("FILE"),
        AfterValidator(_check_web_config),
        Field(
            description="exporter-toolkit style web config (tls_server_config, basic_auth_users) "
            "securing every HTTP endpoint; unset: plain HTTP, no auth"
        ),
    ] = None
    broker_log: Annotated[
        list[Annotated[str, Field(min_length=1)]],
        Cli("PATH"),
        BeforeValidator(_one_or_many),
        Field(
            description="the broker's log file (server.log) to follow for failed __transaction_state "
            "appends, marker retries and failures, final-append retries and coordinator elections; "
            "repeatable; env: comma-separated paths; YAML: a list"
        ),
    ] = []
    broker_log_from_start: Annotated[
        bool, Cli(), Field(description="read the broker log files from their beginning instead of their end")
    ] = False
    late_transaction_padding_seconds: Annotated[
        float,
        Cli("SECONDS"),
        Field(
            ge=0,
            allow_inf_nan=False,
            description="padding past a transaction's timeout before it counts as late "
            "(kafka_transactions_late, kafka_partitions_with_late_transactions; KIP-664 uses 5 minutes)",
        ),
    ] = 300.0
    hanging_scan_interval_seconds: Annotated[
        float,
        Cli("SECONDS"),
        Field(
            ge=0,
            allow_inf_nan=False,
            description="how often the data partitions this broker leads are scanned for late and hanging "
            "transactions (DescribeProducers, KIP-664); 0 turns the scan off",
        ),
    ] = 60.0
    hanging_scan_max_partitions: Annotated[
        int,
        Cli("N"),
        Field(
            gt=0,
            description="most data partitions described per scan round (the next round goes on where this one stopped)",
        ),
    ] = 1000
    hanging_max_transaction_timeout_seconds: Annotated[
        float,
        Cli("SECONDS"),
        Field(
            ge=0,
            allow_inf_nan=False,
            description="the brokers' transaction.max.timeout.ms, in seconds: a data partition's open "
            "transaction is late past it plus the padding",
        ),
    ] = 900.0
    peers: Annotated[
        list[Annotated[str, AfterValidator(_check_peer)]],
        Cli("URL", flag="--peer"),
        BeforeValidator(_one_or_many),
        Field(
            max_length=MAX_PEERS,
            description="another exporter of the cluster (e.g. https://broker-2:9464), repeatable, at most "
            f"{MAX_PEERS}: /transactions?scope=cluster merges this exporter's view with theirs; env: "
            "comma-separated URLs; YAML: a list",
        ),
    ] = []
    peer_timeout_seconds: Annotated[
        float,
        Cli("SECONDS"),
        Field(
            gt=0,
            le=30,
            allow_inf_nan=False,
            description="how long /transactions?scope=cluster waits for the peers, all asked at once",
        ),
    ] = 2.0
    peer_ca_file: Annotated[
        str | None,
        Cli("FILE"),
        AfterValidator(_check_file),
        Field(description="CA certificates to check the https peers' certificates with; unset: the system's CAs"),
    ] = None
    otlp_endpoint: Annotated[
        str | None,
        Cli("URL"),
        Field(
            min_length=1,
            description="push every metric by OTLP/HTTP to this base URL (/v1/metrics is "
            "appended); unset: pushed only when OTEL_EXPORTER_OTLP_ENDPOINT or "
            "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT is set; the other OTEL_EXPORTER_OTLP_* variables apply",
        ),
    ] = None
    otlp_histogram: Annotated[
        Literal["explicit", "exponential"],
        Cli("KIND"),
        Field(description="OTLP histograms: explicit (the /metrics buckets) or exponential (base-2, scale 3)"),
    ] = "explicit"
    otlp_interval_seconds: Annotated[
        float, Cli("SECONDS"), Field(gt=0, allow_inf_nan=False, description="how often metrics are pushed by OTLP")
    ] = 60.0
    kafka: Annotated[
        dict[Annotated[str, AfterValidator(_not_reserved)], Annotated[str, BeforeValidator(_scalar_to_str)]],
        Cli("KEY=VALUE", flag="--kafka-config"),
        Field(
            description="a librdkafka client setting passed through (security.protocol, sasl.*, "
            "ssl.*...), repeatable; env: comma-separated KEY=VALUE pairs; YAML: a mapping"
        ),
    ] = {}

    @model_validator(mode="after")
    def _one_partition_choice(self) -> Settings:
        if self.all_partitions and self.broker_id is not None:
            raise _Conflict(("broker_id", "all_partitions"), "broker_id and all_partitions are mutually exclusive")
        return self

    def redacted(self) -> dict[str, Any]:
        """The settings as a dict safe to log: values of secret-looking kafka keys masked."""
        values = self.model_dump()
        values["kafka"] = {k: _MASK if _is_secret(k) else v for k, v in self.kafka.items()}
        return values

    def __repr_args__(self) -> Any:
        # repr() and str() go through here, so logging a Settings by accident leaks nothing.
        return self.redacted().items()


def _is_secret(key: str) -> bool:
    lowered = key.lower()
    return any(marker in lowered for marker in _SECRET_MARKERS)


def listen_address(settings: Settings) -> tuple[str, int]:
    """(host, port) to bind; an IPv6 host comes back without its brackets."""
    return split_listen(settings.listen)


def flag_name(field: str) -> str:
    cli = _cli(field)
    return cli.flag or "--" + field.replace("_", "-")


def env_name(field: str) -> str:
    return ENV_PREFIX + field.upper()


def _cli(field: str) -> Cli:
    return next((m for m in Settings.model_fields[field].metadata if isinstance(m, Cli)), Cli())


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add `--config` and one flag per `Settings` field. Flags not given stay absent from the
    namespace (argparse.SUPPRESS), which is how `load` tells them from defaults."""
    parser.add_argument(
        "--config",
        metavar="FILE",
        default=argparse.SUPPRESS,
        help=f"YAML file of settings, keys as the option names with underscores "
        f"(bootstrap_servers: ...; kafka: a mapping, for --kafka-config) (env: {CONFIG_ENV})",
    )
    for name, info in Settings.model_fields.items():
        cli = _cli(name)
        default = "required" if info.is_required() else f"default: {_show(info.default)}"
        text = f"{info.description} ({default}; env: {env_name(name)})".replace("%", "%%")
        if info.annotation is bool:
            parser.add_argument(
                flag_name(name), dest=name, action=argparse.BooleanOptionalAction, default=argparse.SUPPRESS, help=text
            )
        else:
            parser.add_argument(
                flag_name(name),
                dest=name,
                metavar=cli.metavar,
                action="append" if name in _REPEATABLE else "store",
                default=argparse.SUPPRESS,
                help=text,
            )


_REPEATABLE = ("kafka", "broker_log", "peers")


def _show(default: object) -> str:
    if default is None:
        return "unset"
    if isinstance(default, bool):
        return str(default).lower()
    if isinstance(default, float):
        return f"{default:g}"
    if isinstance(default, dict | list):
        return "none" if not default else str(default)
    return str(default)


# Where a value came from, keyed by its location in the schema: ("listen",) or ("kafka", key).
_Loc = tuple[str, ...]


def load(args: argparse.Namespace, environ: Mapping[str, str] = os.environ) -> Settings:
    """Merge flags > environment > YAML file > defaults into Settings, or raise ConfigError."""
    values: dict[str, Any] = {}
    origin: dict[_Loc, str] = {}
    problems: list[str] = []  # every one is reported, not only the first
    flags = vars(args)
    config_path = flags.get("config") or environ.get(CONFIG_ENV)
    layers = [_from_yaml(config_path, problems)] if config_path else []
    layers += [_from_env(environ), _from_flags(flags)]
    for layer in layers:  # lowest precedence first, so later layers overwrite
        for loc, value, where in layer:
            if loc[0] == "kafka":
                values.setdefault("kafka", {})[loc[1]] = value
            else:
                values[loc[0]] = value
            origin[loc] = where
    settings = None
    try:
        settings = Settings(**values)
    except ValidationError as e:
        problems += [_explain(error, origin) for error in e.errors()]
    problems += _client_problems(_checked_kafka(settings, values.get("kafka", {})), origin)
    if problems or settings is None:
        raise ConfigError(*problems)
    return settings


def _checked_kafka(settings: Settings | None, raw: Mapping[str, object]) -> dict[str, str]:
    """The kafka settings librdkafka is to check: all of them when the rest validated, else those
    that are strings already (the others have their own error)."""
    if settings is not None:
        return settings.kafka
    checked = {}
    for key, value in raw.items():
        try:
            value = _scalar_to_str(value)
        except ValueError:
            continue
        if isinstance(value, str) and key not in RESERVED_KAFKA_KEYS:
            checked[key] = value
    return checked


_Entry = tuple[_Loc, object, str]  # (location, raw value, source label)


def _from_yaml(path_text: str, problems: list[str]) -> list[_Entry]:
    """The file's entries; unknown keys are added to `problems`, a file that does not parse raises."""
    try:
        document = yaml.safe_load(Path(path_text).read_text(encoding="utf-8"))
    except OSError as e:
        raise ConfigError(f"{path_text}: cannot read: {e.strerror or e}") from None
    except UnicodeDecodeError as e:
        raise ConfigError(f"{path_text}: not UTF-8 text (byte 0x{e.object[e.start]:02x} at offset {e.start})") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark else ""
        problem = getattr(e, "problem", None) or e
        raise ConfigError(f"{path_text}: invalid YAML{where}: {problem}") from None
    if document is None:
        return []
    if not isinstance(document, dict):
        kind = type(document).__name__
        raise ConfigError(f"{path_text}: expected a mapping of settings, got {kind}")
    entries: list[_Entry] = []
    for key, value in document.items():
        if key not in Settings.model_fields:
            problems.append(f"{path_text}: unknown key '{key}'{_hint(str(key))}")
        elif key != "kafka":
            entries.append(((key,), value, f"{path_text}: {key}"))
        elif not isinstance(value, dict):
            problems.append(f"{path_text}: kafka: expected a mapping of client settings")
        else:
            entries += [(("kafka", str(k)), v, f"{path_text}: kafka") for k, v in value.items()]
    return entries


# Settings renamed: an old configuration is told the new name instead of a guess.
_RENAMED = {"fetch_interval_ms": "latency_resolution_ms (the fetch interval became the stated resolution)"}


def _hint(key: str) -> str:
    if key in _RENAMED:
        return f" (renamed: {_RENAMED[key]})"
    field = next((f for f in Settings.model_fields if flag_name(f)[2:].replace("-", "_") == key), None)
    if field is not None:  # kafka_config, from --kafka-config: its YAML key is another name
        return f" (the key of {flag_name(field)} is '{field}', a mapping: {field}: {{security.protocol: ...}})"
    close = difflib.get_close_matches(key, Settings.model_fields, n=1)
    return f" (did you mean '{close[0]}'?)" if close else ""


def _from_env(environ: Mapping[str, str]) -> list[_Entry]:
    entries: list[_Entry] = []
    for name in Settings.model_fields:
        var = env_name(name)
        text = environ.get(var, "")
        if not text:
            continue
        if name == "kafka":
            pairs = [pair.strip() for pair in text.split(",") if pair.strip()]
            entries += [(("kafka", k), v, var) for k, v in _parse_pairs(pairs, var)]
        elif name in ("broker_log", "peers"):
            entries.append(((name,), [path.strip() for path in text.split(",") if path.strip()], var))
        else:
            entries.append(((name,), text, var))
    return entries


def _from_flags(flags: Mapping[str, Any]) -> list[_Entry]:
    entries: list[_Entry] = []
    for name in Settings.model_fields:
        if name not in flags:
            continue
        flag = flag_name(name)
        if name == "kafka":
            entries += [(("kafka", k), v, flag) for k, v in _parse_pairs(flags[name], flag)]
        else:
            entries.append(((name,), flags[name], flag))
    return entries


def _parse_pairs(pairs: list[str], where: str) -> list[tuple[str, str]]:
    parsed = []
    for number, pair in enumerate(pairs, 1):
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            # The item is not echoed: a mistyped 'sasl.password:...' would leak into the logs.
            raise ConfigError(f"{where}: item {number} is not KEY=VALUE")
        parsed.append((key.strip(), value))
    return parsed


# Plainer words than pydantic's for every error the fields can meet (others: "invalid value").
_MESSAGES = {
    "int_parsing": "expected an integer, got {input!r}",
    "int_from_float": "expected an integer, got {input!r}",
    "int_type": "expected an integer, got {input!r}",
    "float_parsing": "expected a number, got {input!r}",
    "float_type": "expected a number, got {input!r}",
    "bool_parsing": "expected true or false, got {input!r}",
    "bool_type": "expected true or false, got {input!r}",
    "list_type": "expected a list",
    "dict_type": "expected a mapping",
    "greater_than": "must be > {gt}",
    "greater_than_equal": "must be >= {ge}",
    "finite_number": "must be a finite number",
    "string_type": "expected a string",
    "string_too_short": "must not be empty",
    "too_long": "at most {max_length} items, got {actual_length}",
    "literal_error": "expected one of {expected}, got {input!r}",
}


def _explain(error: Mapping[str, Any], origin: Mapping[_Loc, str]) -> str:
    loc = tuple(str(part) for part in error["loc"])
    ctx = error.get("ctx", {})
    if error["type"] == "missing":
        name = loc[0]
        return f"{name}: required; set {flag_name(name)}, {env_name(name)} or '{name}' in the config file"
    if isinstance(ctx.get("error"), _Conflict):
        conflict = ctx["error"]
        # Each source once: "f.yml: broker_id and all_partitions ...", "--broker-id and TXN_...: ...".
        sources = dict.fromkeys(origin.get((f,), f).removesuffix(f": {f}") for f in conflict.fields)
        return " and ".join(sources) + f": {conflict}"
    if error["type"] == "value_error":
        message = str(ctx["error"])
    else:
        message = _MESSAGES.get(error["type"], "invalid value").format(input=error["input"], **ctx)
    if loc[0] == "kafka" and len(loc) > 1:
        # No message above echoes a kafka value (they may be passwords): only the key is named.
        return f"{origin[loc[:2]]}: '{loc[1]}': {message}"
    return f"{origin.get(loc[:1], loc[0])}: {message}"


def _client_problems(kafka: Mapping[str, str], origin: Mapping[_Loc, str]) -> list[str]:
    """librdkafka's own verdict on the client settings, its reason kept. Each key alone first, for
    what it checks as a property is set (unknown name, bad value: each bad key is named); then all
    together, for what it checks as the client is created (settings that need each other, files that
    do not load). The consumer built has no bootstrap servers, so nothing is contacted. Values of
    secret-looking keys never reach the message (masked where librdkafka quotes them)."""
    problems = []
    for key, value in kafka.items():
        refused = _librdkafka_refusal({key: value})
        if refused is None or refused.startswith(_AT_CREATION):
            # Creation-time checks may need the other settings: judged together below. A missing
            # file would be "BIO lib" there: said here, the path not echoed (ssl.key.location looks secret).
            if key.endswith(".location") and value not in ("", "probe") and not os.path.exists(value):
                problems.append(f"{origin[('kafka', key)]}: '{key}': no such file on this host")
            continue
        if refused.startswith("No such configuration property"):
            message = "unknown client setting (librdkafka has no such property)"
        else:
            message = f"invalid value ({_masked(refused, {key: value})})" + _in_its_place(key, value)
        problems.append(f"{origin[('kafka', key)]}: '{key}': {message}")
    if not problems and kafka:
        refused = _librdkafka_refusal(kafka)
        if refused is not None:
            sources = " and ".join(dict.fromkeys(origin[("kafka", key)] for key in kafka))
            problems.append(f"{sources}: client settings refused: {_masked(refused, kafka).removeprefix(_AT_CREATION)}")
    return problems


def _masked(reason: str, kafka: Mapping[str, str]) -> str:
    """librdkafka's `reason` with the values of the secret-looking keys of `kafka` as *** (longest first,
    so that one value inside another is not half shown)."""
    for value in sorted((v for k, v in kafka.items() if _is_secret(k) and v), key=len, reverse=True):
        reason = reason.replace(value, _MASK)
    return reason


# A Java client's sasl.jaas.config, by login module: librdkafka's settings that say the same.
_JAAS_MODULES = {
    "PlainLoginModule": "sasl.mechanism=PLAIN with sasl.username and sasl.password",
    "ScramLoginModule": "sasl.mechanism=SCRAM-SHA-256 or SCRAM-SHA-512 with sasl.username and sasl.password",
    "OAuthBearerLoginModule": "sasl.mechanism=OAUTHBEARER with sasl.oauthbearer.method=oidc, "
    "sasl.oauthbearer.client.id, sasl.oauthbearer.client.secret, sasl.oauthbearer.token.endpoint.url "
    "(and sasl.oauthbearer.scope)",
    "Krb5LoginModule": "sasl.mechanism=GSSAPI with sasl.kerberos.service.name, sasl.kerberos.principal and "
    "sasl.kerberos.keytab",
}
_JAAS_ANY = (
    "sasl.mechanism with sasl.username and sasl.password (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512), "
    "sasl.oauthbearer.* (OAUTHBEARER) or sasl.kerberos.* (GSSAPI)"
)


def _in_its_place(key: str, value: str) -> str:
    """For a Java client's setting librdkafka refuses, the librdkafka settings that replace it."""
    if key != "sasl.jaas.config":
        return ""
    # The login module's class name is the one part of the value named (it is no secret).
    words = value.split(None, 1)
    replacement = _JAAS_MODULES.get(words[0].rsplit(".", 1)[-1] if words else "", _JAAS_ANY)
    return f"; librdkafka's settings in its place: {replacement}"


_AT_CREATION = "Failed to create consumer: "
_SILENT = logging.getLogger("txn_exporter.config.librdkafka")  # its CONFWARN lines; run logs them itself
_SILENT.addHandler(logging.NullHandler())
_SILENT.propagate = False


def _librdkafka_refusal(settings: Mapping[str, str]) -> str | None:
    from confluent_kafka import Consumer, KafkaException

    try:
        Consumer({"group.id": "txn-exporter", **settings, "logger": _SILENT}).close()
    except KafkaException as e:
        return str(e.args[0].str()).strip()
    except (ValueError, TypeError) as e:
        return str(e).strip()
    return None

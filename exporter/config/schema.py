"""The settings' schema: every setting of `txn-exporter run`, its type, default, checks and help.

`Settings` is the one schema; exporter.config.loading merges its four sources into it (flags,
environment, the YAML file, defaults) and exporter.config.client_check asks librdkafka about the
client settings. Every flag and environment variable is derived from the fields of `Settings`:
  field `broker_id`  ->  flag `--broker-id`, env `TXN_EXPORTER_BROKER_ID`, YAML key `broker_id`
(`kafka` is the one exception to the flag name: `--kafka-config KEY=VALUE`, since `--kafka` alone
says nothing).
"""

from __future__ import annotations

import ipaddress
import os
import re
import urllib.parse
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    model_validator,
)
from pydantic_core import InitErrorDetails

from exporter import defaults
from exporter.web_config import WebConfig, WebConfigError
from exporter.web_config import load as read_web_config

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
MASK = "***"


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


def scalar_to_str(value: object) -> object:
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


class FieldConflict(ValueError):
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
        Field(description=f"address of the HTTP server for /metrics, /healthz, /readyz (IPv6: [::]:{defaults.PORT})"),
    ] = defaults.LISTEN
    metadata_refresh_seconds: Annotated[
        float, Cli("SECONDS"), Field(gt=0, allow_inf_nan=False, description="how often partition leadership is re-read")
    ] = defaults.METADATA_REFRESH_SECONDS
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
    ] = defaults.LATENCY_RESOLUTION_MS
    freshness_seconds: Annotated[
        float,
        Cli("SECONDS"),
        Field(
            ge=0.05,
            le=60,
            allow_inf_nan=False,
            description="while the coordinator's own clock times the appends (--broker-log bringing its DEBUG "
            "`succeeded` lines), the longest time from an append to its effect on /metrics and /transactions: the "
            "topic and the log are each read at least twice that often, and no more, whatever the load",
        ),
    ] = defaults.FRESHNESS_SECONDS
    shutdown_drain_seconds: Annotated[
        float,
        Cli("SECONDS"),
        Field(
            ge=0,
            le=600,
            allow_inf_nan=False,
            description="on SIGTERM or Ctrl-C, how long the exporter may go on reading the partitions its broker "
            "has just stopped leading (its controlled shutdown moving them), to the end of the broker's epochs "
            "there, so that their last records are counted; it exits as soon as none is left, at once if none is",
        ),
    ] = defaults.SHUTDOWN_DRAIN_SECONDS
    latency_window_seconds: Annotated[
        float,
        Cli("SECONDS"),
        Field(gt=0, allow_inf_nan=False, description="sliding window of the exact latency quantile gauges"),
    ] = defaults.LATENCY_WINDOW_SECONDS
    log_level: Annotated[
        Literal["DEBUG", "INFO", "WARNING", "ERROR"],
        Cli("LEVEL"),
        BeforeValidator(lambda v: v.upper() if isinstance(v, str) else v),
        Field(description="DEBUG, INFO, WARNING or ERROR"),
    ] = defaults.LOG_LEVEL
    log_format: Annotated[
        Literal["text", "json"],
        Cli("FORMAT"),
        BeforeValidator(lambda v: v.lower() if isinstance(v, str) else v),
        Field(description="text or json (one object per line)"),
    ] = defaults.LOG_FORMAT
    log_repeat_seconds: Annotated[
        float,
        Cli("SECONDS"),
        Field(
            ge=0,
            allow_inf_nan=False,
            description="identical log messages within this window are printed once, then counted "
            "('repeated K times'); 0 prints them all",
        ),
    ] = defaults.LOG_REPEAT_SECONDS
    web_config_file: Annotated[
        str | None,
        Cli("FILE"),
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
    ] = defaults.LATE_TRANSACTION_PADDING_SECONDS
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
    ] = defaults.HANGING_SCAN_MAX_PARTITIONS
    hanging_max_transaction_timeout_seconds: Annotated[
        float,
        Cli("SECONDS"),
        Field(
            ge=0,
            allow_inf_nan=False,
            description="the brokers' transaction.max.timeout.ms, in seconds: a data partition's open "
            "transaction is late past it plus the padding",
        ),
    ] = defaults.HANGING_MAX_TRANSACTION_TIMEOUT_SECONDS
    peers: Annotated[
        list[Annotated[str, AfterValidator(_check_peer)]],
        Cli("URL", flag="--peer"),
        BeforeValidator(_one_or_many),
        Field(
            max_length=MAX_PEERS,
            description=f"another exporter of the cluster (e.g. https://broker-2:{defaults.PORT}), repeatable, at most "
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
    ] = defaults.OTLP_INTERVAL_SECONDS
    kafka: Annotated[
        dict[Annotated[str, AfterValidator(_not_reserved)], Annotated[str, BeforeValidator(scalar_to_str)]],
        Cli("KEY=VALUE", flag="--kafka-config"),
        Field(
            description="a librdkafka client setting passed through (security.protocol, sasl.*, "
            "ssl.*...), repeatable; env: comma-separated KEY=VALUE pairs; YAML: a mapping"
        ),
    ] = {}

    # The web config file as read when the settings were loaded: read once, then what the HTTP server
    # serves with (it reloads the file itself when it changes) and what the config check summarizes.
    _web_config: WebConfig | None = PrivateAttr(None)

    @model_validator(mode="after")
    def _read_web_config(self) -> Settings:
        if self.web_config_file is not None:
            try:
                self._web_config = read_web_config(self.web_config_file)
            except WebConfigError as e:
                # The field's own error, so `load` says where its value came from.
                error = InitErrorDetails(
                    type="value_error", loc=("web_config_file",), input=self.web_config_file, ctx={"error": e}
                )
                raise ValidationError.from_exception_data(type(self).__name__, [error]) from None
        return self

    @property
    def web_config(self) -> WebConfig | None:
        """The web config file's content, read when the settings were loaded; None without one."""
        return self._web_config

    @model_validator(mode="after")
    def _one_partition_choice(self) -> Settings:
        if self.all_partitions and self.broker_id is not None:
            raise FieldConflict(("broker_id", "all_partitions"), "broker_id and all_partitions are mutually exclusive")
        return self

    def redacted(self) -> dict[str, Any]:
        """The settings as a dict safe to log: values of secret-looking kafka keys masked."""
        values = self.model_dump()
        values["kafka"] = {k: MASK if is_secret(k) else v for k, v in self.kafka.items()}
        return values

    def __repr_args__(self) -> Any:
        # repr() and str() go through here, so logging a Settings by accident leaks nothing.
        return self.redacted().items()


def is_secret(key: str) -> bool:
    lowered = key.lower()
    return any(marker in lowered for marker in _SECRET_MARKERS)


def listen_address(settings: Settings) -> tuple[str, int]:
    """(host, port) to bind; an IPv6 host comes back without its brackets."""
    return split_listen(settings.listen)


def flag_name(field: str) -> str:
    cli = cli_of(field)
    return cli.flag or "--" + field.replace("_", "-")


def env_name(field: str) -> str:
    return ENV_PREFIX + field.upper()


def cli_of(field: str) -> Cli:
    return next((m for m in Settings.model_fields[field].metadata if isinstance(m, Cli)), Cli())


# Where a value came from, keyed by its location in the schema: ("listen",) or ("kafka", key).
Loc = tuple[str, ...]

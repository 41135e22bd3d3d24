"""Settings from their four sources, merged into the schema: flags > environment > YAML file > defaults.

The `kafka` client settings are merged key by key across sources, so a YAML file can hold
`security.protocol` while the environment supplies `sasl.password`. An empty environment variable
counts as unset (deployment templates often render absent values so). Every problem is reported,
each naming the setting and where it came from.
"""

from __future__ import annotations

import argparse
import difflib
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from exporter.config.client_check import client_problems
from exporter.config.schema import (
    CONFIG_ENV,
    RESERVED_KAFKA_KEYS,
    ConfigError,
    FieldConflict,
    Loc,
    Settings,
    cli_of,
    env_name,
    flag_name,
    scalar_to_str,
)


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
        cli = cli_of(name)
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


def load(args: argparse.Namespace, environ: Mapping[str, str] = os.environ) -> Settings:
    """Merge flags > environment > YAML file > defaults into Settings, or raise ConfigError."""
    values: dict[str, Any] = {}
    origin: dict[Loc, str] = {}
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
    problems += client_problems(_checked_kafka(settings, values.get("kafka", {})), origin)
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
            value = scalar_to_str(value)
        except ValueError:
            continue
        if isinstance(value, str) and key not in RESERVED_KAFKA_KEYS:
            checked[key] = value
    return checked


_Entry = tuple[Loc, object, str]  # (location, raw value, source label)


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


def _explain(error: Mapping[str, Any], origin: Mapping[Loc, str]) -> str:
    loc = tuple(str(part) for part in error["loc"])
    ctx = error.get("ctx", {})
    if error["type"] == "missing":
        name = loc[0]
        return f"{name}: required; set {flag_name(name)}, {env_name(name)} or '{name}' in the config file"
    if isinstance(ctx.get("error"), FieldConflict):
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

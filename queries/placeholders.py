"""What differs between installations, as placeholders the query and link builders write where it goes.

The monitoring mixin (mixin/) lets its users set these in `_config` (mixin/config.libsonnet): the
label that tells clusters apart, matchers added to every exporter series, the job `up` is watched
under, each alert's threshold, and the runbook and Grafana base URLs. The dashboards and alerts
generators build every query and link with the placeholders below instead of those values, so the
one definition gives both outputs:

- ``expand(text)``: the text with the defaults, as the committed dashboards and rules hold it;
- ``jsonnet(text)``: a jsonnet expression giving the text from ``$._config`` (the mixin).

A placeholder is a key between two private-use characters, which no query, label or prose holds;
nothing here parses PromQL.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from exporter import defaults
from exporter.contracts import runbooks

_OPEN, _CLOSE = "\ue000", "\ue001"
_PLACEHOLDER = re.compile(f"{_OPEN}(\\w+){_CLOSE}")


def _placeholder(key: str) -> str:
    return f"{_OPEN}{key}{_CLOSE}"


# The placeholders, by the `_config` key they stand for (mixin/config.libsonnet).
CLUSTER = _placeholder("clusterLabel")  # the cluster label's name, wherever a query or link names it
JOB = _placeholder("jobSelector")  # the matcher of `up` for the exporter's job
RUNBOOK_URL = _placeholder("runbookURL")
GRAFANA_URL = _placeholder("grafanaURL")
THRESHOLD = _placeholder("threshold")  # an alert's threshold (the mixin's `thresholds[alert]`)
# `_config.selector` (matchers added to every exporter series) as it joins a series' own matchers:
SELECTOR_BRACES = _placeholder("selectorBraces")  # after a bare name: `{selector}`, or nothing
SELECTOR_COMMA = _placeholder("selectorComma")  # after other matchers: `, selector`, or nothing
NUMBERS = frozenset({"threshold"})  # formatted as numbers (%g), the others as text

DEFAULT_RUNBOOK_URL = runbooks.RUNBOOK_URL
DEFAULT_GRAFANA_URL = "https://grafana.example.com"

# The `_config` defaults (thresholds and `for`s come from the alerts).
DEFAULTS: dict[str, str] = {
    "selector": "",
    "jobSelector": f'job="{defaults.SCRAPE_JOB}"',  # the job the exporter is scraped under
    "clusterLabel": "cluster",
    "runbookURL": DEFAULT_RUNBOOK_URL,
    "grafanaURL": DEFAULT_GRAFANA_URL,
}


Value = str | float | None  # a placeholder's: text, or a number (a threshold)


def values(config: Mapping[str, Value]) -> dict[str, Value]:
    """Every placeholder's value under ``config`` (`_config`'s keys), as mixin/config.libsonnet derives them."""
    selector = config["selector"]
    return {
        **config,
        "selectorBraces": f"{{{selector}}}" if selector else "",
        "selectorComma": f", {selector}" if selector else "",
    }


def expand(text: str, config: Mapping[str, Value] = DEFAULTS, **extra: Value) -> str:
    """The text with each placeholder's value under ``config`` (and ``extra``, e.g. ``threshold``)."""
    known = {**values(config), **extra}
    return _PLACEHOLDER.sub(lambda m: _format(m.group(1), known[m.group(1)]), text)


def _format(key: str, value: Value) -> str:
    if key in NUMBERS:
        assert isinstance(value, int | float), (key, value)
        return "%g" % value  # noqa: UP031 (jsonnet's %g, the same rule)
    return str(value)


def expand_all(value: Any, config: Mapping[str, Value] = DEFAULTS, **extra: Value) -> Any:
    """``expand`` on every string of a JSON-like value."""
    if isinstance(value, str):
        return expand(value, config, **extra)
    if isinstance(value, dict):
        return {k: expand_all(v, config, **extra) for k, v in value.items()}
    if isinstance(value, list):
        return [expand_all(v, config, **extra) for v in value]
    return value


def keys(text: str) -> set[str]:
    return set(_PLACEHOLDER.findall(text))


def jsonnet_string(text: str) -> str:
    """A jsonnet string literal, single-quoted as mixins write them."""
    escaped = json.dumps(text, ensure_ascii=False)[1:-1].replace('\\"', '"').replace("'", "\\'")
    return f"'{escaped}'"


def jsonnet(text: str, config: str = "c", extra: str = "") -> str:
    """A jsonnet expression for ``text``: a literal when it has no placeholder, else a format string
    over ``config`` (the jsonnet expression of `_config`; ``extra``: fields it is extended with, e.g.
    an alert's ``threshold: c.thresholds.X``)."""
    if not keys(text):
        return jsonnet_string(text)
    template = _PLACEHOLDER.sub(
        lambda m: f"%({m.group(1)}){'g' if m.group(1) in NUMBERS else 's'}", text.replace("%", "%%")
    )
    return f"{jsonnet_string(template)} % {config}" + (f" {{ {extra} }}" if extra else "")

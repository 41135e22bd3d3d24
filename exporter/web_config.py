"""The web configuration file (`--web-config-file`), in the format of Prometheus' exporter-toolkit:

```yaml
tls_server_config:
  cert_file: /etc/txn-exporter/tls/tls.crt
  key_file: /etc/txn-exporter/tls/tls.key
  client_auth_type: RequireAndVerifyClientCert   # optional, default NoClientCert
  client_ca_file: /etc/txn-exporter/tls/ca.crt   # required when client certificates are verified
  min_version: TLS12                              # optional: TLS12 (default) or TLS13
basic_auth_users:
  prometheus: $2y$10$...                          # bcrypt hashes (htpasswd -nBC 10 "" | tr -d ':\\n')
```

As in the toolkit, TLS covers the whole listener and basic auth every path, /healthz and /readyz
included. Unknown keys are refused (a misspelled `basic_auth_user` must not silently disable auth).
The toolkit's `RequestClientCert` and `RequireAnyClientCert` (client certificates asked for but
not verified) and its `http_server_config` are not supported: refused with the key named.
Errors are `WebConfigError` (a ValueError) whose message names the file and the key.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

CLIENT_AUTH_TYPES = {
    "NoClientCert": ssl.CERT_NONE,
    "VerifyClientCertIfGiven": ssl.CERT_OPTIONAL,
    "RequireAndVerifyClientCert": ssl.CERT_REQUIRED,
}
_UNSUPPORTED_CLIENT_AUTH = ("RequestClientCert", "RequireAnyClientCert")
_TLS_VERSIONS = {"TLS12": ssl.TLSVersion.TLSv1_2, "TLS13": ssl.TLSVersion.TLSv1_3}
_TLS_KEYS = {"cert_file", "key_file", "client_auth_type", "client_ca_file", "min_version"}
_TOP_KEYS = {"tls_server_config", "basic_auth_users"}


class WebConfigError(ValueError):
    pass


@dataclass(frozen=True)
class TLSConfig:
    cert_file: Path
    key_file: Path
    client_auth_type: str = "NoClientCert"
    client_ca_file: Path | None = None
    min_version: str = "TLS12"

    @property
    def files(self) -> tuple[Path, ...]:
        return (self.cert_file, self.key_file) + ((self.client_ca_file,) if self.client_ca_file else ())

    def context(self) -> ssl.SSLContext:
        """A server-side context; WebConfigError if a file does not load."""
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = _TLS_VERSIONS[self.min_version]
        try:
            context.load_cert_chain(self.cert_file, self.key_file)
        except (OSError, ssl.SSLError) as e:
            raise WebConfigError(
                f"tls_server_config.cert_file/key_file: cannot load {self.cert_file} with {self.key_file}: {_reason(e)}"
            ) from None
        context.verify_mode = CLIENT_AUTH_TYPES[self.client_auth_type]
        if self.client_ca_file is not None:
            try:
                context.load_verify_locations(cafile=self.client_ca_file)
            except (OSError, ssl.SSLError) as e:
                raise WebConfigError(
                    f"tls_server_config.client_ca_file: cannot load {self.client_ca_file}: {_reason(e)}"
                ) from None
        return context


@dataclass(frozen=True)
class WebConfig:
    path: Path
    tls: TLSConfig | None = None
    users: dict[str, bytes] = field(default_factory=dict)  # user -> bcrypt hash

    @property
    def files(self) -> tuple[Path, ...]:
        """Every file this configuration reads; a change to any of them means a reload."""
        return (self.path,) + (self.tls.files if self.tls else ())

    def summary(self) -> str:
        tls = f"TLS ({self.tls.client_auth_type})" if self.tls else "no TLS"
        auth = f"basic auth for {len(self.users)} user(s)" if self.users else "no basic auth"
        return f"{tls}, {auth}"


def _reason(e: BaseException) -> str:
    return getattr(e, "strerror", None) or getattr(e, "reason", None) or str(e)


def load(path_text: str | Path) -> WebConfig:
    """Parses and checks the file: TLS files load, hashes are bcrypt. WebConfigError otherwise."""
    path = Path(path_text)
    try:
        document = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise WebConfigError(f"{path}: cannot read: {e.strerror or e}") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark else ""
        raise WebConfigError(f"{path}: invalid YAML{where}") from None
    try:
        return _parse(path, document or {})
    except WebConfigError as e:
        raise WebConfigError(f"{path}: {e}") from None


def _parse(path: Path, document: Any) -> WebConfig:
    if not isinstance(document, dict):
        raise WebConfigError("expected a mapping")
    for key in document:
        if key not in _TOP_KEYS:
            hint = " (not supported)" if key in ("http_server_config", "rate_limit") else ""
            raise WebConfigError(f"unknown key '{key}'{hint}; expected {sorted(_TOP_KEYS)}")
    tls = _parse_tls(path.parent, document.get("tls_server_config"))
    users = _parse_users(document.get("basic_auth_users"))
    config = WebConfig(path, tls, users)
    if tls is not None:
        tls.context()  # the files load now, not at the first scrape
    return config


def _parse_tls(base: Path, section: Any) -> TLSConfig | None:
    if section is None:
        return None
    if not isinstance(section, dict):
        raise WebConfigError("tls_server_config: expected a mapping")
    for key in section:
        if key not in _TLS_KEYS:
            raise WebConfigError(f"tls_server_config.{key}: unknown key; expected {sorted(_TLS_KEYS)}")
    values: dict[str, Any] = {}
    for key in ("cert_file", "key_file", "client_ca_file"):
        value = section.get(key)
        if value in (None, ""):
            continue
        if not isinstance(value, str):
            raise WebConfigError(f"tls_server_config.{key}: expected a path")
        values[key] = base / value  # relative paths: to the web config file, as the toolkit does
    for key in ("cert_file", "key_file"):
        if key not in values:
            raise WebConfigError(f"tls_server_config.{key}: required")
    auth = section.get("client_auth_type") or "NoClientCert"
    if auth in _UNSUPPORTED_CLIENT_AUTH:
        raise WebConfigError(
            f"tls_server_config.client_auth_type: {auth} is not supported "
            f"(client certificates are verified or not asked for); use one of "
            f"{sorted(CLIENT_AUTH_TYPES)}"
        )
    if auth not in CLIENT_AUTH_TYPES:
        raise WebConfigError(
            f"tls_server_config.client_auth_type: expected one of {sorted(CLIENT_AUTH_TYPES)}, got {auth!r}"
        )
    if auth != "NoClientCert" and "client_ca_file" not in values:
        raise WebConfigError(f"tls_server_config.client_ca_file: required with client_auth_type {auth}")
    version = section.get("min_version") or "TLS12"
    if version not in _TLS_VERSIONS:
        raise WebConfigError(f"tls_server_config.min_version: expected TLS12 or TLS13, got {version!r}")
    return TLSConfig(client_auth_type=auth, min_version=version, **values)


def _parse_users(section: Any) -> dict[str, bytes]:
    if section is None:
        return {}
    if not isinstance(section, dict):
        raise WebConfigError("basic_auth_users: expected a mapping of user: bcrypt hash")
    users = {}
    for user, hashed in section.items():
        if not isinstance(hashed, str) or not _is_bcrypt(hashed):
            # The value is not echoed: someone may have put a plain password there.
            raise WebConfigError(f"basic_auth_users.{user}: expected a bcrypt hash ($2a$/$2b$/$2y$...)")
        users[str(user)] = hashed.encode()
    return users


def _is_bcrypt(text: str) -> bool:
    # $2y$10$ + 53 characters of salt and hash
    parts = text.split("$")
    return (
        len(parts) == 4
        and parts[0] == ""
        and parts[1] in ("2a", "2b", "2y")
        and parts[2].isdigit()
        and 4 <= int(parts[2]) <= 31
        and len(parts[3]) == 53
    )

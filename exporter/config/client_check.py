"""librdkafka's own verdict on the client settings (`kafka`), asked of a consumer that contacts nothing.

Values of secret-looking keys never reach a message; a Java client's setting librdkafka refuses is
answered with the librdkafka settings that replace it.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping

from exporter.config.schema import MASK, Loc, is_secret


def client_problems(kafka: Mapping[str, str], origin: Mapping[Loc, str]) -> list[str]:
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
    for value in sorted((v for k, v in kafka.items() if is_secret(k) and v), key=len, reverse=True):
        reason = reason.replace(value, MASK)
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

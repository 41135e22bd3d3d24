"""TLS and basic auth of the HTTP endpoints (--web-config-file), with real TLS clients and a test CA."""

from __future__ import annotations

import base64
import datetime as dt
import http.client
import ipaddress
import logging
import os
import re
import socket
import ssl
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import bcrypt
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from prometheus_client import CollectorRegistry, Counter

from exporter.http_server import MetricsServer
from exporter.web_config import WebConfigError

PASSWORD = "scrape-pw-9f2"
HASH = bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(4)).decode()  # cost 4: fast tests


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _write_key(key: ec.EllipticCurvePrivateKey, path: Path) -> None:
    path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )


class CA:
    def __init__(self, directory: Path, name: str = "txn-exporter test CA") -> None:
        self.dir = directory
        self.key = ec.generate_private_key(ec.SECP256R1())
        now = dt.datetime.now(dt.UTC)
        self.cert = (
            x509.CertificateBuilder()
            .subject_name(_name(name))
            .issuer_name(_name(name))
            .public_key(self.key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + dt.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True)
            .sign(self.key, hashes.SHA256())
        )
        self.file = directory / f"{name.replace(' ', '-')}.crt"
        self.file.write_bytes(self.cert.public_bytes(serialization.Encoding.PEM))

    def issue(self, name: str, server: bool) -> tuple[Path, Path]:
        key = ec.generate_private_key(ec.SECP256R1())
        now = dt.datetime.now(dt.UTC)
        builder = (
            x509.CertificateBuilder()
            .subject_name(_name(name))
            .issuer_name(self.cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + dt.timedelta(days=1))
            .add_extension(
                x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH]),
                critical=False,
            )
        )
        if server:
            builder = builder.add_extension(
                x509.SubjectAlternativeName(
                    [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
                ),
                critical=False,
            )
        cert = builder.sign(self.key, hashes.SHA256())
        cert_file, key_file = self.dir / f"{name}.crt", self.dir / f"{name}.key"
        cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        _write_key(key, key_file)
        return cert_file, key_file


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    directory = tmp_path_factory.mktemp("pki")
    ca = CA(directory)
    server_cert, server_key = ca.issue("server", server=True)
    client_cert, client_key = ca.issue("prometheus", server=False)
    rogue_cert, rogue_key = CA(directory, "rogue CA").issue("rogue", server=False)
    return {
        "ca": ca.file,
        "server_cert": server_cert,
        "server_key": server_key,
        "client_cert": client_cert,
        "client_key": client_key,
        "rogue_cert": rogue_cert,
        "rogue_key": rogue_key,
        "dir": directory,
    }


def _registry() -> CollectorRegistry:
    registry = CollectorRegistry()
    Counter("txn_test_commits", "commits seen", registry=registry).inc(3)
    return registry


def _serve(web_yml: Path) -> MetricsServer:
    server = MetricsServer(
        "127.0.0.1", 0, _registry(), healthy=lambda: True, ready=lambda: True, web_config_file=str(web_yml)
    )
    server.start()
    return server


@pytest.fixture
def web_yml(tmp_path: Path, pki: dict[str, Path]) -> Path:
    path = tmp_path / "web.yml"
    path.write_text(
        f"tls_server_config:\n  cert_file: {pki['server_cert']}\n  key_file: {pki['server_key']}\n"
        f"basic_auth_users:\n  prometheus: '{HASH}'\n"
    )
    return path


@pytest.fixture
def server(web_yml: Path) -> Iterator[MetricsServer]:
    server = _serve(web_yml)
    yield server
    server.stop()


def _client_context(pki: dict[str, Path], cert: str | None = None) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=pki["ca"])
    if cert:
        context.load_cert_chain(pki[f"{cert}_cert"], pki[f"{cert}_key"])
    return context


def _get(
    server: MetricsServer, path: str, context: ssl.SSLContext, user: str | None = "prometheus", password: str = PASSWORD
) -> tuple[int, dict[str, str], str]:
    request = urllib.request.Request(f"https://127.0.0.1:{server.port}{path}")
    if user is not None:
        request.add_header("Authorization", "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode())
    try:
        with urllib.request.urlopen(request, timeout=10, context=context) as response:
            return response.status, dict(response.headers), response.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read().decode()


def test_tls_and_basic_auth_serve_metrics(server: MetricsServer, pki: dict[str, Path]) -> None:
    assert server.url == f"https://127.0.0.1:{server.port}/metrics"
    status, _, body = _get(server, "/metrics", _client_context(pki))
    assert status == 200 and "txn_test_commits_total 3.0" in body
    for path in ("/healthz", "/readyz"):
        assert _get(server, path, _client_context(pki))[0] == 200


@pytest.mark.parametrize("user, password", [("prometheus", "wrong"), ("nobody", PASSWORD), (None, "")])
@pytest.mark.parametrize("path", ["/metrics", "/healthz", "/readyz", "/nope"])
def test_wrong_or_missing_credentials_refused_on_every_path(
    server: MetricsServer, pki: dict[str, Path], path: str, user: str | None, password: str
) -> None:
    status, headers, body = _get(server, path, _client_context(pki), user, password)
    assert status == 401 and headers["WWW-Authenticate"] == 'Basic realm="txn-exporter", charset="UTF-8"'
    assert "txn_test" not in body


def test_malformed_authorization_headers_refused(server: MetricsServer, pki: dict[str, Path]) -> None:
    for header in ("Bearer x", "Basic !!!", "Basic " + base64.b64encode(b"no-colon").decode()):
        connection = http.client.HTTPSConnection("127.0.0.1", server.port, context=_client_context(pki), timeout=10)
        connection.request("GET", "/metrics", headers={"Authorization": header})
        assert connection.getresponse().status == 401
        connection.close()


@pytest.mark.parametrize(
    "user, password",
    [
        ("prometheus", PASSWORD + "x" * 72),  # over bcrypt's 72 bytes, which it refuses to check
        ("prometheus", "x" * 10_000),
        ("nobody", "\u00e9" * 40),
        ("prometheus", PASSWORD + "\0"),
        ("prometheus", "x" * 72),  # exactly 72: checked, and wrong
    ],
)
def test_any_credentials_get_401_and_no_traceback(
    server: MetricsServer,
    pki: dict[str, Path],
    user: str,
    password: str,
    caplog: pytest.LogCaptureFixture,
    capfd: pytest.CaptureFixture[str],
) -> None:
    with caplog.at_level(logging.DEBUG, logger="exporter.http_server"):
        for _ in range(2):  # the second from the cache of verdicts
            status, _, body = _get(server, "/metrics", _client_context(pki), user, password)
            assert (status, body) == (401, "Unauthorized\n")
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING or r.exc_info]
    assert capfd.readouterr().err == ""


def test_a_password_of_72_bytes_is_checked_and_its_73rd_byte_is_not_ignored(tmp_path: Path) -> None:
    password = "p" * 72
    web = tmp_path / "web.yml"
    web.write_text(f"basic_auth_users:\n  u: '{bcrypt.hashpw(password.encode(), bcrypt.gensalt(4)).decode()}'\n")
    server = _serve(web)
    try:
        for given, status in ((password, 200), (password + "q", 401)):
            auth = "Basic " + base64.b64encode(f"u:{given}".encode()).decode()
            connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
            connection.request("GET", "/metrics", headers={"Authorization": auth})
            assert connection.getresponse().status == status
            connection.close()
    finally:
        server.stop()


def test_plain_http_refused(server: MetricsServer, pki: dict[str, Path]) -> None:
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    with pytest.raises((http.client.RemoteDisconnected, ConnectionError, http.client.BadStatusLine)):
        connection.request("GET", "/metrics")
        connection.getresponse()
    connection.close()
    # ... and the server still answers TLS clients afterwards.
    assert _get(server, "/metrics", _client_context(pki))[0] == 200


def test_client_that_does_not_trust_the_ca_fails(server: MetricsServer) -> None:
    with pytest.raises(urllib.error.URLError, match="CERTIFICATE_VERIFY_FAILED"):
        _get(server, "/metrics", ssl.create_default_context())


def test_client_certificates_required_and_verified(tmp_path: Path, pki: dict[str, Path]) -> None:
    web = tmp_path / "mtls.yml"
    web.write_text(
        f"tls_server_config:\n  cert_file: {pki['server_cert']}\n  key_file: {pki['server_key']}\n"
        f"  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: {pki['ca']}\n"
    )
    server = _serve(web)
    try:
        assert _get(server, "/metrics", _client_context(pki, "client"), user=None)[0] == 200
        for context in (_client_context(pki), _client_context(pki, "rogue")):
            with pytest.raises((ssl.SSLError, urllib.error.URLError, ConnectionError, http.client.RemoteDisconnected)):
                _get(server, "/metrics", context, user=None)
    finally:
        server.stop()


def test_users_and_certificates_reload_when_the_files_change(
    server: MetricsServer, web_yml: Path, pki: dict[str, Path]
) -> None:
    new_hash = bcrypt.hashpw(b"rotated", bcrypt.gensalt(4)).decode()
    text = web_yml.read_text().replace(HASH, new_hash)
    web_yml.write_text(text)
    os.utime(web_yml, ns=(time.time_ns() + 10**9,) * 2)  # a new mtime even on coarse clocks
    deadline = time.monotonic() + 10
    while _get(server, "/metrics", _client_context(pki), password="rotated")[0] != 200:
        assert time.monotonic() < deadline, "new password not accepted"
        time.sleep(0.2)
    assert _get(server, "/metrics", _client_context(pki))[0] == 401
    # A broken edit is refused, logged, and the last good configuration stays.
    web_yml.write_text("basic_auth_users: [oops]\n")
    os.utime(web_yml, ns=(time.time_ns() + 2 * 10**9,) * 2)
    time.sleep(1.2)
    assert _get(server, "/metrics", _client_context(pki), password="rotated")[0] == 200


@pytest.mark.parametrize(
    "text, message",
    [
        ("tls_server_config:\n  cert_file: a.crt\n", "tls_server_config.key_file: required"),
        ("tls_server_config:\n  cert_file: a.crt\n  key_file: a.key\n", "cannot load"),
        (
            "tls_server_config:\n  cert_file: a\n  key_file: b\n  client_auth_type: RequireAnyClientCert\n",
            "client_auth_type: RequireAnyClientCert is not supported",
        ),
        (
            "tls_server_config:\n  cert_file: a\n  key_file: b\n  client_auth_type: VerifyClientCertIfGiven\n",
            "client_ca_file: required",
        ),
        (
            "tls_server_config:\n  cert_file: a\n  key_file: b\n  certfile: c\n",
            "tls_server_config.certfile: unknown key",
        ),
        ("basic_auth_users:\n  alice: hunter2\n", "basic_auth_users.alice: expected a bcrypt hash"),
        ("http_server_config:\n  http2: false\n", "unknown key 'http_server_config' (not supported)"),
    ],
)
def test_bad_web_config_refused_at_start_naming_the_key(tmp_path: Path, text: str, message: str) -> None:
    web = tmp_path / "web.yml"
    web.write_text(text)
    with pytest.raises(WebConfigError, match=re.escape(message)) as error:
        MetricsServer("127.0.0.1", 0, _registry(), healthy=lambda: True, ready=lambda: True, web_config_file=str(web))
    assert str(error.value).startswith(str(web)) and "hunter2" not in str(error.value)


def test_basic_auth_without_tls(tmp_path: Path) -> None:
    web = tmp_path / "web.yml"
    web.write_text(f"basic_auth_users:\n  prometheus: '{HASH}'\n")
    server = _serve(web)
    try:
        assert server.url.startswith("http://")
        auth = "Basic " + base64.b64encode(f"prometheus:{PASSWORD}".encode()).decode()
        connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
        connection.request("GET", "/metrics", headers={"Authorization": auth})
        assert connection.getresponse().status == 200
        connection.close()
    finally:
        server.stop()


def test_connections_that_never_finish_the_tls_handshake_are_shed_and_scrapes_answered(
    web_yml: Path, pki: dict[str, Path], capfd: pytest.CaptureFixture[str]
) -> None:
    server = MetricsServer(
        "127.0.0.1",
        0,
        _registry(),
        healthy=lambda: True,
        ready=lambda: True,
        web_config_file=str(web_yml),
        max_connections=8,
    )
    server.start()
    flood = []
    try:
        for n in range(100):
            connection = socket.create_connection(("127.0.0.1", server.port), timeout=10)
            if n % 2:
                connection.sendall(b"\x16\x03\x01")  # the first bytes of a ClientHello, then nothing
            flood.append(connection)
        assert _get(server, "/metrics", _client_context(pki))[0] == 200
        assert server.rejected_connections >= 100 - 8
    finally:
        for connection in flood:
            connection.close()
        server.stop()
    assert capfd.readouterr().err == ""

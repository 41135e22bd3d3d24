"""`python -m exporter.probe [/healthz|/readyz]`: the container's HEALTHCHECK and exec probes.

Asks the exporter in the same container (TXN_EXPORTER_LISTEN, default port 9464, on loopback) over
HTTPS when TXN_EXPORTER_WEB_CONFIG_FILE sets up TLS (the certificate is not verified: it is the
loopback, as kubelet's own HTTPS probes do). With basic auth on, every path needs credentials, as
in exporter-toolkit: the probe sends TXN_EXPORTER_PROBE_USERNAME/_PASSWORD when set; without
them a 401 on /healthz still proves the server answers, so it counts as alive, while /readyz fails.
Exit 0 healthy, 1 not. Standard library only (plus the web config parser).
"""

from __future__ import annotations

import base64
import http.client
import os
import ssl
import sys

from exporter import defaults, web_config


def probe(path: str = "/healthz", environ: os._Environ[str] | dict[str, str] = os.environ) -> tuple[bool, str]:
    listen = environ.get("TXN_EXPORTER_LISTEN") or defaults.LISTEN
    host, _, port = listen.rpartition(":")
    host = host.strip("[]")
    host = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}.get(host, host)
    tls = False
    web = environ.get("TXN_EXPORTER_WEB_CONFIG_FILE")
    if web:
        try:
            tls = web_config.load(web).tls is not None
        except web_config.WebConfigError as e:
            return False, str(e)
    if tls:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        connection: http.client.HTTPConnection = http.client.HTTPSConnection(
            host, int(port), timeout=5, context=context
        )
    else:
        connection = http.client.HTTPConnection(host, int(port), timeout=5)
    headers = {}
    user, password = environ.get("TXN_EXPORTER_PROBE_USERNAME"), environ.get("TXN_EXPORTER_PROBE_PASSWORD")
    if user and password:
        headers["Authorization"] = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()
    try:
        connection.request("GET", path, headers=headers)
        response = connection.getresponse()
        body = response.read().decode(errors="replace").strip()
    except (OSError, http.client.HTTPException) as e:
        return False, f"{path}: {e}"
    finally:
        connection.close()
    if response.status == 200:
        return True, f"{path}: {body}"
    if response.status == 401 and path == "/healthz" and not headers:
        return True, f"{path}: server answers (401: basic auth on, no probe credentials)"
    return False, f"{path}: {response.status} {body}"


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    ok, message = probe(args[0] if args else "/healthz")
    print(message, file=sys.stdout if ok else sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

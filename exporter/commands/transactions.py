"""`txn-exporter transactions --url URL`: a running exporter's transactions view, in a terminal.

Asks the exporter's `/transactions` for JSON (exporter.view) and prints it as tables, or as it came
with `--json`. HTTPS and basic auth as the exporter's --web-config-file sets them up: the server's
certificate is checked against the system's CAs or `--ca-file` (`--insecure`: not at all), a client
certificate is sent with `--cert-file`/`--key-file`, and the password is read from a file or the
environment, never from the command line (where `ps` shows it); a URL's own `user:password@` works too.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import ssl
import sys
import urllib.error
import urllib.parse
import urllib.request

from exporter.view import table
from exporter.view.endpoint import PATH
from exporter.view.query import DEFAULT_LIMIT, MAX_LIMIT

PASSWORD_ENV = "TXN_EXPORTER_PASSWORD"


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "transactions",
        help="a running exporter's in-flight and hanging transactions, as a table",
        description="Fetch the transactions view of a running exporter (GET /transactions) and print the "
        "in-flight transactions, oldest first, and the hanging ones with Kafka's abort command.",
    )
    parser.add_argument("--url", required=True, help="the exporter, e.g. https://broker-1:9464 (or its /transactions)")
    parser.add_argument(
        "--state",
        action="append",
        default=[],
        metavar="STATE",
        help="ONGOING, PREPARE_COMMIT, PREPARE_ABORT or HANGING; repeatable (default: all)",
    )
    parser.add_argument("--min-age", metavar="AGE", help="only older than this: seconds, or 500ms, 90s, 5m, 2h")
    parser.add_argument(
        "--limit",
        type=int,
        default=DEFAULT_LIMIT,
        metavar="N",
        help=f"rows per list, at most {MAX_LIMIT} (default: {DEFAULT_LIMIT})",
    )
    parser.add_argument("--json", action="store_true", help="print the exporter's JSON document as it is")
    parser.add_argument("--username", help="basic auth user")
    parser.add_argument("--password-file", metavar="FILE", help=f"basic auth password (default: ${PASSWORD_ENV})")
    parser.add_argument("--ca-file", metavar="FILE", help="CA certificates to check the exporter's certificate with")
    parser.add_argument("--cert-file", metavar="FILE", help="client certificate (with --key-file)")
    parser.add_argument("--key-file", metavar="FILE", help="client certificate's key")
    parser.add_argument("--insecure", action="store_true", help="do not check the exporter's certificate")
    parser.add_argument("--timeout", type=float, default=10.0, metavar="SECONDS", help="(default: 10)")
    parser.set_defaults(func=run)


def _split(url: str) -> urllib.parse.SplitResult:
    """--url's parts; a bare host:port is http."""
    return urllib.parse.urlsplit(url if "://" in url else f"http://{url}")


def view_url(base: str, args: argparse.Namespace) -> str:
    parts = _split(base)
    path = parts.path.rstrip("/")
    if not path.endswith(PATH):
        path += PATH
    query = [("format", "json"), ("limit", str(args.limit))]
    query += [("state", s) for s in args.state]
    if args.min_age:
        query.append(("min_age", args.min_age))
    netloc = parts.netloc.rpartition("@")[2]  # credentials go in a header
    return urllib.parse.urlunsplit((parts.scheme, netloc, path, urllib.parse.urlencode(query), ""))


def _credentials(args: argparse.Namespace) -> tuple[str, str] | None:
    parts = _split(args.url)
    if parts.username is not None:
        return urllib.parse.unquote(parts.username), urllib.parse.unquote(parts.password or "")
    if args.username is None:
        return None
    if args.password_file:
        with open(args.password_file, encoding="utf-8") as f:
            return args.username, f.read().rstrip("\r\n")
    return args.username, os.environ.get(PASSWORD_ENV, "")


def _context(args: argparse.Namespace) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=args.ca_file)
    if args.insecure:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    if args.cert_file:
        context.load_cert_chain(args.cert_file, args.key_file)
    return context


def fetch(args: argparse.Namespace) -> dict:
    """The JSON document; OSError/ValueError with a one-line message when it cannot be had."""
    request = urllib.request.Request(view_url(args.url, args), headers={"Accept": "application/json"})
    credentials = _credentials(args)
    if credentials is not None:
        token = base64.b64encode(":".join(credentials).encode()).decode()
        request.add_header("Authorization", f"Basic {token}")
    context = _context(args) if request.type == "https" else None
    try:
        with urllib.request.urlopen(request, timeout=args.timeout, context=context) as response:
            return json.loads(response.read())
    except urllib.error.HTTPError as e:
        detail = e.read().decode(errors="replace").strip().splitlines()
        hint = " (give --username and --password-file)" if e.code == 401 else ""
        raise ValueError(f"{e.code} {e.reason}{hint}: {detail[0] if detail else ''}") from None
    except urllib.error.URLError as e:
        raise OSError(f"cannot reach {request.full_url}: {e.reason}") from None


def run(args: argparse.Namespace) -> int:
    try:
        doc = fetch(args)
    except (OSError, ValueError, ssl.SSLError) as e:
        print(f"txn-exporter transactions: {e}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(doc, indent=1))
    else:
        sys.stdout.write(table.render(doc))
    return 0

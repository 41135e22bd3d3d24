"""`txn-exporter transactions --url URL`: a running exporter's transactions view, in a terminal
(without --url or --prometheus, the exporter at DEFAULT_URL);
with several exporters (`--url` repeated, or `--prometheus URL` for the targets of the exporters'
job), one view of the cluster, fetched (exporter.sources.peer_exporters) and merged (exporter.view.cluster).

Asks each exporter's `/transactions` for JSON (exporter.view) and prints it as tables, or as JSON
with `--json` (one exporter: its document as it came; several: the merged document with a status
per exporter). An exporter that does not answer is one line naming it and why; the exit status is
0 when every exporter answered, 1 when some did not, 2 when none did (or on a usage error).
HTTPS and basic auth as the exporter's --web-config-file sets them up: the server's certificate is
checked against the system's CAs or `--ca-file` (`--insecure`: not at all), a client certificate
is sent with `--cert-file`/`--key-file`, and the password is read from a file or the environment,
never from the command line (where `ps` shows it); a URL's own `user:password@` works too. The
same TLS settings apply to the Prometheus server (its credentials, if any, in its URL).
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import ssl
import sys
import urllib.parse
from collections.abc import Callable, Mapping

from exporter import defaults
from exporter.contracts.peers import Source
from exporter.sources import peer_exporters
from exporter.view import cluster, document, table
from exporter.view.endpoint import PATH
from exporter.view.query import DEFAULT_LIMIT, MAX_LIMIT

PASSWORD_ENV = "TXN_EXPORTER_PASSWORD"
# Neither --url nor --prometheus: the exporter on this machine's default port (the demo's, or a
# sidecar's from inside its pod).
DEFAULT_URL = f"http://127.0.0.1:{defaults.PORT}"
UNAUTHORIZED_HINT = " (give --username and --password-file)"
PROMETHEUS_TARGETS = "/api/v1/targets?state=active"


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "transactions",
        help="running exporters' in-flight and hanging transactions, as a table (one exporter, or the cluster)",
        description="Fetch the transactions view of running exporters (GET /transactions) and print the "
        "in-flight transactions, oldest first, and the hanging ones with Kafka's abort command. With several "
        "exporters (--url repeated, or --prometheus), their views merged, each row naming its broker, and a "
        "line for each exporter that did not answer.",
    )
    parser.add_argument(
        "--url",
        action="append",
        default=[],
        help=f"an exporter, e.g. https://broker-1:{defaults.PORT} (or its /transactions); repeatable (default without "
        f"--prometheus: {DEFAULT_URL})",
    )
    parser.add_argument(
        "--prometheus",
        metavar="URL",
        help="a Prometheus server whose active targets of --job are the exporters to ask (GET /api/v1/targets)",
    )
    parser.add_argument(
        "--job",
        default=defaults.SCRAPE_JOB,
        help=f"the exporters' job label in Prometheus (default: {defaults.SCRAPE_JOB})",
    )
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
    parser.add_argument(
        "--json",
        action="store_true",
        help="print JSON: one exporter's document as it is; several: the merged rows and each exporter's status",
    )
    parser.add_argument("--username", help="basic auth user")
    parser.add_argument("--password-file", metavar="FILE", help=f"basic auth password (default: ${PASSWORD_ENV})")
    parser.add_argument("--ca-file", metavar="FILE", help="CA certificates to check the exporter's certificate with")
    parser.add_argument("--cert-file", metavar="FILE", help="client certificate (with --key-file)")
    parser.add_argument("--key-file", metavar="FILE", help="client certificate's key")
    parser.add_argument("--insecure", action="store_true", help="do not check the exporter's certificate")
    parser.add_argument(
        "--timeout",
        type=float,
        default=10.0,
        metavar="SECONDS",
        help="per exporter, all asked in parallel (default: 10)",
    )
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


def _credentials(url: str, args: argparse.Namespace) -> tuple[str, str] | None:
    parts = _split(url)
    if parts.username is not None:
        return urllib.parse.unquote(parts.username), urllib.parse.unquote(parts.password or "")
    if args.username is None:
        return None
    if args.password_file:
        with open(args.password_file, encoding="utf-8") as f:
            return args.username, f.read().rstrip("\r\n")
    return args.username, os.environ.get(PASSWORD_ENV, "")


def _authorization(credentials: tuple[str, str] | None) -> dict[str, str]:
    if credentials is None:
        return {}
    return {"Authorization": "Basic " + base64.b64encode(":".join(credentials).encode()).decode()}


def _context(args: argparse.Namespace) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=args.ca_file)
    if args.insecure:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    if args.cert_file:
        context.load_cert_chain(args.cert_file, args.key_file)
    return context


def _source(base: str, name: str, args: argparse.Namespace, extra: Mapping[str, object] | None = None) -> Source:
    headers = _authorization(_credentials(base, args))
    return Source(name, view_url(base, args), headers, dict(extra or {}))


def _fetch(args: argparse.Namespace, context: ssl.SSLContext | None) -> Callable[[Source], dict[str, object]]:
    def fetch(source: Source) -> dict[str, object]:
        https = source.url.startswith("https:")
        return peer_exporters.fetch_view(
            source.url, source.headers, context if https else None, args.timeout, unauthorized_hint=UNAUTHORIZED_HINT
        )

    return fetch


def fetch(args: argparse.Namespace) -> document.Document:
    """The JSON document of the one exporter of --url (as it came, read as the view's document);
    OSError/ValueError with a one-line message when it cannot be had."""
    source = _source(args.url[0], peer_exporters.name_of(args.url[0]), args)
    context = _context(args) if source.url.startswith("https:") else None
    try:
        return document.received(_fetch(args, context)(source))
    except peer_exporters.SourceError as e:  # whatever the exporter sent: escaped for the terminal
        if not e.reached:
            raise OSError(f"cannot reach {source.url}: {table.safe(e)}") from None
        raise ValueError(table.safe(e)) from None


def scrape_to_view(scrape_url: str) -> str:
    """A Prometheus target's scrape URL (…/metrics?params) as its exporter's base URL."""
    parts = urllib.parse.urlsplit(scrape_url)
    path = parts.path.rstrip("/").removesuffix("/metrics")
    return urllib.parse.urlunsplit((parts.scheme, parts.netloc, path, "", ""))


def prometheus_sources(args: argparse.Namespace, context: ssl.SSLContext) -> list[Source]:
    """The exporters of --job among the Prometheus server's active targets; ValueError (one line)
    when there are none or the server cannot be asked."""
    parts = _split(args.prometheus)
    netloc = parts.netloc.rpartition("@")[2]
    base = urllib.parse.urlunsplit((parts.scheme, netloc, parts.path.rstrip("/"), "", ""))
    headers = _authorization(
        (urllib.parse.unquote(parts.username), urllib.parse.unquote(parts.password or ""))
        if parts.username is not None
        else None
    )
    url = base + PROMETHEUS_TARGETS
    try:
        answer = peer_exporters.fetch_json(url, headers, context if parts.scheme == "https" else None, args.timeout)
    except peer_exporters.SourceError as e:
        raise ValueError(f"Prometheus at {base}: {e}") from None
    data = answer.get("data") if isinstance(answer, dict) else None
    targets = data.get("activeTargets") if isinstance(data, dict) else None
    if not isinstance(targets, list):
        raise ValueError(f"Prometheus at {base}: {url} has no data.activeTargets list: is it a Prometheus server?")
    sources, jobs = [], set()
    for target in targets:
        labels = target.get("labels") if isinstance(target, dict) else None
        if not isinstance(labels, dict) or not isinstance(target.get("scrapeUrl"), str):
            continue
        jobs.add(str(labels.get("job")))
        if labels.get("job") != args.job:
            continue
        instance = str(labels.get("instance") or peer_exporters.name_of(target["scrapeUrl"]))
        extra = {
            "prometheus": {
                "instance": instance,
                "health": target.get("health"),
                "last_error": target.get("lastError") or None,
                "last_scrape": target.get("lastScrape"),
            }
        }
        sources.append(_source(scrape_to_view(target["scrapeUrl"]), instance, args, extra))
    if not sources:
        known = ", ".join(sorted(jobs)) or "none"
        raise ValueError(
            f"Prometheus at {base} has no active target of job {args.job!r} (its jobs: {known}); see --job"
        )
    return sources


def run(args: argparse.Namespace) -> int:
    if not args.url and not args.prometheus:
        args.url = [DEFAULT_URL]
    if len(args.url) == 1 and not args.prometheus:
        return _run_one(args)
    try:
        context = _context(args)
        sources = [_source(url, peer_exporters.name_of(view_url(url, args)), args) for url in args.url]
        if args.prometheus:
            sources += prometheus_sources(args, context)
    except (OSError, ValueError) as e:  # a CA or password file that does not load, Prometheus
        print(f"txn-exporter transactions: {table.safe(e)}", file=sys.stderr)
        return 2
    unique: dict[tuple, Source] = {}
    for source in sources:  # an exporter given twice (the same credentials): asked once
        unique.setdefault((source.url, tuple(sorted(source.headers.items()))), source)
    sources = list(unique.values())
    answers = peer_exporters.gather(sources, _fetch(args, context))
    asked: document.QueryEcho = {
        "states": [s.upper() for s in args.state],
        "min_age": args.min_age,
        "limit": args.limit,
    }
    doc = cluster.merge(answers, args.limit, asked)  # `asked` stands for the exporters' query if none answered
    if args.json:
        print(json.dumps(doc, indent=1))
    else:
        sys.stdout.write(table.render(doc))
    failed = sum(answer.document is None for answer in answers)
    return 0 if not failed else 1 if failed < len(answers) else 2


def _run_one(args: argparse.Namespace) -> int:
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

"""`txn-exporter config check FILE`: validate a YAML config (and the web config it names) as `run`
would, without connecting to anything.

The environment (TXN_EXPORTER_*) is merged as `run` merges it, so a file that leaves
`bootstrap_servers` to the deployment's environment checks clean where it will run; `--no-env`
checks the file alone. The client settings (`kafka:`) are checked by librdkafka itself. Exit 0 with a
short summary, secrets masked; exit 2 with one line per error, each naming the bad key.
"""

from __future__ import annotations

import argparse
import os
import sys

from exporter import config


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("config", help="check a config file", description="Configuration tools.")
    actions = parser.add_subparsers(dest="config_command", required=True, metavar="ACTION")
    check = actions.add_parser(
        "check",
        help="validate a YAML config file as `run` would; exit 2 naming the bad key",
        description="Validate FILE (and the web config file it names) exactly as `txn-exporter run "
        "--config FILE` would, merged with the TXN_EXPORTER_* environment unless --no-env; print a "
        "summary with secrets masked. The client settings (kafka:) are checked by librdkafka itself, "
        "with the files they name (which must exist here). Nothing is contacted.",
    )
    check.add_argument("file", metavar="FILE")
    check.add_argument("--no-env", action="store_true", help="ignore TXN_EXPORTER_* variables")
    check.set_defaults(func=run_check)


def run_check(args: argparse.Namespace) -> int:
    environ = {} if args.no_env else os.environ
    try:
        settings = config.load(argparse.Namespace(config=args.file), environ)
    except config.ConfigError as e:
        for problem in e.problems:
            print(f"txn-exporter config check: {problem}", file=sys.stderr)
        return 2
    print(f"{args.file}: OK")
    for key, value in settings.redacted().items():
        if key == "kafka":
            for name, text in value.items():
                print(f"  kafka.{name}: {text}")
        elif value not in (None, [], {}):
            print(f"  {key}: {value}")
    if settings.web_config is not None:
        print(f"  web config: {settings.web_config.summary()}")
    return 0

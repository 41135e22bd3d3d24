"""`txn-exporter`: one entry point, one module per subcommand under exporter.commands.

Distributions installed beside it add subcommands through the `txn_exporter.commands` entry point
group (a module with the same `register`): the workshop's `demo` (workshop/), which the sidecar's
wheel and image do not carry."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from importlib.metadata import entry_points

from exporter import __version__
from exporter.commands import config_check, decode, hanging, pipeline, run, transactions

# Each command module offers `register(subparsers)` and sets `func(args) -> int` on its parser.
COMMANDS = (run, decode, pipeline, config_check, hanging, transactions)
PLUGIN_GROUP = "txn_exporter.commands"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="txn-exporter",
        description="Kafka transaction-coordinator metrics (KIP-1344 and more) for brokers 3.6 to 4.x.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in COMMANDS:
        command.register(subparsers)
    for plugin in entry_points(group=PLUGIN_GROUP):
        try:
            plugin.load().register(subparsers)
        except Exception as e:  # a broken add-on must not take the exporter's own commands down
            print(f"txn-exporter: command {plugin.name!r} of {plugin.value} not loaded: {e}", file=sys.stderr)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())

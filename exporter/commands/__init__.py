"""Subcommands of `txn-exporter`, one module each."""

"""Settings of `txn-exporter run`: one schema (schema.py), four sources merged into it (loading.py),
librdkafka's verdict on the client settings (client_check.py). Precedence, highest first:
command-line flags, environment variables, the YAML config file, defaults.

What the rest of the exporter uses is here.
"""

from exporter.config.loading import add_arguments, load
from exporter.config.schema import (
    CONFIG_ENV,
    ConfigError,
    Settings,
    env_name,
    listen_address,
    split_listen,
)

__all__ = [
    "CONFIG_ENV",
    "ConfigError",
    "Settings",
    "add_arguments",
    "env_name",
    "listen_address",
    "load",
    "split_listen",
]

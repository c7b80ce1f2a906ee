"""Configuration errors: one message naming the key and, when known, the file and line."""

from __future__ import annotations

from fabric.errors import FabricmonError


class ConfigError(FabricmonError, ValueError):
    """A configuration file or environment override that fabricmon cannot use."""

"""The discovery package's exceptions (the tree is in :mod:`discovery`'s docstring)."""

from __future__ import annotations

from fabric.errors import FabricmonError


class DiscoveryError(FabricmonError):
    """Root of the discovery package's errors."""


class NothingToPoll(DiscoveryError, ValueError):
    """No switch to start from: no inventory, no exact names in ``targets``, no ``--switches``."""


class SwitchFailed(DiscoveryError):
    """One switch could not be read; the message says why, in words for the report."""


class NetboxError(DiscoveryError):
    """NetBox could not be read (``inventory import netbox``): refused, not there, or no NetBox answer."""

"""The project's exception root.

Every package defines its own root on top of this one, so the command line can turn any of
them into a one-line message without a traceback::

    FabricmonError
    ├── fabric.errors.TopologyError (ValueError)      bad topology parameters or inventory
    ├── config.errors.ConfigError (ValueError)        bad configuration file or environment
    └── store.errors.StoreError                       database and embedded-store failures
"""


class FabricmonError(Exception):
    """Root of every error fabricmon raises on purpose."""


class TopologyError(FabricmonError, ValueError):
    """Topology parameters or an inventory file that cannot describe an AIPod fabric."""

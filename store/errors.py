"""Errors of the storage layer: the database and the embedded store.

Every error here derives from :class:`StoreError`, itself rooted at the project's
:class:`~fabric.errors.FabricmonError`, so the command line prints it as one line::

    FabricmonError
    └── StoreError                     database access and embedded-store failures
        ├── EmbeddedStoreError         the private PostgreSQL + TimescaleDB cluster
        │                              (missing binaries or extension, cannot start or stop)
        └── SpoolError                 a spool directory that is not safe to use (another
                                       owner, writable by group or others, not a directory)
"""

from __future__ import annotations

from fabric.errors import FabricmonError


class StoreError(FabricmonError):
    """Root of the storage layer's errors."""


class EmbeddedStoreError(StoreError):
    """The embedded PostgreSQL + TimescaleDB cluster cannot be set up, started, stopped or read."""


class SpoolError(StoreError):
    """A spool directory that is not ours alone: others could forge, alter or remove its batches."""

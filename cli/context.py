"""What most commands need: the configuration, the fabric it describes, and the database."""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

from config.loader import load_config
from config.model import Config
from fabric.inventory import load_inventory
from fabric.model import Fabric
from fabric.topology import FabricParams, build_aipod
from store.db import resolve_dsn

T = TypeVar("T")


def config_of(args: argparse.Namespace) -> Config:
    """The configuration named by ``--config`` (or defaults), with environment overrides."""
    return load_config(args.config)


def fabric_of(config: Config) -> Fabric:
    """The fabric the configuration describes: its inventory file, or a generated AIPod."""
    if config.fabric.inventory is not None:
        return load_inventory(config.fabric.inventory)
    gen = config.fabric.generate
    if gen is None:
        return build_aipod(FabricParams(gpus=512))
    params = FabricParams(gpus=gen.gpus, rails=gen.rails, radix=gen.radix, speed_gbps=gen.speed_gbps)
    return build_aipod(params, gen.naming)


def dsn_of(config: Config) -> str:
    """The configured DSN, else the embedded store's (started on demand)."""
    return resolve_dsn(config.database)


def run(coro: Coroutine[Any, Any, T]) -> T:
    """Run one coroutine to completion (the commands' only event loop)."""
    return asyncio.run(coro)

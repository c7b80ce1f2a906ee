"""Building and serialising the AIPod model at 16,384 GPUs."""

from __future__ import annotations

import io
import time
from typing import Any

from fabric.inventory import dump_inventory
from fabric.topology import FabricParams, build_aipod


async def run(dsn: str) -> dict[str, Any]:
    del dsn
    started = time.perf_counter()
    fabric = build_aipod(FabricParams(gpus=16384))
    built = time.perf_counter() - started
    started = time.perf_counter()
    ports = sum(1 for _ in fabric.all_ports())
    indexed = time.perf_counter() - started
    buf = io.StringIO()
    started = time.perf_counter()
    dump_inventory(fabric, buf)
    dumped = time.perf_counter() - started
    return {
        "gpus": 16384,
        "switches": len(fabric.switches),
        "ports": ports,
        "build_s": round(built, 3),
        "port_index_s": round(indexed, 3),
        "inventory_yaml_s": round(dumped, 3),
        "inventory_yaml_mb": round(len(buf.getvalue()) / 1e6, 2),
    }

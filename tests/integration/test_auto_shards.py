"""``AutoShards`` on the real database, in-process: claiming, handing over, leaving, a shard that
cannot start. The switches are unreachable (a closed port): what is judged here is who holds
which lease and which shard services run, not the telemetry (tests/integration/test_shard_leases.py
runs real collectors against the simulator)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import asyncpg

from collector.auto_shards import AutoShards
from config.model import Config
from fabric.model import FabricParams
from fabric.topology import build_aipod
from simulator.sim_config import sim_config
from store.inventory import ensure_fabric
from tests.support.configs import config
from tests.support.waiting import until

PARAMS = FabricParams(gpus=32, rails=2, radix=8)
TTL_S = 2.0


def _config(spool: Path, shards: int = 2) -> Config:
    data: dict[str, Any] = sim_config(gnmi_address="127.0.0.1:9", snmp_address="127.0.0.1:9", params=PARAMS)
    return config(data, spool=spool, flush_s=None, collector={"shard": "auto", "shards": shards, "lease_ttl_s": TTL_S})


@contextlib.asynccontextmanager
async def running(auto: AutoShards) -> AsyncIterator[asyncio.Event]:
    stop = asyncio.Event()
    task = asyncio.create_task(auto.run(stop))
    try:
        yield stop
    finally:
        stop.set()
        await asyncio.wait_for(task, 60)


async def _holders(pool: asyncpg.Pool) -> dict[int, str]:
    rows = await pool.fetch(
        "SELECT shard, holder FROM collector_shards WHERE holder IS NOT NULL AND expires_at > now()"
    )
    return {int(r["shard"]): str(r["holder"]) for r in rows}


async def test_the_first_up_hands_a_shard_over_and_a_clean_stop_frees_its_leases_at_once(
    pool: asyncpg.Pool, tmp_path: Path
) -> None:
    fabric = build_aipod(PARAMS)
    async with pool.acquire() as conn:
        await ensure_fabric(conn, fabric)
    a = AutoShards(_config(tmp_path / "a"), fabric, pool)
    b = AutoShards(_config(tmp_path / "b"), fabric, pool)
    assert a.holder != b.holder
    async with running(a):
        await until(lambda: set(a.services) == {0, 1}, 10, lambda: f"a runs {set(a.services)}")
        assert await _holders(pool) == {0: a.holder, 1: a.holder}
        async with running(b) as stop_b:
            # a holds more than its fair share now: it hands one shard over, and b takes it
            await until(lambda: len(a.services) == 1 and len(b.services) == 1, 15, lambda: f"{a.stats} {b.stats}")
            held = await _holders(pool)
            assert sorted(held.values()) == sorted([a.holder, b.holder])
            assert a.stats.released == 1 and b.stats.claims == 1
            given = set(b.services)
            stop_b.set()
        # b stopped cleanly: its lease was released, so a takes the shard back well inside the TTL
        await until(lambda: set(a.services) == {0, 1}, TTL_S, lambda: f"a runs {set(a.services)}")
        assert given <= set(a.services) and a.stats.lost == 0
    assert await _holders(pool) == {}
    assert await pool.fetchval("SELECT count(*) FROM collector_members") == 0


async def test_a_shard_that_cannot_start_is_released_and_retried_after_a_ttl(
    pool: asyncpg.Pool, tmp_path: Path
) -> None:
    fabric = build_aipod(PARAMS)
    async with pool.acquire() as conn:
        await ensure_fabric(conn, fabric)
    blocked = tmp_path / "not-a-directory"
    blocked.write_text("a file where the spool directory should be\n")
    a = AutoShards(_config(blocked / "spool", shards=1), fabric, pool)
    async with running(a):
        await until(lambda: a.stats.crashed >= 1, 10, lambda: f"{a.stats}")
        assert a.services == {} and await _holders(pool) == {}
        # not claimed again at once (a crash loop), but after the TTL
        crashed = a.stats.crashed
        await asyncio.sleep(TTL_S / 2)
        assert a.stats.crashed == crashed
        await until(lambda: a.stats.crashed > crashed, 3 * TTL_S, lambda: f"{a.stats}")

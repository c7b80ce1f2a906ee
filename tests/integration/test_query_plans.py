"""The checks that hunt for the few bad ports among all of them must use their partial indexes
(migration 007): the index predicates and the checks' candidate queries are kept in step here."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from analyzer import pfc, stability
from collector.pipeline import Pipeline
from fabric.model import FabricParams
from fabric.topology import build_aipod
from simulator.fabric_state import FabricState
from simulator.feed import feed
from store.db import create_pool
from store.inventory import ensure_fabric
from store.migrate import migrate

pytestmark = pytest.mark.db
S = 1_000_000_000


async def _plan(conn: object, sql: str, *args: object) -> str:
    rows = await conn.fetch("EXPLAIN " + sql, *args)  # type: ignore[attr-defined]
    return "\n".join(r[0] for r in rows)


async def test_candidate_queries_use_the_partial_indexes(migrated_db: str) -> None:
    fabric = build_aipod(FabricParams(gpus=512))
    pool = await create_pool(migrated_db)
    try:
        async with pool.acquire() as conn:
            await migrate(conn)
            await ensure_fabric(conn, fabric)
        clock = [1_795_000_000 * S]
        state = FabricState(fabric, seed=3, clock=lambda: clock[0])
        pipe = Pipeline(pool, fabric)
        pipe.start()
        for _ in range(2):  # two samples, so there are rates (and a chunk to plan against)
            clock[0] += 10 * S
            state.tick(clock[0])
            await feed(state, pipe, clock[0], lldp=False)
        await pipe.close()
        now = datetime.fromtimestamp(clock[0] / 1e9, tz=UTC)
        async with pool.acquire() as conn:
            await conn.execute("ANALYZE")
            # Forbid the sequential scan: a predicate that drifted from its index then falls back
            # to the plain time index, and the assertion names which index went missing.
            await conn.execute("SET enable_seqscan = off")
            plan = await _plan(conn, pfc._SQL, now - timedelta(seconds=40), now, 100.0)
            assert "pfc_counters_pausing" in plan, plan
            plan = await _plan(conn, stability._ERRORS_SQL, now - timedelta(seconds=30), now, [], [], [], [])
            assert "port_counters_faulty" in plan, plan
    finally:
        await pool.close()

"""Shard leases on the real database (store/shard_leases.py): claims, expiry, and the fence that
keeps a collector whose lease was taken over from writing a row after the takeover."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from pathlib import Path

import asyncpg
import pytest

from store.config import WriterConfig
from store.records import PortSample
from store.shard_leases import Fence, Fenced, claim, ensure_shards, release, tick
from store.spool import Spool
from store.writer import BatchWriter

TTL_S = 1.0


def _rows(n: int, switch: str = "lf-g1-r1") -> list[PortSample]:
    now = datetime.now(UTC)
    return [PortSample(now - timedelta(seconds=i), switch, "swp1") for i in range(n)]


async def _expire() -> None:
    await asyncio.sleep(TTL_S + 0.2)


async def test_a_lease_is_one_holders_until_it_expires_and_a_takeover_bumps_its_epoch(pool: asyncpg.Pool) -> None:
    async with pool.acquire() as conn:
        await ensure_shards(conn, 2)
        await ensure_shards(conn, 2)  # idempotent
        assert await claim(conn, "a", 2, 0, TTL_S) == 1
        assert await claim(conn, "b", 2, 0, TTL_S) is None  # a holds it
        view = await tick(conn, "a", 2, TTL_S, [0])
        assert view.held == {0: 1} and view.members == ("a",)
        assert [(le.shard, le.holder, le.live) for le in view.leases] == [(0, "a", True), (1, None, False)]
        await _expire()  # a stops renewing
        assert await claim(conn, "b", 2, 0, TTL_S) == 2
        assert (await tick(conn, "a", 2, TTL_S, [0])).held == {}  # a's renewal finds nothing of its own
        # a clean stop gives the lease back at once: no TTL to wait out
        await release(conn, "b", 2, [0], leave=True)
        assert await claim(conn, "c", 2, 0, TTL_S) == 3
        view = await tick(conn, "c", 2, TTL_S, [0])
        assert "b" not in view.members and view.held == {0: 3}


async def test_a_taken_over_collector_writes_nothing_more(pool: asyncpg.Pool) -> None:
    async with pool.acquire() as conn:
        await ensure_shards(conn, 1)
        epoch = await claim(conn, "old", 1, 0, TTL_S)
    assert epoch is not None
    old = BatchWriter(pool, "port_counters", PortSample._fields, WriterConfig(), fence=Fence(1, 0, "old", epoch))
    await old.put(_rows(3))
    await old.flush()
    assert old.stats.rows_written == 3
    await _expire()
    async with pool.acquire() as conn:
        assert await claim(conn, "new", 1, 0, TTL_S) == epoch + 1
    # rows the old holder read before it knew (a freeze, a partition): refused, counted, not retried
    await old.put(_rows(5, "lf-g1-r2"))
    await old.flush()
    assert old.stats.rows_written == 3 and old.stats.rows_dropped == {"fenced": 5}
    assert old.pending == 0
    assert await pool.fetchval("SELECT count(*) FROM port_counters WHERE switch = 'lf-g1-r2'") == 0
    # the conflict-safe path is fenced too: the same rows again go through the staging insert
    await old.put(_rows(3))
    await old.flush()
    assert old.stats.rows_dropped == {"fenced": 8}
    new = BatchWriter(pool, "port_counters", PortSample._fields, WriterConfig(), fence=Fence(1, 0, "new", epoch + 1))
    await new.put(_rows(5, "lf-g1-r2"))
    await new.flush()
    assert new.stats.rows_written == 5 and new.stats.rows_dropped == {}


async def test_a_takeover_waits_for_a_write_in_flight(pool: asyncpg.Pool) -> None:
    async with pool.acquire() as conn:
        await ensure_shards(conn, 1)
        epoch = await claim(conn, "old", 1, 0, TTL_S)
    assert epoch is not None
    fence = Fence(1, 0, "old", epoch)
    await _expire()
    async with pool.acquire() as writing, pool.acquire() as taking:
        tx = writing.transaction()
        await tx.start()
        await fence.check(writing)  # the old holder's write, checked and not yet committed
        # the lease expired, but its row is locked by that write: the claim gives up, for now
        assert await claim(taking, "new", 1, 0, TTL_S, lock_wait_ms=200) is None
        await tx.commit()
        assert await claim(taking, "new", 1, 0, TTL_S) == epoch + 1
        with pytest.raises(Fenced, match="taken over from old"):
            async with writing.transaction():
                await fence.check(writing)


async def test_a_lease_not_renewed_lapses_and_mixed_shard_counts_are_seen(pool: asyncpg.Pool) -> None:
    async with pool.acquire() as conn:
        await ensure_shards(conn, 2)
        assert await claim(conn, "a", 2, 0, TTL_S) == 1
        assert await claim(conn, "a", 2, 1, TTL_S) == 1
        # a runs shard 0 only (shard 1's service could not start): shard 1 is not renewed
        for _ in range(3):
            assert (await tick(conn, "a", 2, TTL_S, [0])).held == {0: 1}
            await asyncio.sleep(TTL_S / 2)
        assert await claim(conn, "b", 2, 0, TTL_S) is None
        assert await claim(conn, "b", 2, 1, TTL_S) == 2
        # a collector configured with another shard count sees the others, and they see it
        view = await tick(conn, "c", 3, TTL_S, [])
        assert view.other_shard_counts == (2,) and view.members == ("c",)
        assert (await tick(conn, "a", 2, TTL_S, [0])).other_shard_counts == (3,)


async def test_a_fenced_spool_stays_on_disk(pool: asyncpg.Pool, tmp_path: Path) -> None:
    async with pool.acquire() as conn:
        await ensure_shards(conn, 1)
        epoch = await claim(conn, "old", 1, 0, TTL_S)
    assert epoch is not None
    spool = Spool(tmp_path / "port_counters", 64 * 2**20, quarantine=tmp_path / "quarantine")
    old = BatchWriter(
        pool, "port_counters", PortSample._fields, WriterConfig(), spool=spool, fence=Fence(1, 0, "old", epoch)
    )
    assert spool.push(_rows(4, "lf-g1-r3"), PortSample._fields)  # spooled during an outage, say
    await _expire()
    async with pool.acquire() as conn:
        assert await claim(conn, "new", 1, 0, TTL_S) == epoch + 1
    await old.flush()
    # not the old holder's to write any more, and not thrown away either: it replays when the
    # shard is this collector's again
    assert len(spool) == 1 and old.stats.rows_dropped == {}
    assert await pool.fetchval("SELECT count(*) FROM port_counters WHERE switch = 'lf-g1-r3'") == 0
    await _expire()
    async with pool.acquire() as conn:
        again = await claim(conn, "old", 1, 0, TTL_S)
    assert again == epoch + 2
    old.fence = Fence(1, 0, "old", again)
    await old.flush()
    assert len(spool) == 0
    assert await pool.fetchval("SELECT count(*) FROM port_counters WHERE switch = 'lf-g1-r3'") == 4

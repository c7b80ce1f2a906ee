"""The ``collector_shards`` and ``collector_members`` tables (migration 016): shard leases for
``collector.shard: auto``.

This module owns writing both tables; :mod:`collector.auto_shards` drives it. One :func:`tick`
per second or so renews this collector's membership and every lease it holds and reads what the
others hold; :func:`claim` takes over a shard whose lease is free or expired, bumping its epoch;
:func:`release` gives leases back on a clean stop. Expiry is judged by the database's clock, never
a collector's.

A :class:`Fence` is one held lease as the writers see it: every write of that shard's pipeline
checks, in its own transaction, that this collector still holds the lease at the same epoch
(``FOR SHARE``: a takeover waits for a write in flight, and every write after it is refused with
:class:`Fenced`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import asyncpg

from store.db import Connection


class Fenced(Exception):
    """This collector's lease on the shard was taken over: its writes are refused."""


@dataclass(frozen=True, slots=True)
class Fence:
    """A lease this collector holds: shard ``shard`` of ``shards`` at ``epoch``."""

    shards: int
    shard: int
    holder: str
    epoch: int

    async def check(self, conn: Connection) -> None:
        """Raise :class:`Fenced` unless the lease is still ours; call inside the write's transaction."""
        held = await conn.fetchval(
            "SELECT true FROM collector_shards WHERE shards = $1 AND shard = $2 AND holder = $3 AND epoch = $4 "
            "FOR SHARE",
            self.shards,
            self.shard,
            self.holder,
            self.epoch,
        )
        if not held:
            raise Fenced(f"shard {self.shard}/{self.shards} was taken over from {self.holder} (epoch {self.epoch})")


@dataclass(frozen=True, slots=True)
class Lease:
    """One shard's lease as read in a tick."""

    shard: int
    holder: str | None
    epoch: int
    #: Unexpired (by the database's clock) and held.
    live: bool


@dataclass(frozen=True, slots=True)
class TickView:
    """What one tick saw: the leases this collector renewed (shard → epoch), every lease, the
    live members (this one included), and the shard counts live members of another ``shards``
    use (a misconfiguration: two lease sets would collect the same switches twice)."""

    held: dict[int, int]
    leases: tuple[Lease, ...]
    members: tuple[str, ...]
    other_shard_counts: tuple[int, ...] = ()


async def ensure_shards(conn: Connection, shards: int) -> None:
    """One row per shard of ``shards`` (free until claimed)."""
    await conn.execute(
        "INSERT INTO collector_shards (shards, shard) SELECT $1, s FROM generate_series(0, $1 - 1) s "
        "ON CONFLICT DO NOTHING",
        shards,
    )


async def tick(
    conn: Connection, holder: str, shards: int, ttl_s: float, renew: Iterable[int], *, lock_wait_ms: float = 500
) -> TickView:
    """Renew ``holder``'s membership and its leases on ``renew`` (the shards it runs) for another
    ``ttl_s``; read everyone's. A lease of ``holder`` it does not renew lapses by itself."""
    async with conn.transaction():
        await conn.execute(f"SET LOCAL lock_timeout = {int(lock_wait_ms)}")
        await conn.execute(
            "INSERT INTO collector_members (holder, shards, expires_at) "
            "VALUES ($1, $2, now() + make_interval(secs => $3)) "
            "ON CONFLICT (holder) DO UPDATE SET shards = EXCLUDED.shards, expires_at = EXCLUDED.expires_at",
            holder,
            shards,
            ttl_s,
        )
        renewed = await conn.fetch(
            "UPDATE collector_shards SET expires_at = now() + make_interval(secs => $3) "
            "WHERE shards = $1 AND holder = $2 AND shard = ANY($4::int[]) RETURNING shard, epoch",
            shards,
            holder,
            ttl_s,
            sorted(renew),
        )
        leases = await conn.fetch(
            "SELECT shard, holder, epoch, holder IS NOT NULL AND expires_at > now() AS live "
            "FROM collector_shards WHERE shards = $1 ORDER BY shard",
            shards,
        )
        members = await conn.fetch(
            "SELECT holder, shards FROM collector_members WHERE expires_at > now() ORDER BY holder"
        )
    return TickView(
        held={int(r["shard"]): int(r["epoch"]) for r in renewed},
        leases=tuple(Lease(int(r["shard"]), r["holder"], int(r["epoch"]), bool(r["live"])) for r in leases),
        members=tuple(str(r["holder"]) for r in members if r["shards"] == shards),
        other_shard_counts=tuple(sorted({int(r["shards"]) for r in members if r["shards"] != shards})),
    )


async def claim(
    conn: Connection, holder: str, shards: int, shard: int, ttl_s: float, *, lock_wait_ms: float = 500
) -> int | None:
    """Take shard ``shard`` if its lease is free or expired: its new epoch, or None if another
    collector holds it, took it first, or is still writing under it (its row locked ``FOR SHARE``
    past ``lock_wait_ms``: a frozen writer, whose session PostgreSQL ends in time)."""
    try:
        async with conn.transaction():
            await conn.execute(f"SET LOCAL lock_timeout = {int(lock_wait_ms)}")
            epoch = await conn.fetchval(
                "UPDATE collector_shards SET holder = $3, epoch = epoch + 1, claimed_at = now(), "
                "expires_at = now() + make_interval(secs => $4) "
                "WHERE shards = $1 AND shard = $2 AND (holder IS NULL OR expires_at <= now()) RETURNING epoch",
                shards,
                shard,
                holder,
                ttl_s,
            )
    except asyncpg.exceptions.LockNotAvailableError:
        return None
    return None if epoch is None else int(epoch)


async def release(conn: Connection, holder: str, shards: int, released: Iterable[int], *, leave: bool) -> None:
    """Give back ``released`` leases at once (a standby need not wait out the TTL); with ``leave``,
    this collector's membership too (a clean stop)."""
    async with conn.transaction():
        await conn.execute(
            "UPDATE collector_shards SET holder = NULL, expires_at = '-infinity' "
            "WHERE shards = $1 AND holder = $2 AND shard = ANY($3::int[])",
            shards,
            holder,
            list(released),
        )
        if leave:
            await conn.execute("DELETE FROM collector_members WHERE holder = $1", holder)

"""Retention and compression of the telemetry hypertables.

Where the server's TimescaleDB license offers them (the community license, e.g. the official
Docker image), retention and compression are TimescaleDB background policies. The Apache-only
build refuses both ("not supported under the current apache license"), so there the service
runs ``drop_chunks`` itself on a schedule (:func:`drop_expired_chunks`).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from datetime import timedelta
from enum import StrEnum

import asyncpg

from fabric.supervise import TaskHealth
from store.config import RetentionConfig

log = logging.getLogger(__name__)


class RetentionMode(StrEnum):
    """Who enforces retention."""

    POLICIES = "policies"  # TimescaleDB jobs on the server
    SERVICE = "service"  # fabricmon's own drop_chunks schedule


@dataclass(frozen=True, slots=True)
class HypertableRetention:
    """One hypertable's retention and how it compresses."""

    table: str
    days: float
    segment_by: str


def hypertables(config: RetentionConfig) -> list[HypertableRetention]:
    """Each telemetry hypertable with its configured retention."""
    return [
        HypertableRetention("port_counters", config.port_counters_days, "switch, port"),
        HypertableRetention("pfc_counters", config.pfc_counters_days, "switch, port, priority"),
        HypertableRetention("link_events", config.link_events_days, "switch, port"),
        HypertableRetention("switch_reachability", config.reachability_days, "switch"),
        HypertableRetention("oversubscription", config.oversubscription_days, "scope, name"),
        HypertableRetention("analyzer_runs", config.analyzer_runs_days, "status"),
        HypertableRetention("rail_history", config.oversubscription_days, "rail"),
        HypertableRetention("slo_history", config.oversubscription_days, "objective"),
        HypertableRetention("port_fec", config.link_health_days, "switch, port"),
        HypertableRetention("transceiver_dom", config.link_health_days, "switch, port"),
        HypertableRetention("dom_rollup", config.link_health_days, "switch, port"),
        HypertableRetention("fec_rollup", config.link_health_days, "switch, port"),
    ]


async def license_of(conn: asyncpg.Connection) -> str:
    """``timescaledb.license``: ``apache`` or ``timescale``."""
    value = await conn.fetchval("SELECT current_setting('timescaledb.license', true)")
    return str(value or "apache")


async def apply_retention(conn: asyncpg.Connection, config: RetentionConfig) -> RetentionMode:
    """Install policies where the license allows; otherwise report that the service must drop chunks."""
    if await license_of(conn) != "timescale":
        return RetentionMode.SERVICE
    for ht in hypertables(config):
        await conn.execute(
            f"ALTER TABLE {ht.table} SET (timescaledb.compress, timescaledb.compress_segmentby = '{ht.segment_by}')"
        )
        await conn.execute(
            "SELECT add_compression_policy($1::regclass, $2::interval, if_not_exists => true)",
            ht.table,
            timedelta(hours=config.compress_after_hours),
        )
        await conn.execute("SELECT remove_retention_policy($1::regclass, if_exists => true)", ht.table)
        await conn.execute(
            "SELECT add_retention_policy($1::regclass, $2::interval, if_not_exists => true)",
            ht.table,
            timedelta(days=ht.days),
        )
    return RetentionMode.POLICIES


async def drop_expired_chunks(conn: asyncpg.Connection, config: RetentionConfig) -> int:
    """Drop chunks older than each table's retention; return how many were dropped."""
    dropped = 0
    for ht in hypertables(config):
        rows = await conn.fetch(
            "SELECT drop_chunks($1::regclass, older_than => now() - $2::interval)", ht.table, timedelta(days=ht.days)
        )
        if rows:
            log.info("retention: dropped %d chunk(s) of %s", len(rows), ht.table)
        dropped += len(rows)
    return dropped


async def retention_loop(pool: asyncpg.Pool, config: RetentionConfig, health: TaskHealth | None = None) -> None:
    """Enforce retention for as long as the service runs (a task the service owns).

    Installs policies once where licensed and returns; otherwise drops expired chunks every
    ``drop_chunks_every_s``. A failed round (a database outage, or anything unforeseen: a
    retention that dies silently fills the disk) is logged, marked in ``health`` and retried on
    the next round.
    """
    health = health or TaskHealth("retention")
    while True:
        try:
            async with pool.acquire() as conn:
                if await apply_retention(conn, config) is RetentionMode.POLICIES:
                    health.recovered()
                    return
                await drop_expired_chunks(conn, config)
            health.recovered()
        except Exception as exc:
            expected = isinstance(exc, OSError | asyncpg.PostgresError | asyncpg.InterfaceError)
            first = health.streak == 0
            health.failed(exc)
            health.restarts += 1
            trace = None if expected or not first else exc  # a bug: its traceback, once
            level = logging.WARNING if expected else logging.ERROR
            log.log(level, "retention: %s; retrying in %.0f s", health.last_error, config.drop_chunks_every_s,
                    exc_info=trace)  # fmt: skip
        await asyncio.sleep(config.drop_chunks_every_s)

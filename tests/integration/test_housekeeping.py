"""The pipeline's housekeeping on a real TimescaleDB: bad text, refused rows and a read-only database.

Unknown ports and LLDP tables are "latest wins" state written every round in one transaction. One
value the database refuses must not stop the rest: text it cannot store is cleaned, a row it
refuses for another reason is rejected alone (once, not every round), and when the database
cannot take writes at all everything waits for the next round.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import asyncpg
import pytest

from collector.pipeline import Pipeline
from collector.records import LldpNeighborReading, LldpReading, PortReading
from fabric.model import FabricParams
from fabric.topology import build_aipod
from store.db import create_pool
from store.inventory import record_discovered
from store.lldp import Neighbor, NeighborTable, replace_neighbors
from store.sqlstate import is_row_error
from tests.support.db import migrated_pool
from tests.support.waiting import until

S = 1_000_000_000
T0 = 1_790_000_000 * S
FABRIC = build_aipod(FabricParams(gpus=64, radix=16))
SW = "lf-g1-r1"
ROUND_S = 0.05


@pytest.fixture
async def pool(fresh_db: str) -> AsyncIterator[asyncpg.Pool]:
    async with migrated_pool(fresh_db, FABRIC) as pool:
        yield pool


def lldp(port: str, system_name: str, t_s: int = 0, **fields: str) -> LldpReading:
    return LldpReading(SW, port, T0 + t_s * S, (LldpNeighborReading(system_name, "nic1", **fields),))


async def neighbors(pool: asyncpg.Pool) -> dict[str, tuple[str, str | None]]:
    rows = await pool.fetch("SELECT port, system_name, port_description FROM lldp_neighbors WHERE switch = $1", SW)
    return {r["port"]: (r["system_name"], r["port_description"]) for r in rows}


async def unknown_ports(pool: asyncpg.Pool) -> set[str]:
    return {r["port"] for r in await pool.fetch("SELECT port FROM ports WHERE switch = $1 AND NOT known", SW)}


def messages(caplog: pytest.LogCaptureFixture, part: str) -> list[logging.LogRecord]:
    return [r for r in caplog.records if part in r.getMessage()]


async def test_text_the_database_cannot_store_lands_cleaned_among_good_tables(
    pool: asyncpg.Pool, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="collector.pipeline")
    pipe = Pipeline(pool, FABRIC, housekeeping_s=ROUND_S)
    pipe.start()
    try:
        await pipe.put_lldp(
            [
                lldp("swp1", "srv-g1-001"),
                lldp("swp2", "srv-g1\x00-002"),  # an interior NUL: PostgreSQL refuses it (22021)
                lldp("swp3", "srv-g1-003", port_description="nic\udc801"),  # a lone surrogate: not UTF-8
                lldp("swp4", "srv-g1-004"),
            ]
        )
        await pipe.put_ports([PortReading(SW, "swp\x0099", T0, oper_up=True)])  # unknown, and a NUL in its name
        await until(lambda: _has(pool, 4), 10)
        assert await neighbors(pool) == {
            "swp1": ("srv-g1-001", ""),
            "swp2": ("srv-g1-002", ""),
            "swp3": ("srv-g1-003", "nic\ufffd1"),
            "swp4": ("srv-g1-004", ""),
        }
        await until(lambda: _unknown(pool, {"swp99"}), 10)
        # The same bad table again, a round later: cleaned and counted again, not logged again.
        await pipe.put_lldp([lldp("swp2", "srv-g1\x00-002", t_s=1)])
        await until(lambda: _seen_at(pool, "swp2", 1), 10)
        await pipe.put_lldp([lldp("swp2", "srv-g1-022", t_s=2)])  # a later good table for that port
        await until(lambda: _seen_at(pool, "swp2", 2), 10)
        assert (await neighbors(pool))["swp2"] == ("srv-g1-022", "")
    finally:
        await pipe.close()
    assert pipe.stats.texts_cleaned == 4  # swp2 twice, swp3's description, the unknown port's name
    assert pipe.stats.state_rows_rejected == 0
    assert pipe.stats.state_writes_deferred == 0
    cleaned = messages(caplog, "cannot store")
    assert sorted(r.getMessage().split(":")[0] for r in cleaned) == [f"{SW} swp2", f"{SW} swp3", f"{SW} swp99"]
    assert pipe.housekeeping_health.healthy and pipe.housekeeping_health.restarts == 0


@pytest.mark.parametrize("errcode", ["22023", "P0001"])  # a data error; a trigger's plain RAISE
async def test_a_row_the_database_refuses_is_rejected_alone_and_not_retried(
    pool: asyncpg.Pool, caplog: pytest.LogCaptureFixture, errcode: str
) -> None:
    """A trigger refuses one neighbour and one port; a sequence counts its refusals (nextval
    survives the rollback), so retries every round would show."""
    await pool.execute(
        f"""
        CREATE SEQUENCE refusals;
        CREATE FUNCTION refuse_lldp() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF NEW.system_name = 'refused-by-trigger' THEN
                PERFORM nextval('refusals');
                RAISE EXCEPTION 'no such neighbour' USING ERRCODE = '{errcode}';
            END IF;
            RETURN NEW;
        END $$;
        CREATE TRIGGER refuse_lldp BEFORE INSERT ON lldp_neighbors FOR EACH ROW EXECUTE FUNCTION refuse_lldp();
        CREATE FUNCTION refuse_port() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF NEW.port = 'swp-refused' THEN
                PERFORM nextval('refusals');
                RAISE EXCEPTION 'no such port' USING ERRCODE = '{errcode}';
            END IF;
            RETURN NEW;
        END $$;
        CREATE TRIGGER refuse_port BEFORE INSERT ON ports FOR EACH ROW EXECUTE FUNCTION refuse_port();
        """
    )
    caplog.set_level(logging.INFO, logger="collector.pipeline")
    pipe = Pipeline(pool, FABRIC, housekeeping_s=ROUND_S)
    ports = [f"swp{i}" for i in range(1, 11)]
    await pipe.put_lldp([lldp(p, "refused-by-trigger" if p == "swp5" else f"srv-{p}") for p in ports])
    await pipe.put_ports([PortReading(SW, p, T0, oper_up=True) for p in ("swp97", "swp-refused", "swp99")])
    pipe.start()
    try:
        await until(lambda: _has(pool, 9), 10)
        await until(lambda: _unknown(pool, {"swp97", "swp99"}), 10)
        refusals = await pool.fetchval("SELECT last_value FROM refusals")
        await asyncio.sleep(10 * ROUND_S)  # ten more rounds
        assert await pool.fetchval("SELECT last_value FROM refusals") == refusals  # not retried
        assert set(await neighbors(pool)) == set(ports) - {"swp5"}
        assert pipe.stats.state_rows_rejected == 2
        assert len(messages(caplog, "refused this LLDP table")) == 1
        assert len(messages(caplog, "refused this unknown port")) == 1

        await pipe.put_lldp([lldp("swp5", "refused-by-trigger", t_s=1)])  # the next poll: refused again
        await until(lambda: _rejected(pipe, 3), 10)
        await pipe.put_lldp([lldp("swp5", "srv-swp5", t_s=2)])  # then a good table for that port lands
        await until(lambda: _has(pool, 10), 10)
        assert (await neighbors(pool))["swp5"] == ("srv-swp5", "")
    finally:
        await pipe.close()
    assert len(messages(caplog, "refused this LLDP table")) == 1  # the same port again: not logged twice
    assert pipe.stats.state_writes_deferred == 0
    assert await unknown_ports(pool) == {"swp97", "swp99"}


async def test_a_read_only_database_keeps_everything_until_it_takes_writes_again(
    pool: asyncpg.Pool, fresh_db: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Read-only (as after a failover to a standby, SQLSTATE 25006): nothing is rejected, one warning."""
    db = fresh_db.rsplit("/", 1)[1]
    await pool.execute(f"ALTER DATABASE {db} SET default_transaction_read_only = on")  # new sessions only
    read_only = await create_pool(fresh_db)
    caplog.set_level(logging.INFO, logger="collector.pipeline")
    pipe = Pipeline(read_only, FABRIC, housekeeping_s=ROUND_S)
    pipe.start()
    try:
        await pipe.put_lldp([lldp(f"swp{i}", f"srv-{i}") for i in range(1, 5)])
        await pipe.put_ports([PortReading(SW, "swp99", T0, oper_up=True)])
        await until(lambda: _deferred(pipe, 5), 10)
        assert await neighbors(pool) == {}
        assert await unknown_ports(pool) == set()
        assert pipe.stats.state_rows_rejected == 0
        outage = messages(caplog, "collector state not written")
        assert len(outage) == 1 and outage[0].levelno == logging.WARNING
        assert "read_only 25006" in outage[0].getMessage()

        await pool.execute(f"ALTER DATABASE {db} RESET default_transaction_read_only")
        await read_only.expire_connections()  # the pool reconnects, as after a failover
        await until(lambda: _has(pool, 4), 10)
        await until(lambda: _unknown(pool, {"swp99"}), 10)
    finally:
        await pipe.close()
        await read_only.close()
    assert pipe.stats.state_rows_rejected == 0
    back = messages(caplog, "collector state written again")
    assert len(back) == 1 and back[0].levelno == logging.INFO
    assert len(messages(caplog, "collector state not written")) == 1


async def test_an_unexpected_error_in_a_round_is_logged_and_the_task_runs_again(
    pool: asyncpg.Pool, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    pipe = Pipeline(pool, FABRIC, housekeeping_s=ROUND_S)
    flush = pipe._flush_state
    calls = 0

    async def buggy() -> None:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise KeyError("a bug")
        await flush()

    monkeypatch.setattr(pipe, "_flush_state", buggy)
    await pipe.put_lldp([lldp("swp1", "srv-g1-001")])
    pipe.start()
    try:
        await until(lambda: _has(pool, 1), 10)
    finally:
        await pipe.close()
    health = pipe.housekeeping_health
    assert health.restarts == 1 and health.healthy and health.last_error == "KeyError: 'a bug'"
    assert any("pipeline-housekeeping failed" in r.getMessage() for r in caplog.records)


async def test_the_stores_refuse_what_they_cannot_store_and_leave_the_connection_usable(pool: asyncpg.Pool) -> None:
    """Without cleaning, a surrogate fails on the client and a NUL on the server: both are row errors."""
    at = datetime.fromtimestamp(T0 / S, tz=UTC)
    async with pool.acquire() as conn, conn.transaction():
        for bad in ("nic\udc80", "nic\x00"):
            with pytest.raises(Exception) as refused:
                async with conn.transaction():
                    await replace_neighbors(conn, [NeighborTable(SW, "swp1", at, (Neighbor("srv", "p", bad),))])
            assert is_row_error(refused.value), refused.value
        written = await replace_neighbors(
            conn,
            [
                NeighborTable(SW, "swp1", at, (Neighbor("a", "p1"), Neighbor("a", "p1", "last wins"))),
                NeighborTable(SW, "swp2", at),  # no neighbour
            ],
        )
        assert written == 1
        assert await record_discovered(conn, [(SW, "swp98", at), (SW, "swp98", at)], set(FABRIC.switches)) == 1
        assert await record_discovered(conn, [(SW, "swp98", at), ("new-switch", "e1", at)], set(FABRIC.switches)) == 1
        assert await conn.fetchval("SELECT role FROM switches WHERE name = 'new-switch' AND NOT known") == "unknown"
    assert await neighbors(pool) == {"swp1": ("a", "last wins")}


async def _has(pool: asyncpg.Pool, n: int) -> bool:
    return len(await neighbors(pool)) == n


async def _unknown(pool: asyncpg.Pool, ports: set[str]) -> bool:
    return await unknown_ports(pool) == ports


async def _seen_at(pool: asyncpg.Pool, port: str, t_s: int) -> bool:
    at = await pool.fetchval("SELECT seen_at FROM lldp_neighbors WHERE switch = $1 AND port = $2", SW, port)
    return bool(at == datetime.fromtimestamp(T0 / S + t_s, tz=UTC))


async def _rejected(pipe: Pipeline, n: int) -> bool:
    return pipe.stats.state_rows_rejected >= n


async def _deferred(pipe: Pipeline, n: int) -> bool:
    return pipe.stats.state_writes_deferred >= n

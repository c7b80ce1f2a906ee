"""FEC and DOM samples round-trip through their tables (migration 021, store/fec.py, store/dom.py),
and retention covers both."""

from __future__ import annotations

from datetime import UTC, datetime

import asyncpg

from store.config import RetentionConfig
from store.dom import DomSample, write_dom
from store.fec import FecSample, write_fec
from store.records import from_int8
from store.retention import drop_expired_chunks, hypertables

AT = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)


async def test_fec_and_dom_samples_round_trip(pool: asyncpg.Pool) -> None:
    big = 2**64 - 5  # a uint64 counter past 2^63 keeps its bits
    bins = tuple(range(16))
    async with pool.acquire() as conn:
        assert await write_fec(conn, [FecSample(AT, "lf1", "swp1", big, 3, 40, 1.5e-9, 0.0, bins)]) == 1
        assert await write_fec(conn, [FecSample(AT, "lf1", "swp2", corrected=5)]) == 1
        dom = DomSample(AT, "lf1", "swp1", "xcvr-1", -2.5, 1.0, 7.0, 41.0, -8.0, -10.0, 11.0, 13.0)
        assert await write_dom(conn, [dom, DomSample(AT, "lf1", "swp2", "xcvr-2", rx_power_dbm=-3.0)]) == 2
        row = await conn.fetchrow("SELECT * FROM port_fec WHERE port = 'swp1'")
        assert from_int8(row["corrected"]) == big and tuple(row["bins"]) == bins and row["pre_fec_ber"] == 1.5e-9
        assert await conn.fetchval("SELECT bins FROM port_fec WHERE port = 'swp2'") is None
        got = await conn.fetchrow("SELECT * FROM transceiver_dom WHERE port = 'swp1'")
        assert DomSample(*got.values()) == dom
        none = await conn.fetchrow("SELECT * FROM transceiver_dom WHERE port = 'swp2'")
        assert none["rx_low_warning_dbm"] is None  # the module reported no thresholds
        assert {"port_fec", "transceiver_dom"} <= {h.table for h in hypertables(RetentionConfig())}
        await write_fec(conn, [FecSample(datetime(2020, 1, 1, tzinfo=UTC), "lf1", "swp1", 1)])
        assert await drop_expired_chunks(conn, RetentionConfig()) >= 1
        assert await conn.fetchval("SELECT count(*) FROM port_fec WHERE time < '2021-01-01'") == 0

"""The collectors' pipeline on a real TimescaleDB: rates, events, unknown ports, LLDP, reachability."""

from __future__ import annotations

from pathlib import Path

from collector.pipeline import Pipeline
from collector.records import LldpNeighborReading, LldpReading, PortReading, TargetState
from fabric.model import FabricParams
from fabric.topology import build_aipod
from store.config import WriterConfig
from store.db import create_pool
from store.inventory import ensure_fabric
from store.migrate import migrate

S = 1_000_000_000
T0 = 1_790_000_000 * S
FABRIC = build_aipod(FabricParams(gpus=64, radix=16))


async def test_pipeline_end_to_end(migrated_db: str, tmp_path: Path) -> None:
    pool = await create_pool(migrated_db)
    try:
        async with pool.acquire() as conn:
            await migrate(conn)
            assert await ensure_fabric(conn, FABRIC) is not None
            assert await ensure_fabric(conn, FABRIC) is None  # the same design is not reloaded
        pipe = Pipeline(pool, FABRIC, WriterConfig(batch_rows=100, flush_interval_s=0.05), spool_dir=tmp_path)
        pipe.start()
        pipe.set_state("lf-g1-r1", TargetState.CONNECTING)
        pipe.set_state("lf-g1-r1", TargetState.CONNECTED)
        pipe.set_state("lf-g1-r1", TargetState.CONNECTED)  # no change, no row
        readings = []
        for i, up in enumerate([True, True, False, True]):
            t = T0 + i * 10 * S
            readings.append(
                PortReading(
                    "lf-g1-r1",
                    "swp9",
                    t,
                    oper_up=up,
                    speed_bps=400 * 10**9,
                    in_octets=i * 10**10,
                    out_octets=i * 10**10,
                    carrier_transitions=i,
                )
            )
            readings.append(PortReading("lf-g1-r1", "swp99", t, oper_up=True, in_octets=i))  # not in the inventory
        await pipe.put_ports(readings)
        await pipe.put_ports(readings[:2])  # a replay after reconnect: stored once
        await pipe.put_lldp([LldpReading("lf-g1-r1", "swp1", T0, (LldpNeighborReading("srv-g1-001", "nic1"),))])
        await pipe.put_lldp([LldpReading("lf-g1-r1", "swp1", T0 + S, (LldpNeighborReading("srv-g1-002", "nic1"),))])
        await pipe.close()

        rows = await pool.fetch("SELECT time, in_bps, oper_status FROM port_counters WHERE port='swp9' ORDER BY time")
        assert len(rows) == 4
        assert [r["oper_status"] for r in rows] == [1, 1, 2, 1]
        assert rows[1]["in_bps"] == 8e9
        events = await pool.fetch("SELECT old_status, new_status, down_s FROM link_events ORDER BY time")
        assert [(e["old_status"], e["new_status"], e["down_s"]) for e in events] == [
            ("up", "down", None),
            ("down", "up", 10.0),
        ]
        unknown = await pool.fetch("SELECT switch, port FROM ports WHERE NOT known")
        assert [(u["switch"], u["port"]) for u in unknown] == [("lf-g1-r1", "swp99")]
        assert await pool.fetchval("SELECT count(*) FROM port_counters WHERE port='swp99'") == 4
        lldp = await pool.fetch("SELECT system_name FROM lldp_neighbors WHERE switch='lf-g1-r1' AND port='swp1'")
        assert [r["system_name"] for r in lldp] == ["srv-g1-002"]  # latest table wins
        states = await pool.fetch("SELECT state, reachable FROM switch_reachability ORDER BY time")
        assert [(s["state"], s["reachable"]) for s in states] == [("connecting", False), ("connected", True)]
    finally:
        await pool.close()


async def test_known_ports_are_not_flagged(migrated_db: str) -> None:
    pool = await create_pool(migrated_db)
    try:
        async with pool.acquire() as conn:
            await migrate(conn)
            await ensure_fabric(conn, FABRIC)
        pipe = Pipeline(pool, FABRIC)
        pipe.start()
        await pipe.put_ports(
            [PortReading(s, p.name, T0, oper_up=True) for s in ("lf-g1-r1", "sp-r1-1") for p in FABRIC.ports(s)]
        )
        await pipe.close()
        assert await pool.fetchval("SELECT count(*) FROM ports WHERE NOT known") == 0
        assert pipe.stats.unknown_ports == 0
    finally:
        await pool.close()


async def test_status_on_another_stream_after_its_counter_is_one_flap_in_the_database(migrated_db: str) -> None:
    """SONiC-like: the counter stream counted a fast down/up before the status stream said so."""
    pool = await create_pool(migrated_db)
    try:
        async with pool.acquire() as conn:
            await migrate(conn)
            await ensure_fabric(conn, FABRIC)
        pipe = Pipeline(pool, FABRIC, WriterConfig(batch_rows=100, flush_interval_s=0.05))
        pipe.start()
        port = ("lf-g1-r1", "swp9")

        def counters(t_s: int, transitions: int) -> PortReading:
            return PortReading(*port, T0 + t_s * S, in_octets=t_s, carrier_transitions=transitions)

        await pipe.put_ports([PortReading(*port, T0 - S, oper_up=True)])  # the status stream's initial dump
        await pipe.put_ports([counters(0, 0), counters(10, 2)])
        await pipe.put_ports(
            [PortReading(*port, T0 + 2 * S, oper_up=False), PortReading(*port, T0 + 3 * S, oper_up=True)]
        )
        await pipe.put_ports([PortReading(*port, T0 + 15 * S, oper_up=True)])  # a status heartbeat: no row
        await pipe.close()
        events = await pool.fetch("SELECT new_status, flaps, source, down_s FROM link_events ORDER BY time")
        assert [tuple(e) for e in events] == [
            ("down", 0, "oper-status", None),
            ("up", 1, "oper-status", 1.0),
            ("flap", 1, "carrier-transitions", None),
        ]
        n = await pool.fetchval("SELECT sum(flaps) FROM link_events WHERE new_status IN ('down', 'flap')")
        assert n == 1
        times = await pool.fetch("SELECT time, oper_status, in_octets FROM port_counters ORDER BY time")
        # The first known status, two counter readings and the two changes; the heartbeat is no row.
        assert [(r["oper_status"], r["in_octets"]) for r in times] == [(1, None), (1, 0), (2, None), (1, None), (1, 10)]
    finally:
        await pool.close()

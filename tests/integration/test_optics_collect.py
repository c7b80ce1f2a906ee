"""Link health collected in production form: the simulator's gNMI server, ``fabricmon collect``, TimescaleDB.

A small fabric whose switches speak every NOS shape in turn (openconfig, eos, sonic, xr, cumulus);
one port of an OpenConfig switch and one of a SONiC switch get an ``optic_degrade`` fault. The in-process
CollectorService subscribes to each profile's ``optics`` paths (FEC at ``collector.fec_interval_s``,
DOM at ``collector.dom_interval_s``, both 1 s here; SONiC's FEC is cut from the COUNTERS hash its
counters' stream receives) and the rows land in ``transceiver_dom`` and
``port_fec`` through the pipeline's writers: rx power falls as the simulator says it does, on the
interface the device maps the transceiver to, and FEC counters (with SONiC's bins) grow. The
Cumulus switches are collected with the ``cumulus`` profile: their ``phy`` FEC leaves and FEC
histogram give the bins too.
"""

from __future__ import annotations

import asyncio
import itertools
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from config.model import Config
from fabric.model import FabricParams
from simulator.nos import Nos, parse_nos
from simulator.runner import SimOptions, start_sim, stop_sim
from simulator.sim_config import sim_config
from store.db import Pool, create_pool
from store.inventory import ensure_fabric
from store.migrate import migrate
from tests.support.collecting import running_collector

pytestmark = pytest.mark.asyncio(loop_scope="function")

PARAMS = FabricParams(gpus=32, radix=8)
DB_PER_HOUR = 1800.0  # 0.5 dB/s: ten times the DOM's wobble per sample at 1 s, failing after ~16 s
ROWS = 4


async def _dom(pool: Pool, switch: str, port: str) -> list[Any]:
    return list(
        await pool.fetch(
            "SELECT time, component, rx_power_dbm, rx_low_critical_dbm FROM transceiver_dom "
            "WHERE switch = $1 AND port = $2 ORDER BY time",
            switch,
            port,
        )
    )


async def _until(pool: Pool, places: list[tuple[str, str]], switches: int, within_s: float = 30.0) -> None:
    """Until the degrading ports have ROWS DOM rows and every switch has DOM and FEC rows."""
    everyone = (
        "SELECT (SELECT count(DISTINCT switch) FROM transceiver_dom), (SELECT count(DISTINCT switch) FROM port_fec)"
    )
    for _ in range(int(within_s / 0.25)):
        counts = [len(await _dom(pool, s, p)) for s, p in places]
        if min(counts) >= ROWS and min(await pool.fetchrow(everyone)) == switches:
            return
        await asyncio.sleep(0.25)
    raise AssertionError(f"DOM rows per degrading port within {within_s} s: {dict(zip(places, counts, strict=True))}")


def _ns(t: datetime) -> int:
    return round(t.timestamp() * 1e6) * 1000


async def test_optic_degrade_reaches_transceiver_dom_and_port_fec_from_openconfig_and_sonic(
    fresh_db: str, tmp_path: Path
) -> None:
    sim = await start_sim(
        SimOptions(params=PARAMS, gnmi="127.0.0.1:0", snmp=None, control=None, seed=5, nos=parse_nos("mixed"))
    )
    pool = await create_pool(fresh_db)
    try:
        assert sim.state is not None and sim.fabric is not None and sim.devices is not None
        state, fabric = sim.state, sim.fabric
        async with pool.acquire() as conn:
            await migrate(conn)
            await ensure_fabric(conn, fabric)
        addr = sim.addresses(SimOptions(gnmi="127.0.0.1:0", snmp=None, control=None))
        data: dict[str, Any] = sim_config(
            gnmi_address=addr["gnmi"],
            snmp_address=None,
            protocols="gnmi",
            params=PARAMS,
            gnmi_interval_s=1.0,
            nos=sim.devices.assignment(),
        )
        data["collector"]["dom_interval_s"] = 1.0
        data["collector"]["fec_interval_s"] = 1.0
        # Cumulus switches with the cumulus profile (5.15+ phy FEC leaves and FEC histogram)
        shapes = sim.devices.assignment()
        cumulus = [s for s, n in shapes.items() if n is Nos.CUMULUS]
        plain = next(t for t in data["targets"] if t["protocol"] == "gnmi" and "profile" not in t)
        data["targets"].insert(0, {**plain, "switches": cumulus, "profile": "cumulus"})
        data["database"] = {"writer": {"flush_interval_s": 0.2, "spool_dir": str(tmp_path / "spool")}}
        config = Config.model_validate(data)
        oc = next(s for s, n in shapes.items() if n is Nos.OPENCONFIG and s.startswith("lf-"))
        sonic = next(s for s, n in shapes.items() if n is Nos.SONIC and s.startswith("lf-"))
        places = [(oc, "swp1"), (sonic, "swp2")]
        for switch, port in places:
            state.apply({"kind": "optic_degrade", "switch": switch, "port": port, "db_per_hour": DB_PER_HOUR})
        async with running_collector(config, fabric, pool) as service:
            await _until(pool, places, len(shapes))
            invalid = dict(service.pipeline.stats.invalid)
        for switch, port in places:
            rows = await _dom(pool, switch, port)
            optic = state.optics.of(switch, port)
            # the interface the device names, with its own transceiver and thresholds
            assert {r["component"] for r in rows} == {optic.component if switch == oc else port}
            assert rows[0]["rx_low_critical_dbm"] == -10.0
            rx = [r["rx_power_dbm"] for r in rows]
            assert all(b < a for a, b in itertools.pairwise(rx)), rx  # falling, sample after sample
            for r in rows:  # what the simulated module read at that instant (SONiC rounds to 4 places)
                truth = optic.read(_ns(r["time"]), None).rx_power_dbm
                assert r["rx_power_dbm"] == pytest.approx(truth, abs=0.002)
            fec = await pool.fetch(
                "SELECT corrected, symbol_errors, bins FROM port_fec WHERE switch = $1 AND port = $2 ORDER BY time",
                switch,
                port,
            )
            assert len(fec) >= ROWS
            assert fec[-1]["corrected"] > fec[0]["corrected"] > 0
            if switch == sonic:  # cut from the COUNTERS hash the counters' stream receives (no FEC subscription)
                assert all(len(r["bins"]) == 16 for r in fec)  # SONiC's histogram, S0..S15
                for r in await pool.fetch(
                    "SELECT time, bins, corrected FROM port_fec WHERE switch = $1 AND port = $2", switch, port
                ):
                    read = optic.read(_ns(r["time"]), None)
                    assert (list(r["bins"][1:]), r["corrected"]) == (list(read.fec_bins[1:]), read.fec_corrected)
                    assert abs(r["bins"][0] - read.fec_bins[0]) < 1000  # clean codewords: the time is kept to 1 µs
            else:
                assert all(r["bins"] is None for r in fec)  # OpenConfig has none
        # every switch of every shape delivered DOM and FEC for its cabled ports, nothing skipped as invalid
        for table in ("transceiver_dom", "port_fec"):
            got = dict(await pool.fetch(f"SELECT switch, count(DISTINCT port) FROM {table} GROUP BY switch"))
            cabled = {s: sum(p.peer is not None for p in fabric.ports(s)) for s in shapes}
            assert got == cabled, table
        # Cumulus: its histogram reaches port_fec (S0..S15), corrected codewords taken from it
        bins = await pool.fetch("SELECT bins, corrected FROM port_fec WHERE switch = ANY($1::text[])", cumulus)
        assert bins and all(len(r["bins"]) == 16 and r["corrected"] == sum(r["bins"][1:]) for r in bins)
        assert invalid == {}
    finally:
        await pool.close()
        await stop_sim(sim)

"""The sent-ledger against a real collector and TimescaleDB: what the simulator sent is what is stored.

Also checks the instrument itself on that data: rows deleted are reported missing, a row never
sent is extra, a state row is not, and the verdict names the ports at fault briefly.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from config.model import Config
from fabric.model import FabricParams
from simulator.runner import SimOptions, start_sim, stop_sim
from simulator.sim_config import sim_config
from store.db import create_pool
from store.inventory import ensure_fabric
from store.migrate import migrate
from tests.support.collecting import running_collector
from tests.support.configs import config
from tests.support.ledger import assert_complete, compare, settle, stored_time
from tests.support.waiting import until

pytestmark = pytest.mark.asyncio(loop_scope="function")

PARAMS = FabricParams(gpus=64, radix=16)  # 20 switches, 320 ports
INTERVAL_S = 1.0


def _config(gnmi: str, spool: Path) -> Config:
    data: dict[str, Any] = sim_config(
        gnmi_address=gnmi, snmp_address=None, protocols="gnmi", params=PARAMS, gnmi_interval_s=INTERVAL_S
    )
    return config(data, spool=spool)


def _sent_four(samples: dict[Any, list[int]]) -> bool:
    """A dump and at least three samples of each of the 320 ports sent (4.5 s at 1 s; later under load:
    a fixed 4.5 s wait once saw a port with three)."""
    return len(samples) == 320 and _fewest(samples) >= 4


def _fewest(samples: dict[Any, list[int]]) -> int:
    return min(map(len, samples.values()), default=0)


async def test_port_counters_hold_exactly_what_the_simulator_sent(migrated_db: str, tmp_path: Path) -> None:
    sim = await start_sim(SimOptions(params=PARAMS, gnmi="127.0.0.1:0", snmp=None, control=None, seed=7, ledger=True))
    pool = await create_pool(migrated_db)
    try:
        assert sim.fabric is not None and sim.ledger is not None
        async with pool.acquire() as conn:
            await migrate(conn)
            await ensure_fabric(conn, sim.fabric)
        gnmi = sim.addresses(SimOptions(gnmi="127.0.0.1:0", snmp=None, control=None))["gnmi"]
        assert gnmi is not None
        async with running_collector(_config(gnmi, tmp_path / "spool"), sim.fabric, pool):
            ledger = sim.ledger
            await until(lambda: _sent_four(ledger.samples()), 30, lambda: f"{_fewest(ledger.samples())} samples")
            snap = ledger.freeze()
            report = await settle(pool, snap, interval_s=INTERVAL_S, timeout_s=20)
        # Every switch and port sent, a dump and a sample a second; all stored, once, no gap.
        assert snap.switches() == set(sim.fabric.switches)
        assert len(snap.samples) == 320 and all(len(t) >= 4 for t in snap.samples.values())
        assert_complete(report)
        assert report.stored == report.sent == snap.total and report.collisions == 0
        assert all(0.5 < p.longest_gap_s < 2.5 for p in report.ports.values())  # 2.5 intervals, as assert_complete

        # The instrument: a deleted row is missing, a row never sent is extra, a state row is neither.
        (sw, port), times = next(iter(sorted(snap.samples.items())))
        lost = stored_time(times[1])
        await pool.execute("DELETE FROM port_counters WHERE switch = $1 AND port = $2 AND time = $3", sw, port, lost)
        await pool.execute(
            "INSERT INTO port_counters (time, switch, port, in_octets) VALUES ($1, $2, $3, 1), ($4, $2, $3, NULL)",
            lost + timedelta(microseconds=3),
            sw,
            port,
            lost + timedelta(microseconds=5),
        )
        broken = await compare(pool, snap, interval_s=INTERVAL_S)
        assert (broken.missing, broken.extra, broken.state_rows) == (1, 1, 1)
        assert broken.ports[(sw, port)].missing == (lost,)
        with pytest.raises(AssertionError) as failed:
            assert_complete(broken)
        message = str(failed.value)
        assert message.startswith("1 samples missing, 0 counted as dropped; 1 stored samples were never sent")
        assert f"{sw} {port}: sent {len(times)}, stored {len(times)}, missing 1" in message
        assert len(message.splitlines()) <= 4
        # A miss the collector counted as dropped is no loss (and that port's gap is no failure).
        await pool.execute("DELETE FROM port_counters WHERE switch = $1 AND port = $2 AND in_octets = 1", sw, port)
        assert_complete(await compare(pool, snap, interval_s=INTERVAL_S), dropped=1)
    finally:
        await pool.close()
        await stop_sim(sim)

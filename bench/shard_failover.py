"""The failover gap of ``collector.shard: auto`` (goal: a killed collector's switches write again
within ``lease_ttl_s`` plus one interval).

``fabricmon sim --gpus 512`` in a process of its own, two ``fabricmon collect`` processes with
``shards: 1``: one holds the shard, the other stands by. The holder is killed with SIGKILL; the
gap is, per switch, from the kill to its first ``port_counters`` sample after it, and the whole
figure is the slowest switch's. Run at the defaults (``lease_ttl_s`` 15, gNMI every 10 s, SNMP
every 60 s: the SNMP switches' first poll after the takeover is immediate) and at a short TTL.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import asyncpg
import yaml

from bench.simproc import simulator
from simulator.sim_config import sim_config

RUNS = ((15.0, 10.0), (3.0, 1.0))  # (lease_ttl_s, gnmi_interval_s)


async def run(dsn: str) -> dict[str, Any]:
    out: dict[str, Any] = {"goal": "every switch writing again within lease_ttl_s + one interval (its protocol's)"}
    sim = ("--gpus", "512", "--gnmi", "127.0.0.1:0", "--snmp", "127.0.0.1:0", "--control", "")
    async with simulator(*sim, "--plaintext") as (  # the failover, not TLS: sim_config's plaintext targets
        _,
        ready,
    ):
        for ttl, interval in RUNS:
            out[f"ttl_{ttl:g}s_gnmi_{interval:g}s"] = await _one(dsn, ready, ttl, interval)
    return out


async def _one(dsn: str, ready: dict[str, Any], ttl: float, interval: float) -> dict[str, Any]:
    conn = await asyncpg.connect(dsn)
    try:  # the previous run's leases (released) and members (left): a clean slate
        await conn.execute("DELETE FROM collector_shards; DELETE FROM collector_members")
    except asyncpg.UndefinedTableError:
        pass  # not migrated yet: the first collector does it
    finally:
        await conn.close()
    config = sim_config(
        gnmi_address=ready["gnmi"], snmp_address=ready["snmp"], gnmi_interval_s=interval, snmp_interval_s=6 * interval
    )
    config["collector"].update({"shard": "auto", "shards": 1, "lease_ttl_s": ttl})
    with tempfile.TemporaryDirectory(prefix="fabricmon-failover-") as d:
        procs = []
        for name in ("first", "standby"):
            config["database"] = {"dsn": dsn, "writer": {"spool_dir": str(Path(d) / name)}}
            path = Path(d) / f"{name}.yaml"
            path.write_text(yaml.safe_dump(config))
            procs.append(
                subprocess.Popen(  # noqa: ASYNC220 - signalled by pid, waited for at the end
                    [sys.executable, "-m", "cli.main", "collect", "--config", str(path)],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
            )
            await asyncio.sleep(3.0 if name == "first" else 0.0)  # the first one holds the shard
        try:
            conn = await asyncpg.connect(dsn)
            try:
                holder = await _wait(conn, "SELECT holder FROM collector_shards WHERE holder IS NOT NULL", 60)
                switches = int(ready["switches"])
                await _wait(
                    conn,
                    f"SELECT count(DISTINCT switch) = {switches} FROM port_counters WHERE time > now() - interval "
                    f"'{2 * 6 * interval} seconds'",
                    120,
                )
                pid = int(str(holder).rpartition(":")[2].partition("#")[0])
                victim = next(p for p in procs if p.pid == pid)
                victim.send_signal(signal.SIGKILL)
                killed = await conn.fetchval("SELECT now()")
                t0 = time.monotonic()
                await _wait(
                    conn,
                    f"SELECT count(DISTINCT switch) = {switches} FROM port_counters WHERE time > $1",
                    ttl + 8 * interval + 30,
                    killed,
                )
                rows = await conn.fetch(
                    "SELECT switch, extract(epoch FROM min(time) - $1) AS gap FROM port_counters "
                    "WHERE time > $1 GROUP BY switch",
                    killed,
                )
                gaps = {r["switch"]: float(r["gap"]) for r in rows}
                leaves = [g for s, g in gaps.items() if s.startswith("lf-")]
                others = [g for s, g in gaps.items() if not s.startswith("lf-")]
                return {
                    "lease_ttl_s": ttl,
                    "gnmi_interval_s": interval,
                    "snmp_interval_s": 6 * interval,
                    "gap_s_slowest_switch": round(max(gaps.values()), 2),
                    "gap_s_gnmi_slowest": round(max(leaves), 2),
                    "gap_s_snmp_slowest": round(max(others), 2),
                    "bound_s_gnmi": ttl + interval,
                    "bound_s_snmp": ttl + 6 * interval,
                    "waited_s": round(time.monotonic() - t0, 1),
                }
            finally:
                await conn.close()
        finally:
            for p in procs:
                if p.poll() is None:
                    p.send_signal(signal.SIGTERM)
            for p in procs:
                try:
                    p.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    os.kill(p.pid, signal.SIGKILL)
                    p.wait()


async def _wait(conn: asyncpg.Connection, sql: str, within_s: float, *args: Any) -> Any:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            value = await conn.fetchval(sql, *args)
        except asyncpg.UndefinedTableError:
            value = None
        if value:
            return value
        await asyncio.sleep(0.2)
    raise RuntimeError(f"not within {within_s} s: {sql}")

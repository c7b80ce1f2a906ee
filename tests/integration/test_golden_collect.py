"""Recorded real-device telemetry served over real gRPC into ``fabricmon collect`` and TimescaleDB.

A :class:`~tests.support.capture_server.CaptureTarget` on loopback answers each switch's
Subscribe with its capture (../shared/fixtures/gnmi, moved to the present by
:func:`~tests.support.captures.restamp`); the real collector service, with each switch's NOS
profile, stores what it decodes. The inventory (version 2) names the captures' ports as those
devices do (``Ethernet35``, ``FourHundredGigE0/2/0/3``, ``Eth-Trunk5.1234``...), so they are
stored as known ports; with an inventory that does not name them they are stored as unknown
ports (``ports.known`` false), and still stored.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from collector.profile_load import load_profile
from collector.records import COUNTER_FIELDS
from collector.runner import CollectorService, plan
from config.model import Config
from fabric.inventory import load_inventory
from fabric.model import Fabric
from store.db import Pool, create_pool
from store.inventory import ensure_fabric
from store.migrate import migrate
from store.records import from_int8
from tests.support.capture_server import CaptureTarget
from tests.support.captures import restamp, serialized, sonic_file, sonic_response, telegraf_case, xr_sim_shape

pytestmark = pytest.mark.asyncio(loop_scope="function")

COUNTERS = COUNTER_FIELDS
THIRTEEN = COUNTERS[:13]  # the interface counters every interface capture here carries
#: The capture server speaks plaintext: a target says so twice (SPEC §10.6).
PLAINTEXT_TARGET: dict[str, Any] = {"tls": {"enabled": False}, "insecure": True}


def _fabric(switches: Sequence[str], ports: Mapping[str, Sequence[str]]) -> Fabric:
    """A version 2 inventory of ``switches``, each listing the ``ports`` it has (none cabled)."""
    lines = ["version: 2", "fabric: {name: captures, rails: 1}", "switches:"]
    for name in switches:
        listed = ", ".join(f'"{p}"' for p in ports.get(name, ()))
        lines.append(f"- {{name: {name}, role: leaf, speed_gbps: 400{f', ports: [{listed}]' if listed else ''}}}")
    return load_inventory(io.StringIO("\n".join(lines) + "\n"))


def _config(address: str, profiles: Mapping[str, str], spool: Path) -> Config:
    return Config.model_validate(
        {
            "targets": [
                {"switches": [sw], "protocol": "gnmi", "address": address, "profile": profile, **PLAINTEXT_TARGET}
                for sw, profile in profiles.items()
            ],
            # a long interval: the replay sends once, and must not go stale and be resubscribed
            "collector": {"gnmi_interval_s": 60.0, "pfc_heartbeat_s": 0},
            "database": {"writer": {"flush_interval_s": 0.2, "spool_dir": str(spool)}},
        }
    )


@dataclass
class Rig:
    pool: Pool
    service: CollectorService
    server: CaptureTarget
    task: asyncio.Task[None]
    stop: asyncio.Event

    async def drained(self) -> None:
        """Stop collecting: the service cancels the streams and flushes everything to the database."""
        self.stop.set()
        await asyncio.wait_for(asyncio.shield(self.task), 15)


@contextlib.asynccontextmanager
async def collecting(
    dsn: str,
    tmp_path: Path,
    recordings: Mapping[str, Sequence[bytes]],
    profiles: Mapping[str, str],
    ports: Mapping[str, Sequence[str]] | None = None,
) -> AsyncIterator[Rig]:
    fabric = _fabric(list(profiles), ports or {})
    server = CaptureTarget(recordings)
    await server.start()
    pool = await create_pool(dsn)
    try:
        async with pool.acquire() as conn:
            await migrate(conn)
            await ensure_fabric(conn, fabric)
        config = _config(server.address, profiles, tmp_path / "spool")
        service = CollectorService(config, fabric, pool, plan(config, fabric))
        stop = asyncio.Event()
        task = asyncio.create_task(service.run(stop))
        rig = Rig(pool, service, server, task, stop)
        try:
            yield rig
        finally:
            await rig.drained()
    finally:
        await pool.close()
        await server.stop()


async def until(pool: Pool, sql: str, within_s: float = 10.0) -> None:
    deadline = time.monotonic() + within_s
    while not await pool.fetchval(sql):
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {within_s} s: {sql}")
        await asyncio.sleep(0.1)


def _ns(when: datetime) -> int:
    return round(when.timestamp() * 1e6) * 1000


def _stamps(responses: Sequence[Any]) -> list[int]:
    return [r.update.timestamp for r in responses if r.HasField("update")]


async def _rows(pool: Pool, switch: str) -> dict[str, list[dict[str, Any]]]:
    rows = await pool.fetch(
        f"SELECT port, time, oper_status, speed_bps, {', '.join(COUNTERS)} FROM port_counters "
        "WHERE switch = $1 ORDER BY port, time",
        switch,
    )
    out: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        values = {c: from_int8(row[c]) if row[c] is not None else None for c in COUNTERS}
        out.setdefault(row["port"], []).append(
            {"time_ns": _ns(row["time"]), "oper_status": row["oper_status"], "speed_bps": row["speed_bps"], **values}
        )
    return out


def _counters(**set_: int) -> dict[str, int | None]:
    return {c: set_.get(c) for c in COUNTERS}


PROFILES = {
    "eos1": "eos",  # issue_14530: OpenConfig counters, prefix key, relative leaves
    "xr1": "xr",  # issue_14044 in the XR simulator's fuller containers
    "jn1": "junos",  # tagging_subinterfaces: logical units only
    "srl1": "srlinux",  # issue_12931: SR Linux native paths, values on containers
    "xe1": "iosxe",  # issue_14833: IOS XE native statistics (discontinuity-time only)
    "hw1": "huawei",  # issue_17412: a delete, then oper-status "down"
}


#: The ports the captures report, named as those devices name them.
CAPTURED_PORTS = {
    "eos1": ("Ethernet35",),
    "hw1": ("Eth-Trunk5.1234",),
    "xe1": ("AppGigabitEthernet1/0/1", "FortyGigabitEthernet1/1/1"),
    "xr1": ("FourHundredGigE0/2/0/3",),
}


@pytest.mark.parametrize("named", [True, False], ids=["inventory-names-the-ports", "unknown-ports"])
async def test_interface_captures_through_grpc_into_timescaledb(fresh_db: str, tmp_path: Path, named: bool) -> None:
    now = time.time_ns() // 1000 * 1000 - 10**9  # whole µs: timestamptz keeps µs
    cases = {
        "eos1": telegraf_case("issue_14530"),
        "xr1": xr_sim_shape(),
        "jn1": telegraf_case("tagging_subinterfaces"),
        "srl1": telegraf_case("issue_12931"),
        "xe1": telegraf_case("issue_14833"),
        "hw1": telegraf_case("issue_17412"),
    }
    replays = {sw: restamp(responses, now) for sw, responses in cases.items()}
    recordings = {sw: serialized(r) for sw, r in replays.items()}
    async with collecting(fresh_db, tmp_path, recordings, PROFILES, CAPTURED_PORTS if named else None) as rig:
        pool = rig.pool
        if not named:
            await until(pool, "SELECT count(*) = 5 FROM ports WHERE NOT known")
        await until(pool, "SELECT count(DISTINCT switch) FILTER (WHERE in_octets IS NOT NULL) = 2 FROM port_counters")
        await until(pool, "SELECT count(*) = 8 FROM pfc_counters")
        await asyncio.sleep(0.5)  # anything more would have come by now
        await rig.drained()
        await _check_interface_captures(rig, replays, named)


async def _check_interface_captures(rig: Rig, replays: dict[str, Any], named: bool) -> None:
    pool, server, stats = rig.pool, rig.server, rig.service.collectors["gnmi"].stats
    # every switch subscribed once with its profile's request, and once more for its link-health
    # paths where its profile has them (collector/gnmi_optics.py: a stream of their own)
    optics = [sw for sw, name in PROFILES.items() if load_profile(name).optics_subscriptions]
    assert sorted(r.subscribe.prefix.target for r in server.requests) == sorted([*PROFILES, *optics])
    xr_request = next(r for r in server.requests if r.subscribe.prefix.target == "xr1"
                      and any(s.path.origin == "openconfig-qos" for s in r.subscribe.subscription))  # fmt: skip
    assert {s.path.origin for s in xr_request.subscribe.subscription} == {
        "openconfig-interfaces",
        "openconfig-qos",
        "openconfig-lldp",
    }

    # EOS-shaped counters: thirteen zeros, the rest never reported (NULL, not 0)
    (eos_ts,) = _stamps(replays["eos1"])
    assert await _rows(pool, "eos1") == {
        "Ethernet35": [
            {"time_ns": eos_ts, "oper_status": None, "speed_bps": None, **_counters(**dict.fromkeys(THIRTEEN, 0))}
        ]
    }
    # XR: json_ietf containers, uint64 strings (2^64-1 survives the signed int8 column), PFC
    (xr_ts,) = _stamps(replays["xr1"])
    xr_counters = _counters(in_octets=(1 << 64) - 1, out_octets=12, carrier_transitions=2, in_pause_frames=4)
    assert await _rows(pool, "xr1") == {
        "FourHundredGigE0/2/0/3": [{"time_ns": xr_ts, "oper_status": 1, "speed_bps": 400 * 10**9, **xr_counters}]
    }
    pfc = await pool.fetch("SELECT priority, rx_pause, tx_pause FROM pfc_counters WHERE switch = 'xr1' ORDER BY 1")
    assert [(r["priority"], r["rx_pause"], r["tx_pause"]) for r in pfc] == [(p, p, 0) for p in range(8)]

    # Status-only and reset-evidence-only readings (IOS XE's discontinuity-time, Huawei's delete
    # and "down") carry no counters: they reached the pipeline (their ports are registered), a
    # first known state is a row without counters, and nothing was invented. Juniper's logical
    # units and SR Linux's container values are no readings.
    reported = [
        ("eos1", "Ethernet35"),
        ("hw1", "Eth-Trunk5.1234"),
        ("xe1", "AppGigabitEthernet1/0/1"),
        ("xe1", "FortyGigabitEthernet1/1/1"),
        ("xr1", "FourHundredGigE0/2/0/3"),
    ]
    unknown = await pool.fetch("SELECT switch, port FROM ports WHERE NOT known ORDER BY 1, 2")
    known = await pool.fetch("SELECT switch, port FROM ports WHERE known ORDER BY 1, 2")
    if named:  # every reported port is one the inventory names: stored as known, nothing flagged
        assert [(r["switch"], r["port"]) for r in unknown] == []
        assert [(r["switch"], r["port"]) for r in known] == reported
    else:
        assert [(r["switch"], r["port"]) for r in unknown] == reported
    for sw in ("hw1", "xe1", "jn1", "srl1"):
        rows = await _rows(pool, sw)
        assert all(row[c] is None for series in rows.values() for row in series for c in COUNTERS), sw
    assert rig.service.pipeline.stats.invalid == {"unknown_path": 5}  # SR Linux: scalars on 5 containers
    # ignored: eos1 in-pkts/out-pkts 2, xr1 description/type/in-pkts 3, jn1 six unit leaves,
    # hw1 the empty Update beside its delete
    assert stats.ignored == 2 + 3 + 6 + 1
    # values stored: eos1 13; xr1 state 4 (oper-status, 3 counters) + ethernet 2 + PFC 16;
    # xe1 two discontinuity-times; hw1 one "down"
    assert stats.values == 13 + (4 + 2 + 16) + 2 + 1


async def test_sonic_counters_db_and_appl_db_streams_into_timescaledb(fresh_db: str, tmp_path: Path) -> None:
    now = time.time_ns() // 1000 * 1000 - 10**9
    counters = restamp(
        [
            sonic_response(
                "COUNTERS_DB", "COUNTERS/Ethernet*", 0, json_ietf=sonic_file("COUNTERS__Ethernet_wildcard_expected.txt")
            )
        ],
        now,
    )
    lldp = restamp(
        [sonic_response("APPL_DB", "LLDP_ENTRY_TABLE", 0, json_ietf=sonic_file("LLDP_ENTRY_TABLE_UPDATE.txt"))], now
    )
    recordings = {"COUNTERS_DB": serialized(counters), "APPL_DB": serialized(lldp)}
    ports = {"sonic1": ("Ethernet1", "Ethernet68", "eth0")}
    async with collecting(fresh_db, tmp_path, recordings, {"sonic1": "sonic"}, ports) as rig:
        pool = rig.pool
        await until(pool, "SELECT count(*) = 2 FROM port_counters")
        await until(pool, "SELECT count(*) = 16 FROM pfc_counters")
        await until(pool, "SELECT count(*) = 1 FROM lldp_neighbors")
        await asyncio.sleep(0.5)
        await rig.drained()
        await _check_sonic(rig, now)


async def _check_sonic(rig: Rig, now: int) -> None:
    pool, server, stats = rig.pool, rig.server, rig.service.collectors["gnmi"].stats
    # the counters: two Subscribe streams, one per database (the prefix target); link health:
    # xcvrd's two DOM tables in STATE_DB on streams of their own. FEC is kept from the counters'
    # COUNTERS hashes (no second COUNTERS_DB stream); this capture's hashes have no FEC fields,
    # so no FEC row is made up.
    targets = sorted(r.subscribe.prefix.target for r in server.requests)
    assert targets == ["APPL_DB", "COUNTERS_DB", "STATE_DB", "STATE_DB"], targets
    assert not await pool.fetchval("SELECT count(*) FROM port_fec")
    zeros = {"time_ns": now, "oper_status": None, "speed_bps": None, **_counters(**dict.fromkeys(THIRTEEN, 0))}
    assert await _rows(pool, "sonic1") == {"Ethernet1": [zeros], "Ethernet68": [zeros]}
    pfc = await pool.fetch(
        "SELECT port, priority, rx_pause, tx_pause FROM pfc_counters WHERE switch = 'sonic1' ORDER BY 1, 2"
    )
    want = {"Ethernet1": 1, "Ethernet68": 2}  # SAI_PORT_STAT_PFC_7_RX_PKTS; every other priority 0
    assert [(r["port"], r["priority"], r["rx_pause"], r["tx_pause"]) for r in pfc] == [
        (port, p, want[port] if p == 7 else 0, 0) for port in ("Ethernet1", "Ethernet68") for p in range(8)
    ]
    nb = await pool.fetchrow("SELECT port, system_name, port_id FROM lldp_neighbors WHERE switch = 'sonic1'")
    assert tuple(nb) == ("eth0", "dummy", "dummy")
    # the inventory names SONiC's ports as SONiC does: Ethernet68 is a known port, nothing is flagged
    assert not await pool.fetchval("SELECT count(*) FROM ports WHERE NOT known")
    assert await pool.fetchval("SELECT count(*) FROM ports WHERE switch = 'sonic1' AND port = 'Ethernet68' AND known")
    assert not rig.service.pipeline.stats.invalid and stats.ignored == 2 * 77  # 106 SAI stats a port, 29 wanted

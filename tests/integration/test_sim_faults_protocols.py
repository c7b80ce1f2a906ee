"""Every fault kind, seen the way a collector sees it: over gNMI and over SNMP, on both link ends.

One simulated fabric (64 GPUs, radix 16) serves both protocols on loopback. Each test applies one
fault through the control endpoint, reads both ends of the link with a gNMI Get and with
net-snmp's ``snmpget``, clears the fault, and reads again. The matrix runs once per NOS shape
(every switch speaking it): :meth:`Sim.get` reads an OpenConfig leaf whatever the wire form
(XR's JSON containers are flattened; SONiC is asked for the DB field that carries it).
"""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import aiohttp
import grpc
import pytest
from pygnmi.create_gnmi_path import gnmi_path_generator
from pygnmi.spec.v080 import gnmi_pb2, gnmi_pb2_grpc

from fabric.model import FabricParams
from simulator.nos import Nos, parse_nos
from simulator.runner import RunningSim, SimOptions, start_sim, stop_sim

LEAF, UPLINK = "lf-g1-r1", "swp9"  # the leaf's first uplink ...
SPINE, SPINE_PORT = "sp-r1-1", "swp1"  # ... and its peer
IF = "1.3.6.1.2.1.2.2.1"
IFX = "1.3.6.1.2.1.31.1.1.1"
CPFC_PRIO = "1.3.6.1.4.1.9.9.813.1.2.1"
LLDP_REM_SYSNAME = "1.0.8802.1.1.2.1.4.1.1.9"

#: OpenConfig leaf below an interface → (SONiC DB, field, value as OpenConfig shows it).
_SONIC_LEAVES: dict[str, tuple[str, str, Callable[[str], str]]] = {
    "state/oper-status": ("APPL_DB", "PORT_TABLE/{port}/oper_status", str.upper),
    "ethernet/state/port-speed": ("APPL_DB", "PORT_TABLE/{port}/speed", lambda v: f"SPEED_{int(v) // 1000}GB"),
    "state/counters/in-fcs-errors": ("COUNTERS_DB", "COUNTERS/{port}/SAI_PORT_STAT_ETHER_STATS_CRC_ALIGN_ERRORS", str),
}
_SONIC_LLDP = {
    "lldp_rem_sys_name": "system-name",
    "lldp_rem_port_id": "port-id",
    "lldp_rem_port_desc": "port-description",
}
_ROOT = re.compile(r"^/(interfaces|lldp/interfaces)/interface\[name=([^\]]+)\](?:/(.*))?$")
_PFC = re.compile(r"^/qos/interfaces/interface\[interface-id=([^\]]+)\]/switch-priority\[priority=(\d)\]/.*/(in|out)-")


def _flatten(prefix: list[str], doc: Any, out: dict[str, str]) -> None:
    if isinstance(doc, dict):
        for k, v in doc.items():
            _flatten([*prefix, k], v, out)
    else:
        out["/".join(prefix)] = str(doc)


@dataclass
class Sim:
    running: RunningSim
    nos: Nos
    gnmi: str
    snmp: str
    control: str
    stub: gnmi_pb2_grpc.gNMIStub
    http: aiohttp.ClientSession

    async def get(self, switch: str, path: str) -> dict[str, str]:
        """Leaf path below the interface (names only) → value text, via gNMI Get in the switch's shape."""
        if self.nos is Nos.SONIC:
            return await self._sonic_get(switch, path)
        req = gnmi_pb2.GetRequest(
            prefix=gnmi_pb2.Path(target=switch), path=[gnmi_path_generator(path)], encoding=gnmi_pb2.Encoding.PROTO
        )
        resp = await self.stub.Get(req, timeout=5)
        out: dict[str, str] = {}
        for n in resp.notification:
            for u in n.update:
                names = [e.name for e in [*n.prefix.elem, *u.path.elem]]
                below = names[names.index("interface") + 1 :]  # the path below the interface
                which = u.val.WhichOneof("value")
                value = getattr(u.val, which)
                if which == "json_ietf_val" and isinstance(doc := json.loads(value), dict):
                    _flatten(below, doc, out)  # XR: a container
                else:
                    out["/".join(below)] = str(json.loads(value) if which == "json_ietf_val" else value)
        return out

    async def _sonic_get(self, switch: str, path: str) -> dict[str, str]:
        """The same leaf from SONiC's DB tables (target COUNTERS_DB/APPL_DB, switch in ``username``)."""
        pfc = _PFC.match(path)
        if pfc is not None:
            port, prio, way = pfc.groups()
            field = f"SAI_PORT_STAT_PFC_{prio}_{'RX' if way == 'in' else 'TX'}_PKTS"
            return {path: (await self._db_get(switch, "COUNTERS_DB", f"COUNTERS/{port}/{field}"))[0]}
        found = _ROOT.match(path)
        assert found is not None, path
        family, port, leaf = found.groups()
        if family == "lldp/interfaces":
            doc = json.loads((await self._db_get(switch, "APPL_DB", f"LLDP_ENTRY_TABLE/{port}"))[0])
            return {f"neighbors/neighbor/state/{oc}": doc[db] for db, oc in _SONIC_LLDP.items()}
        if leaf not in _SONIC_LEAVES:
            pytest.skip(f"SONiC's tables have no {leaf} (COUNTERS_DB keeps no carrier-transition count)")
        db, field, shown = _SONIC_LEAVES[leaf]
        (value,) = await self._db_get(switch, db, field.format(port=port))
        return {leaf: shown(value)}

    async def _db_get(self, switch: str, db: str, path: str) -> list[str]:
        req = gnmi_pb2.GetRequest(
            prefix=gnmi_pb2.Path(target=db), path=[gnmi_path_generator(path)], encoding=gnmi_pb2.Encoding.JSON_IETF
        )
        resp = await self.stub.Get(req, timeout=5, metadata=(("username", switch),))
        vals = [u.val for n in resp.notification for u in n.update]
        return [v.string_val if v.WhichOneof("value") == "string_val" else v.json_ietf_val for v in vals]

    async def gnmi_leaf(self, switch: str, port: str, leaf: str) -> str:
        values = await self.get(switch, f"/interfaces/interface[name={port}]/{leaf}")
        return values[leaf]

    async def snmp_get(self, switch: str, oid: str) -> str:
        """One value via net-snmp's snmpget (run without blocking the loop that serves it)."""
        proc = await asyncio.create_subprocess_exec(
            "snmpget",
            "-v2c",
            "-c",
            switch,
            "-t",
            "1",
            "-r",
            "0",
            "-Oqv",
            self.snmp,
            oid,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        out, err = await asyncio.wait_for(proc.communicate(), 15)
        if proc.returncode != 0:
            raise TimeoutError(err.decode().strip())
        return out.decode().strip()

    async def apply(self, fault: dict[str, object]) -> dict[str, object]:
        async with self.http.post(f"{self.control}/faults", json=fault) as resp:
            assert resp.status == 201, await resp.text()
            body: dict[str, object] = await resp.json()
            return body

    async def clear(self, fault_id: object) -> None:
        async with self.http.delete(f"{self.control}/faults/{fault_id}") as resp:
            assert resp.status == 204


@pytest.fixture(params=[n.value for n in Nos])
async def sim(request: pytest.FixtureRequest) -> AsyncIterator[Sim]:
    nos = Nos(request.param)
    running = await start_sim(
        SimOptions(
            params=FabricParams(gpus=64, radix=16),
            gnmi="127.0.0.1:0",
            snmp="127.0.0.1:0",
            control="127.0.0.1:0",
            nos=parse_nos(nos.value),
        )
    )
    addr = running.addresses(SimOptions(gnmi="127.0.0.1:0", snmp="127.0.0.1:0", control="127.0.0.1:0"))
    channel = grpc.aio.insecure_channel(str(addr["gnmi"]))
    http = aiohttp.ClientSession()
    try:
        yield Sim(
            running,
            nos,
            str(addr["gnmi"]),
            str(addr["snmp"]),
            f"http://{addr['control']}",
            gnmi_pb2_grpc.gNMIStub(channel),
            http,
        )
    finally:
        await http.close()
        await channel.close()
        await stop_sim(running)


async def test_link_down_both_ends(sim: Sim) -> None:
    fault = await sim.apply({"kind": "link_down", "switch": LEAF})
    assert fault["port"] == UPLINK
    assert await sim.gnmi_leaf(LEAF, UPLINK, "state/oper-status") == "DOWN"
    assert await sim.gnmi_leaf(SPINE, SPINE_PORT, "state/oper-status") == "DOWN"
    assert await sim.snmp_get(SPINE, f"{IF}.8.1") == "2"
    # The load moves to the leaf's other uplinks.
    before = int(await sim.snmp_get(SPINE, f"{IFX}.6.2"))
    await asyncio.sleep(1.2)
    assert int(await sim.snmp_get(SPINE, f"{IFX}.6.2")) > before
    await sim.clear(fault["id"])
    assert await sim.gnmi_leaf(LEAF, UPLINK, "state/oper-status") == "UP"
    assert await sim.snmp_get(SPINE, f"{IF}.8.1") == "1"


async def test_speed_degrade_both_ends(sim: Sim) -> None:
    fault = await sim.apply({"kind": "speed_degrade", "switch": LEAF, "speed_gbps": 200})
    assert (await sim.gnmi_leaf(LEAF, UPLINK, "ethernet/state/port-speed")).endswith("SPEED_200GB")
    assert await sim.snmp_get(SPINE, f"{IFX}.15.1") == "200000"
    await sim.clear(fault["id"])
    assert (await sim.gnmi_leaf(LEAF, UPLINK, "ethernet/state/port-speed")).endswith("SPEED_400GB")
    assert await sim.snmp_get(SPINE, f"{IFX}.15.1") == "400000"


async def _pfc(sim: Sim, switch: str, port: str, direction: str, priority: int = 3) -> int:
    path = f"/qos/interfaces/interface[interface-id={port}]/switch-priority[priority={priority}]/state/counters"
    values = await sim.get(switch, f"{path}/{direction}-pause-pkts")
    return int(next(iter(values.values())))


async def test_pfc_storm_sent_by_one_end_received_by_the_other(sim: Sim) -> None:
    fault = await sim.apply({"kind": "pfc_storm", "switch": LEAF, "priority": 3, "rate_pps": 10000})
    tx0 = await _pfc(sim, LEAF, UPLINK, "out")
    rx0 = int(await sim.snmp_get(SPINE, f"{CPFC_PRIO}.3.1.3"))  # cpfcIfPriorityIndications.ifIndex.priority
    await asyncio.sleep(1.0)
    tx1 = await _pfc(sim, LEAF, UPLINK, "out")
    rx1 = int(await sim.snmp_get(SPINE, f"{CPFC_PRIO}.3.1.3"))
    assert tx1 - tx0 > 5000 and rx1 - rx0 > 5000
    # The pause tree: the spine pauses its other ports (toward the sources) too.
    assert int(await sim.snmp_get(SPINE, f"{CPFC_PRIO}.2.2.3")) > 0
    await sim.clear(fault["id"])
    tx2 = await _pfc(sim, LEAF, UPLINK, "out")
    await asyncio.sleep(0.6)
    assert await _pfc(sim, LEAF, UPLINK, "out") == tx2


async def test_error_burst_on_the_receive_side(sim: Sim) -> None:
    fault = await sim.apply({"kind": "error_burst", "switch": LEAF, "rate_pps": 1000})
    fcs0 = int(await sim.gnmi_leaf(LEAF, UPLINK, "state/counters/in-fcs-errors"))
    await asyncio.sleep(1.0)
    assert int(await sim.gnmi_leaf(LEAF, UPLINK, "state/counters/in-fcs-errors")) - fcs0 > 500
    assert int(await sim.snmp_get(LEAF, "1.3.6.1.2.1.10.7.2.1.3.9")) > 500  # dot3StatsFCSErrors
    assert int(await sim.gnmi_leaf(SPINE, SPINE_PORT, "state/counters/in-fcs-errors")) == 0
    await sim.clear(fault["id"])
    await asyncio.sleep(0.6)  # counters may be served from the agent's 0.5 s snapshot
    stopped = int(await sim.snmp_get(LEAF, "1.3.6.1.2.1.10.7.2.1.3.9"))
    await asyncio.sleep(0.7)
    assert int(await sim.snmp_get(LEAF, "1.3.6.1.2.1.10.7.2.1.3.9")) == stopped


async def test_link_flap_counts_transitions_on_both_ends(sim: Sim) -> None:
    c_leaf = int(await sim.gnmi_leaf(LEAF, UPLINK, "state/counters/carrier-transitions"))
    c_spine = int(await sim.gnmi_leaf(SPINE, SPINE_PORT, "state/counters/carrier-transitions"))
    fault = await sim.apply({"kind": "link_flap", "switch": LEAF, "period_s": 0.5})
    seen = set()
    for _ in range(8):
        seen.add(await sim.snmp_get(SPINE, f"{IF}.8.1"))
        await asyncio.sleep(0.15)
    assert seen == {"1", "2"}
    await sim.clear(fault["id"])
    leaf_n = int(await sim.gnmi_leaf(LEAF, UPLINK, "state/counters/carrier-transitions")) - c_leaf
    spine_n = int(await sim.gnmi_leaf(SPINE, SPINE_PORT, "state/counters/carrier-transitions")) - c_spine
    assert leaf_n >= 2 and leaf_n == spine_n
    assert await sim.gnmi_leaf(LEAF, UPLINK, "state/oper-status") == "UP"


async def test_miswire_shows_in_lldp(sim: Sim) -> None:
    fault = await sim.apply({"kind": "miswire", "server": "srv-g1-001", "gpu": 1, "to_leaf": "lf-g1-r2"})
    lldp = await sim.get("lf-g1-r2", "/lldp/interfaces/interface[name=swp1]/neighbors")
    assert lldp["neighbors/neighbor/state/system-name"] == "srv-g1-001"
    # a server's lldpd sends its NIC's MAC as the port id, the NIC's name as the port description
    assert _port_description(lldp) == "nic1"
    assert (await sim.snmp_get("lf-g1-r2", f"{LLDP_REM_SYSNAME}.0.1.1")).strip('"') == "srv-g1-001"
    await sim.clear(fault["id"])
    lldp = await sim.get("lf-g1-r2", "/lldp/interfaces/interface[name=swp1]/neighbors")
    assert _port_description(lldp) == "nic2"


def _port_description(lldp: dict[str, str]) -> str:
    return lldp["neighbors/neighbor/state/port-description"]


async def test_switch_unreachable_is_silent_on_both_protocols(sim: Sim) -> None:
    fault = await sim.apply({"kind": "switch_unreachable", "switch": SPINE})
    with pytest.raises(TimeoutError):
        await sim.snmp_get(SPINE, "1.3.6.1.2.1.1.3.0")
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await sim.get(SPINE, "/interfaces/interface[name=swp1]/state/oper-status")
    assert info.value.code() == grpc.StatusCode.UNAVAILABLE
    # Everyone else still answers.
    assert (await sim.snmp_get("sp-r2-1", "1.3.6.1.2.1.1.5.0")).strip('"') == "sp-r2-1"
    await sim.clear(fault["id"])
    assert (await sim.snmp_get(SPINE, "1.3.6.1.2.1.1.5.0")).strip('"') == SPINE


async def test_reboot_restarts_counters_and_uptime(sim: Sim) -> None:
    octets = int(await sim.snmp_get(SPINE, f"{IFX}.6.1"))
    await sim.apply({"kind": "reboot", "switch": SPINE, "boot_s": 1})
    assert await sim.gnmi_leaf(LEAF, UPLINK, "state/oper-status") == "DOWN"  # the peer sees the link drop
    await asyncio.sleep(1.5)
    ticks = await sim.snmp_get(SPINE, "1.3.6.1.2.1.1.3.0")
    assert ":" in ticks and ticks.startswith("0:0:00:")  # up for seconds, not days
    assert int(await sim.snmp_get(SPINE, f"{IFX}.6.1")) < octets
    assert await sim.gnmi_leaf(LEAF, UPLINK, "state/oper-status") == "UP"

"""The simulator's NOS shapes, device clocks, interface deletes and slow SNMP agents, on the wire.

Real gRPC and real UDP on loopback against the real FabricState; each response is decoded with
pygnmi's ``gnmi_pb2`` and its structure checked: per-container Notifications, PFC stamped later
and status heartbeats for EOS, string values in JSON tables for SONiC, ``json_ietf_val``
containers under an ``origin`` prefix for IOS XR, deletes of a removed interface, skewed and
jittered timestamps, ifOperStatus notPresent and late SNMP answers.

In a 64-GPU fabric with ``--nos mixed`` the leaves are lf-g1-r1 openconfig, r2 eos, r3 sonic,
r4 xr, r5 cumulus; swp9 is each leaf's first uplink (to sp-rN-1 swp1).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import subprocess
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import grpc
import pytest
from pygnmi.spec.v080 import gnmi_pb2, gnmi_pb2_grpc

from fabric.model import FabricParams
from fabric.topology import build_aipod
from simulator.fabric_state import FabricState
from simulator.gnmi_paths import parse_xpath
from simulator.gnmi_server import GnmiServer, serve_gnmi
from simulator.nos import MIXED, Devices
from simulator.snmp_agent import SnmpAgent, serve_snmp
from simulator.view import PortCounters
from tests.integration.test_sim_gnmi import Clock

OC, EOS, SONIC, XR, CUMULUS = "lf-g1-r1", "lf-g1-r2", "lf-g1-r3", "lf-g1-r4", "lf-g1-r5"
PORT = "swp9"
STREAM, ONCE = 0, 1
ON_CHANGE, SAMPLE = 1, 2
PROTO, JSON_IETF = 2, 4
SECOND = 1_000_000_000
WAIT = 5.0
IF_OPER = "1.3.6.1.2.1.2.2.1.8"
SYS_UPTIME = "1.3.6.1.2.1.1.3.0"


@dataclass
class Sim:
    view: FabricState
    clock: Clock
    devices: Devices
    server: GnmiServer
    stub: Any
    channel: grpc.aio.Channel

    def port(self, switch: str, port: str, t: int) -> PortCounters:
        return {p.name: p for p in self.view.ports(switch, t)}[port]


async def _start(**device_options: Any) -> Sim:
    clock = Clock()
    view = FabricState(build_aipod(FabricParams(gpus=64, radix=16)), seed=0, clock=clock)
    devices = Devices(view.switch_names(), MIXED, **device_options)
    server = await serve_gnmi(view, "127.0.0.1", 0, devices=devices)
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{server.port}")
    return Sim(view, clock, devices, server, gnmi_pb2_grpc.gNMIStub(channel), channel)


async def _stop(sim: Sim) -> None:
    await sim.channel.close()
    await sim.server.stop(0)


@pytest.fixture
async def sim() -> AsyncIterator[Sim]:
    s = await _start()
    yield s
    await _stop(s)


def gpath(text: str = "", target: str = "", origin: str = "") -> Any:
    path = gnmi_pb2.Path(target=target, origin=origin)
    for e in parse_xpath(text):
        path.elem.add(name=e.name, key=dict(e.keys))
    return path


def text_of(path: Any) -> str:
    return "/".join(e.name + "".join(f"[{k}={v}]" for k, v in sorted(e.key.items())) for e in path.elem)


def request(target: str, *paths: Any, mode: int = ONCE, encoding: int = PROTO) -> Any:
    """A SubscribeRequest; each path is xpath text or (xpath, sub_mode, interval_ns[, origin])."""
    subs = []
    for p in paths:
        text, sub_mode, interval, origin = (p, SAMPLE, SECOND, "") if isinstance(p, str) else (*p, "")[:4]
        subs.append(gnmi_pb2.Subscription(path=gpath(text, origin=origin), mode=sub_mode, sample_interval=interval))
    sl = gnmi_pb2.SubscriptionList(prefix=gpath(target=target), subscription=subs, mode=mode, encoding=encoding)
    return gnmi_pb2.SubscribeRequest(subscribe=sl)


async def subscribe(sim: Sim, req: Any, username: str = "") -> Any:
    """Subscribe, keeping the request side open (a half-close ends a STREAM RPC)."""
    metadata = (("username", username),) if username else None
    call = sim.stub.Subscribe(metadata=metadata)
    await call.write(req)
    return call


async def until_sync(call: Any) -> list[Any]:
    out: list[Any] = []
    async with asyncio.timeout(WAIT):
        async for resp in call:
            if resp.sync_response:
                return out
            out.append(resp.update)
    raise AssertionError("the stream ended before sync_response")


class Reader:
    """Reads a stream in a task of its own (a timeout around ``async for`` would cancel the RPC)."""

    def __init__(self, call: Any) -> None:
        self.call = call
        self.queue: asyncio.Queue[Any] = asyncio.Queue()
        self.task = asyncio.create_task(self._read())

    async def _read(self) -> None:
        async for resp in self.call:
            await self.queue.put(resp)

    async def until_sync(self) -> list[Any]:
        out: list[Any] = []
        async with asyncio.timeout(WAIT):
            while not (resp := await self.queue.get()).sync_response:
                out.append(resp.update)
        return out

    async def read_for(self, seconds: float) -> list[Any]:
        """Every Notification that comes within ``seconds``."""
        await asyncio.sleep(seconds)
        out = []
        while not self.queue.empty():
            resp = self.queue.get_nowait()
            if resp.HasField("update"):
                out.append(resp.update)
        return out

    async def close(self) -> None:
        self.call.cancel()
        self.task.cancel()
        await asyncio.gather(self.task, return_exceptions=True)


def leaf_values(n: Any) -> dict[str, Any]:
    """Update path (relative to the prefix) → the typed value of one Notification."""
    out: dict[str, Any] = {}
    for u in n.update:
        which = u.val.WhichOneof("value")
        out[text_of(u.path)] = getattr(u.val, which)
    return out


# --- EOS -------------------------------------------------------------------------------------


async def test_eos_sends_a_notification_per_container_and_pfc_10ms_later(sim: Sim) -> None:
    t = sim.clock.freeze()
    notes = await until_sync(
        await subscribe(
            sim, request(EOS, f"/interfaces/interface[name={PORT}]", f"/qos/interfaces/interface[interface-id={PORT}]")
        )
    )
    by_prefix = {text_of(n.prefix): n for n in notes}
    base = f"interfaces/interface[name={PORT}]"
    qos = f"qos/interfaces/interface[interface-id={PORT}]"
    assert set(by_prefix) == {f"{base}/state/counters", f"{base}/state", f"{base}/ethernet/state", qos}
    assert all(n.prefix.target == EOS for n in notes)
    counters = leaf_values(by_prefix[f"{base}/state/counters"])
    state = leaf_values(by_prefix[f"{base}/state"])
    ethernet = leaf_values(by_prefix[f"{base}/ethernet/state"])
    truth = sim.port(EOS, PORT, t)
    assert counters["in-octets"] == truth.in_octets and counters["out-octets"] == truth.out_octets
    assert "oper-status" not in counters and state["oper-status"] == "UP"
    assert ethernet["port-speed"] == "openconfig-if-ethernet:SPEED_400GB"
    assert ethernet["counters/in-mac-pause-frames"] == truth.in_pause_frames
    # PFC: its own Notification, read and stamped 10 ms after the interface counters.
    stamps = {text_of(n.prefix): n.timestamp for n in notes}
    assert {stamps[f"{base}/state/counters"], stamps[f"{base}/state"], stamps[f"{base}/ethernet/state"]} == {t}
    assert stamps[qos] == t + 10_000_000
    pfc = leaf_values(by_prefix[qos])
    later = sim.port(EOS, PORT, t + 10_000_000)
    assert pfc["switch-priority[priority=3]/state/counters/in-pause-pkts"] == later.pfc_rx[3]


async def test_eos_resends_unchanged_status_between_samples(sim: Sim) -> None:
    req = request(
        EOS,
        (f"/interfaces/interface[name={PORT}]/state/counters", SAMPLE, SECOND),
        (f"/interfaces/interface[name={PORT}]/state/oper-status", ON_CHANGE, 0),
        mode=STREAM,
    )
    reader = Reader(await subscribe(sim, req))
    await reader.until_sync()
    notes = await reader.read_for(3.2)
    await reader.close()
    samples = [n.timestamp for n in notes if text_of(n.prefix).endswith("state/counters")]
    beats = [n for n in notes if text_of(n.prefix).endswith("/state")]
    assert len(samples) >= 2 and len(beats) >= 2
    assert all(leaf_values(n) == {"oper-status": "UP"} for n in beats)  # unchanged, re-sent
    assert len({n.timestamp for n in beats}) == len(beats)  # each with a new timestamp
    beat_stamps = [n.timestamp for n in beats]
    assert not set(beat_stamps) & set(samples)  # never in a sample's tick
    # Half-way between samples. A stamp is when its tick ran, and a loaded machine can run any
    # one tick late (CI once stamped a sample 0.4 s after its due time, 0.1 s before the next
    # beat), so the placement is judged on the beat whose ticks were least disturbed.
    gaps = [min(b - s0, s1 - b) for s0, s1 in itertools.pairwise(samples) for b in beat_stamps if s0 < b < s1]
    assert gaps and max(gaps) > 0.25 * SECOND, (beat_stamps, samples)


# --- SONiC -----------------------------------------------------------------------------------


async def test_sonic_counters_are_one_json_table_of_strings(sim: Sim) -> None:
    t = sim.clock.freeze()
    (note,) = await until_sync(await subscribe(sim, request("COUNTERS_DB", "COUNTERS/Ethernet*"), username=SONIC))
    assert note.timestamp == t and note.prefix.target == "COUNTERS_DB" and not note.prefix.elem
    (update,) = note.update
    assert text_of(update.path) == "COUNTERS/Ethernet*"
    table = json.loads(update.val.json_ietf_val)
    assert sorted(table) == sorted(f"swp{n}" for n in range(1, 17))
    assert all(isinstance(v, str) and v.isdigit() for fields in table.values() for v in fields.values())
    truth = sim.port(SONIC, PORT, t)
    row = table[PORT]
    assert int(row["SAI_PORT_STAT_IF_IN_OCTETS"]) == truth.in_octets
    assert int(row["SAI_PORT_STAT_IF_OUT_UCAST_PKTS"]) == truth.out_unicast_pkts
    assert int(row["SAI_PORT_STAT_PFC_3_RX_PKTS"]) == truth.pfc_rx[3]
    assert int(row["SAI_PORT_STAT_PFC_3_TX_PKTS"]) == truth.pfc_tx[3]
    assert "SAI_PORT_STAT_IF_OUT_QLEN" in row  # a field a collector must skip
    # the port's FEC fields are in the same hash, as orchagent's port counters put them
    optic = {o.port: o for o in sim.view.transceivers(SONIC, t)}[PORT]
    bins = [int(row[f"SAI_PORT_STAT_IF_IN_FEC_CODEWORD_ERRORS_S{k}"]) for k in range(16)]
    assert bins == list(optic.fec_bins) and sum(bins) > 0
    assert int(row["SAI_PORT_STAT_IF_IN_FEC_CORRECTABLE_FRAMES"]) == optic.fec_corrected
    assert int(row["SAI_PORT_STAT_IF_IN_FEC_NOT_CORRECTABLE_FRAMES"]) == optic.fec_uncorrectable
    assert int(row["SAI_PORT_STAT_IF_IN_FEC_SYMBOL_ERRORS"]) == optic.symbol_errors
    (one_port,) = await until_sync(await subscribe(sim, request("COUNTERS_DB", f"COUNTERS/{PORT}"), username=SONIC))
    assert json.loads(one_port.update[0].val.json_ietf_val) == row
    # One field of one port: a string_val at the full path.
    (one,) = await until_sync(
        await subscribe(sim, request("COUNTERS_DB", f"COUNTERS/{PORT}/SAI_PORT_STAT_IF_IN_OCTETS"), username=SONIC)
    )
    assert leaf_values(one) == {f"COUNTERS/{PORT}/SAI_PORT_STAT_IF_IN_OCTETS": str(truth.in_octets)}


async def test_sonic_port_and_lldp_tables_in_appl_db(sim: Sim) -> None:
    notes = await until_sync(await subscribe(sim, request("APPL_DB", "PORT_TABLE", "LLDP_ENTRY_TABLE"), username=SONIC))
    docs = {text_of(u.path): json.loads(u.val.json_ietf_val) for n in notes for u in n.update}
    assert all(n.prefix.target == "APPL_DB" for n in notes)
    port = docs[f"PORT_TABLE/{PORT}"]
    assert port["oper_status"] == "up" and port["speed"] == "400000" and port["admin_status"] == "up"
    lldp = docs[f"LLDP_ENTRY_TABLE/{PORT}"]
    assert lldp["lldp_rem_sys_name"] == "sp-r3-1" and lldp["lldp_rem_port_id"] == "swp1"
    assert len([k for k in docs if k.startswith("PORT_TABLE/")]) == 16


async def test_sonic_targets_need_the_switch_in_username(sim: Sim) -> None:
    async def status(username: str) -> grpc.StatusCode:
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await until_sync(await subscribe(sim, request("COUNTERS_DB", "COUNTERS/Ethernet*"), username=username))
        return err.value.code()

    assert await status("") == grpc.StatusCode.INVALID_ARGUMENT
    assert await status(OC) == grpc.StatusCode.NOT_FOUND  # not a SONiC switch
    assert await status("nope") == grpc.StatusCode.NOT_FOUND
    # A SONiC switch asked by name answers OpenConfig.
    notes = await until_sync(
        await subscribe(sim, request(SONIC, f"/interfaces/interface[name={PORT}]/state/oper-status"))
    )
    assert [leaf_values(n) for n in notes] == [{"state/oper-status": "UP"}]


async def test_with_credentials_a_sonic_switch_name_is_a_user() -> None:
    clock = Clock()
    view = FabricState(build_aipod(FabricParams(gpus=64, radix=16)), seed=0, clock=clock)
    server = await serve_gnmi(
        view, "127.0.0.1", 0, credentials=("admin", "secret"), devices=Devices(view.switch_names(), MIXED)
    )
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{server.port}")
    stub = gnmi_pb2_grpc.gNMIStub(channel)

    async def get(target: str, path: str, user: str, password: str) -> Any:
        req = gnmi_pb2.GetRequest(prefix=gpath(target=target), path=[gpath(path)], encoding=JSON_IETF)
        return await stub.Get(req, metadata=(("username", user), ("password", password)), timeout=5)

    try:
        (note,) = (await get("APPL_DB", f"PORT_TABLE/{PORT}/oper_status", SONIC, "secret")).notification
        assert leaf_values(note) == {f"PORT_TABLE/{PORT}/oper_status": "up"}
        assert (await get(OC, f"/interfaces/interface[name={PORT}]/state/oper-status", "admin", "secret")).notification
        for user, password in ((SONIC, "wrong"), (OC, "secret"), ("admin", "")):
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await get("APPL_DB", "PORT_TABLE", user, password)
            assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED
    finally:
        await channel.close()
        await server.stop(0)


# --- IOS XR ----------------------------------------------------------------------------------


@pytest.mark.parametrize("origin", ["openconfig-interfaces", "openconfig", ""])
async def test_xr_sends_json_ietf_containers_under_an_origin_prefix(sim: Sim, origin: str) -> None:
    t = sim.clock.freeze()
    req = request(
        XR,
        (f"interfaces/interface[name={PORT}]/state/counters", SAMPLE, SECOND, origin),
        (f"interfaces/interface[name={PORT}]/state/oper-status", ON_CHANGE, 0, origin),
        (f"interfaces/interface[name={PORT}]/ethernet/state/port-speed", ON_CHANGE, 0, origin),
        mode=STREAM,
        encoding=JSON_IETF,
    )
    reader = Reader(await subscribe(sim, req))
    notes = await reader.until_sync()
    await reader.close()
    assert all(n.prefix.origin == "openconfig-interfaces" and not n.prefix.elem for n in notes)
    docs = [(text_of(u.path), json.loads(u.val.json_ietf_val)) for n in notes for u in n.update]
    state = f"interfaces/interface[name={PORT}]/state"
    counters = next(d for p, d in docs if p == state and "counters" in d)["counters"]
    truth = sim.port(XR, PORT, t)
    assert counters["in-octets"] == str(truth.in_octets)  # uint64 as a JSON string (RFC 7951)
    assert counters["last-clear"] == str(truth.last_clear_ns)
    assert all(isinstance(v, str) for v in counters.values())
    assert {"oper-status": "UP"} in [d for p, d in docs if p == state]
    assert (f"{state[:-6]}/ethernet/state", {"port-speed": "openconfig-if-ethernet:SPEED_400GB"}) in docs
    assert len(notes) == 2  # per interface and plan: the counters; oper-status and port-speed


# --- deletes ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("switch", "target", "path", "deleted"),
    [
        (OC, OC, "/interfaces/interface/state/counters", f"interfaces/interface[name={PORT}]"),
        (EOS, EOS, "/interfaces/interface/state/counters", f"interfaces/interface[name={PORT}]"),
        (XR, XR, "/interfaces/interface/state/counters", f"interfaces/interface[name={PORT}]"),
        (CUMULUS, CUMULUS, "/qos/interfaces/interface", f"qos/interfaces/interface[interface-id={PORT}]"),
        (SONIC, "COUNTERS_DB", "COUNTERS/Ethernet*", f"COUNTERS/{PORT}"),
    ],
)
async def test_a_pulled_optic_deletes_the_interface_until_it_is_back(
    sim: Sim, switch: str, target: str, path: str, deleted: str
) -> None:
    reader = Reader(await subscribe(sim, request(target, (path, SAMPLE, SECOND), mode=STREAM), username=switch))
    await reader.until_sync()
    fault = sim.view.apply({"kind": "link_down", "switch": switch, "port": PORT, "removed": True})
    notes = await reader.read_for(2.5)
    deletes = [(n, text_of(d)) for n in notes for d in n.delete]
    assert [d for _, d in deletes] == [deleted], deletes
    first = notes.index(deletes[0][0])
    after = notes[first + 1 :]
    assert after and not any(PORT in _ports_in(n) for n in after)
    before = sim.port(switch, PORT, sim.clock())
    assert sim.view.clear(fault.id)
    back = await reader.read_for(1.5)
    await reader.close()
    assert any(PORT in _ports_in(n) for n in back)
    assert sim.port(switch, PORT, sim.clock()).in_octets >= before.in_octets  # counters go on


def _ports_in(n: Any) -> set[str]:
    """The interfaces a Notification carries data for (keys in its paths, or SONiC JSON keys)."""
    out = {v for e in n.prefix.elem for v in e.key.values()}
    for u in n.update:
        out |= {v for e in u.path.elem for v in e.key.values()}
        if u.val.WhichOneof("value") == "json_ietf_val" and text_of(u.path).endswith("*"):
            out |= set(json.loads(u.val.json_ietf_val))
    return out


# --- clocks ----------------------------------------------------------------------------------


async def test_clock_skew_moves_every_time_the_switch_sends() -> None:
    sim = await _start(clock_skew_s=300.0, seed=7)
    try:
        offsets = sim.devices.offsets()
        assert all(abs(d) <= 300 * SECOND for d in offsets.values()) and len(set(offsets.values())) > 1
        for switch in (OC, EOS, XR):
            t = sim.clock.freeze()
            notes = await until_sync(await subscribe(sim, request(switch, f"/interfaces/interface[name={PORT}]/state")))
            assert {n.timestamp for n in notes} == {t + offsets[switch]}
            truth = sim.port(switch, PORT, t)
            values: dict[str, Any] = {}
            for n in notes:
                for key, v in leaf_values(n).items():
                    values[key.rpartition("/")[2]] = v
            if switch == XR:
                doc = json.loads(values["state"])
                values = {"last-change": int(doc["last-change"]), "last-clear": int(doc["counters"]["last-clear"])}
            assert values["last-change"] == truth.last_change_ns + offsets[switch]
            assert values["last-clear"] == truth.last_clear_ns + offsets[switch]
    finally:
        await _stop(sim)


async def test_a_clock_step_moves_what_the_switch_sends_until_it_steps_back() -> None:
    """``clock_step`` (an NTP step): the Notifications' time moves by the step, on top of the
    switch's own offset; times it stamped before (last-clear: the boot) and the counters do not;
    clearing the fault steps the clock back."""
    sim = await _start(clock_skew_s=10.0, seed=3)
    try:
        offset = sim.devices.offsets()[OC]
        fault = sim.view.apply({"kind": "clock_step", "switch": OC, "step_s": -120.0})
        for step in (-120 * SECOND, 0):
            t = sim.clock.freeze()
            notes = await until_sync(await subscribe(sim, request(OC, f"/interfaces/interface[name={PORT}]/state")))
            assert {n.timestamp for n in notes} == {t + offset + step}
            values = {k.rpartition("/")[2]: v for n in notes for k, v in leaf_values(n).items()}
            truth = sim.port(OC, PORT, t)
            assert values["last-clear"] == truth.last_clear_ns + offset  # stamped before the step
            assert values["in-octets"] == truth.in_octets  # the counters do not move with the clock
            assert sim.view.clear(fault.id) or step == 0
    finally:
        await _stop(sim)


async def test_clear_counters_restarts_them_and_says_when_in_last_clear() -> None:
    sim = await _start()
    try:
        t0 = sim.clock.freeze()
        sim.clock.frozen = t = t0 + 2 * SECOND  # two seconds of traffic, then the clear
        before = sim.port(OC, PORT, t)
        sim.view.apply({"kind": "counter_clear", "switch": OC})
        notes = await until_sync(await subscribe(sim, request(OC, f"/interfaces/interface[name={PORT}]/state")))
        values = {k.rpartition("/")[2]: v for n in notes for k, v in leaf_values(n).items()}
        assert before.in_octets > 0 and values["in-octets"] == 0 and values["last-clear"] == t
        info = sim.view.switch(OC)
        assert info is not None and info.boot_time_ns < t and info.reachable  # no reboot
    finally:
        await _stop(sim)


async def test_clock_jitter_stamps_each_notification_apart() -> None:
    sim = await _start(clock_jitter_ms=50.0)
    try:
        t = sim.clock.freeze()
        notes = await until_sync(await subscribe(sim, request(OC, "/interfaces/interface/state/counters")))
        stamps = [n.timestamp for n in notes]
        assert len(notes) == 16 and len(set(stamps)) > 8
        assert all(abs(s - t) <= 50_000_000 for s in stamps)
    finally:
        await _stop(sim)


# --- SNMP ------------------------------------------------------------------------------------


@pytest.fixture
async def agent(sim: Sim) -> AsyncIterator[SnmpAgent]:
    a = await serve_snmp(sim.view, "127.0.0.1", 0, v3_users=())
    yield a
    await a.stop()


async def snmpget(agent: SnmpAgent, switch: str, oid: str, timeout_s: int = 1) -> tuple[str, float]:
    """(value, seconds it took) via net-snmp's snmpget."""
    started = time.monotonic()
    proc = await asyncio.create_subprocess_exec(
        "snmpget", "-v2c", "-c", switch, "-t", str(timeout_s), "-r", "0", "-Oqvt",
        f"127.0.0.1:{agent.port}", oid,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(), 30)
    if proc.returncode != 0:
        raise TimeoutError(err.decode().strip())
    return out.decode().strip(), time.monotonic() - started


async def test_snmp_shows_a_pulled_optic_as_not_present(sim: Sim, agent: SnmpAgent) -> None:
    fault = sim.view.apply({"kind": "link_down", "switch": OC, "port": PORT, "removed": True})
    assert (await snmpget(agent, OC, f"{IF_OPER}.9"))[0] == "6"  # notPresent
    assert (await snmpget(agent, "sp-r1-1", f"{IF_OPER}.1"))[0] == "2"  # the peer is only down
    sim.view.clear(fault.id)
    assert (await snmpget(agent, OC, f"{IF_OPER}.9"))[0] == "1"


async def test_snmp_slow_answers_late_with_values_of_the_request_time(sim: Sim, agent: SnmpAgent) -> None:
    switch = "sp-r1-1"
    fault = sim.view.apply({"kind": "snmp_slow", "switch": switch, "delay_s": 1.5})
    assert fault.spec.delay_s == 1.5
    sent = time.time_ns()
    slow = asyncio.create_task(snmpget(agent, switch, SYS_UPTIME, timeout_s=4))
    await asyncio.sleep(0.1)
    _, other = await snmpget(agent, "sp-r2-1", SYS_UPTIME)  # other switches answer meanwhile
    ticks, took = await slow
    assert took >= 1.5 and other < 1.0 and not slow.cancelled()
    info = sim.view.switch(switch)
    assert info is not None and info.snmp_delay_s == 1.5
    uptime_at_request = (sent - info.boot_time_ns) / 1e7
    assert abs(int(ticks) - uptime_at_request) < 30  # centiseconds: the value is 1.5 s old on arrival
    assert agent.stats.delayed == 1
    sim.view.clear(fault.id)
    assert (await snmpget(agent, switch, SYS_UPTIME))[1] < 1.0

"""The simulator's gNMI target over real gRPC on loopback, against the real FabricState.

pygnmi's own (synchronous, threaded) client runs in worker threads; the other checks use a
``grpc.aio`` stub with pygnmi's generated protobufs.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import ipaddress
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import grpc
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from pygnmi.client import gNMIclient, gNMIException
from pygnmi.spec.v080 import gnmi_pb2, gnmi_pb2_grpc

from fabric.model import FabricParams
from fabric.topology import build_aipod
from simulator.fabric_state import FabricState
from simulator.gnmi_paths import parse_xpath
from simulator.gnmi_server import GnmiServer, GnmiTls, serve_gnmi

LEAF = "lf-g1-r1"
UPLINK = "swp65"  # the leaf's first uplink (to sp-r1-1)
STREAM, ONCE, POLL = 0, 1, 2
TARGET_DEFINED, ON_CHANGE, SAMPLE = 0, 1, 2
PROTO, JSON_IETF = 2, 4
SECOND = 1_000_000_000
WAIT = 5.0  # seconds: an upper bound for anything that should come within ~1 s
LLDP_LEAVES = ("system-name", "port-id", "port-description", "chassis-id")


class Clock:
    """Wall-clock nanoseconds that a test can freeze (so values can be compared with the view)."""

    def __init__(self) -> None:
        self.frozen: int | None = None

    def __call__(self) -> int:
        return self.frozen if self.frozen is not None else time.time_ns()

    def freeze(self) -> int:
        self.frozen = time.time_ns()
        return self.frozen


@dataclass
class Sim:
    view: FabricState
    clock: Clock
    server: GnmiServer

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.server.port}"


async def _start(**kwargs: Any) -> Sim:
    clock = Clock()
    view = FabricState(build_aipod(FabricParams(gpus=512)), seed=0, clock=clock)
    server = await serve_gnmi(view, "127.0.0.1", 0, **kwargs)
    return Sim(view, clock, server)


@pytest.fixture
async def sim() -> AsyncIterator[Sim]:
    s = await _start()
    yield s
    await s.server.stop(0)


def gpath(text: str = "", target: str = "") -> Any:
    path = gnmi_pb2.Path(target=target)
    for e in parse_xpath(text):
        path.elem.add(name=e.name, key=dict(e.keys))
    return path


def sub_request(
    target: str,
    *paths: str,
    mode: int = STREAM,
    sub_mode: int = SAMPLE,
    interval_ns: int = SECOND,
    encoding: int = PROTO,
    updates_only: bool = False,
) -> Any:
    subs = [gnmi_pb2.Subscription(path=gpath(p), mode=sub_mode, sample_interval=interval_ns) for p in paths]
    sl = gnmi_pb2.SubscriptionList(
        prefix=gpath(target=target), subscription=subs, mode=mode, encoding=encoding, updates_only=updates_only
    )
    return gnmi_pb2.SubscribeRequest(subscribe=sl)


def text_of(path: Any) -> str:
    return "/".join(e.name + "".join(f"[{k}={v}]" for k, v in sorted(e.key.items())) for e in path.elem)


def values(notification: Any) -> dict[str, Any]:
    """``{"interfaces/interface[name=swp1]/state/counters/in-octets": 123, ...}`` of one Notification."""
    prefix = text_of(notification.prefix)
    out = {}
    for u in notification.update:
        kind = u.val.WhichOneof("value")
        out[f"{prefix}/{text_of(u.path)}"] = getattr(u.val, kind)
    return out


async def read_until_sync(call: Any) -> list[Any]:
    """The Notifications of one dump (until ``sync_response``)."""
    out: list[Any] = []
    while True:
        async with asyncio.timeout(WAIT):
            resp = await call.read()
        assert resp is not grpc.aio.EOF, "stream ended before sync_response"
        if resp.sync_response:
            return out
        out.append(resp.update)


async def next_notification(call: Any) -> Any:
    async with asyncio.timeout(WAIT):
        resp = await call.read()
    assert resp is not grpc.aio.EOF
    assert resp.HasField("update"), resp
    return resp.update


def port_of(sim: Sim, switch: str, port: str, ts: int) -> Any:
    return next(p for p in sim.view.ports(switch, ts) if p.name == port)


# --- pygnmi's own client --------------------------------------------------------------------


async def test_pygnmi_capabilities_and_get(sim: Sim) -> None:
    ts = sim.clock.freeze()

    def run() -> tuple[Any, Any, Any]:
        with gNMIclient(target=("127.0.0.1", sim.server.port), insecure=True) as client:
            caps = client.capabilities()
            proto = client.get(
                path=[f"/interfaces/interface[name={UPLINK}]/state/counters"], target=LEAF, encoding="proto"
            )
            json_ietf = client.get(path=[f"/interfaces/interface[name={UPLINK}]"], target=LEAF)
            return caps, proto, json_ietf

    caps, proto, json_ietf = await asyncio.to_thread(run)
    assert caps["gnmi_version"] == "0.8.0"
    assert set(caps["supported_encodings"]) == {"json_ietf", "proto"}
    names = {m["name"] for m in caps["supported_models"]}
    assert {"openconfig-interfaces", "openconfig-if-ethernet", "openconfig-lldp"} <= names

    port = port_of(sim, LEAF, UPLINK, ts)
    (note,) = proto["notification"]
    assert note["timestamp"] == ts
    assert note["prefix"] == f"interfaces/interface[name={UPLINK}]"
    got = {u["path"]: u["val"] for u in note["update"]}
    assert len(got) == 15
    assert got["state/counters/in-octets"] == port.in_octets > 0
    assert got["state/counters/out-unicast-pkts"] == port.out_unicast_pkts
    assert got["state/counters/last-clear"] == port.last_clear_ns

    (note,) = json_ietf["notification"]
    got = {u["path"]: u["val"] for u in note["update"]}
    assert got["state/counters/in-octets"] == str(port.in_octets)  # RFC 7951: uint64 as a string
    assert got["state/oper-status"] == "UP"
    assert got["state/description"] == port.description
    assert got["ethernet/state/port-speed"] == "openconfig-if-ethernet:SPEED_400GB"


async def test_pygnmi_subscribe_sample_and_on_change(sim: Sim) -> None:
    ts = sim.clock.freeze()
    counters = f"/interfaces/interface[name={UPLINK}]/state/counters/in-octets"
    status = f"/interfaces/interface[name={UPLINK}]/state/oper-status"

    def first() -> tuple[Any, Any, Any, Any]:
        client = gNMIclient(target=("127.0.0.1", sim.server.port), insecure=True).connect()
        sample = client.subscribe_stream(
            {"subscription": [{"path": counters, "mode": "sample", "sample_interval": SECOND}], "encoding": "proto"},
            target=LEAF,
        )
        change = client.subscribe_stream({"subscription": [{"path": status, "mode": "on_change"}]}, target=LEAF)
        return client, sample, change, (sample.get_update(WAIT), change.get_update(WAIT))

    client, sample, change, (s0, c0) = await asyncio.to_thread(first)
    try:
        assert s0["sync_response"] is True
        assert s0["update"]["update"] == [
            {"path": "state/counters/in-octets", "val": port_of(sim, LEAF, UPLINK, ts).in_octets}
        ]
        assert c0["update"]["update"] == [{"path": "state/oper-status", "val": "UP"}]

        sim.clock.frozen = None
        s1 = await asyncio.to_thread(sample.get_update, WAIT)
        assert s1["update"]["timestamp"] > ts
        assert s1["update"]["update"][0]["val"] > s0["update"]["update"][0]["val"]

        fault = sim.view.apply({"kind": "link_down", "switch": LEAF, "port": UPLINK})
        c1 = await asyncio.to_thread(change.get_update, WAIT)
        assert c1["update"]["update"] == [{"path": "state/oper-status", "val": "DOWN"}]
        assert c1["update"]["prefix"] == f"interfaces/interface[name={UPLINK}]"
        sim.view.clear(fault.id)
        c2 = await asyncio.to_thread(change.get_update, WAIT)
        assert c2["update"]["update"] == [{"path": "state/oper-status", "val": "UP"}]
    finally:

        def close() -> None:
            sample.close()
            change.close()
            client.close()

        await asyncio.to_thread(close)


# --- grpc.aio stub: modes and paths ---------------------------------------------------------


@pytest.fixture
async def stub(sim: Sim) -> AsyncIterator[Any]:
    async with grpc.aio.insecure_channel(sim.address) as channel:
        yield gnmi_pb2_grpc.gNMIStub(channel)


async def test_once_dumps_then_syncs_then_ends(sim: Sim, stub: Any) -> None:
    call = stub.Subscribe()
    await call.write(sub_request(LEAF, "/interfaces/interface[name=*]/state/counters", mode=ONCE))
    notes = await read_until_sync(call)
    assert len(notes) == 128  # one Notification per interface
    assert all(len(n.update) == 15 and n.prefix.target == LEAF for n in notes)
    assert all(n.update[0].val.WhichOneof("value") == "uint_val" for n in notes)
    async with asyncio.timeout(WAIT):
        assert await call.read() is grpc.aio.EOF
    assert await call.code() == grpc.StatusCode.OK


async def test_poll_gives_a_fresh_dump_per_poll(sim: Sim, stub: Any) -> None:
    call = stub.Subscribe()
    await call.write(sub_request(LEAF, f"/interfaces/interface[name={UPLINK}]/state/counters/in-octets", mode=POLL))
    initial = await read_until_sync(call)
    dumps = []
    for _ in range(2):
        await asyncio.sleep(0.01)
        await call.write(gnmi_pb2.SubscribeRequest(poll=gnmi_pb2.Poll()))
        dumps.append(await read_until_sync(call))
    stamps = [d[0].timestamp for d in [initial, *dumps]]
    assert [len(d) for d in dumps] == [1, 1]
    assert stamps == sorted(stamps) and len(set(stamps)) == 3
    octets = [d[0].update[0].val.uint_val for d in [initial, *dumps]]
    assert octets == sorted(octets) and octets[0] < octets[2]
    await call.done_writing()
    async with asyncio.timeout(WAIT):
        assert await call.read() is grpc.aio.EOF
    assert await call.code() == grpc.StatusCode.OK


async def test_stream_updates_only_starts_with_sync_and_timestamps_increase(sim: Sim, stub: Any) -> None:
    call = stub.Subscribe()
    path = f"/interfaces/interface[name={UPLINK}]/state/counters/out-octets"
    await call.write(sub_request(LEAF, path, updates_only=True))
    assert await read_until_sync(call) == []  # nothing before sync_response
    t0 = time.monotonic()
    first = await next_notification(call)
    assert time.monotonic() - t0 > 0.5  # the first sample comes after one interval
    second = await next_notification(call)
    assert 0 < first.timestamp < second.timestamp
    assert second.timestamp - first.timestamp == pytest.approx(SECOND, rel=0.3)
    call.cancel()


async def test_wildcard_and_specific_keys(sim: Sim, stub: Any) -> None:
    ts = sim.clock.freeze()
    resp = await stub.Get(
        gnmi_pb2.GetRequest(  # the target may also come with the paths
            path=[
                gpath("/interfaces/interface[name=*]/state/oper-status", target=LEAF),
                gpath("/interfaces/interface[name=swp3]/ethernet/state/port-speed", target=LEAF),
                gpath("/openconfig-interfaces:interfaces/interface/state/counters/in-errors", target=LEAF),
            ],
            encoding=PROTO,
        )
    )
    notes = list(resp.notification)
    assert len(notes) == 128 + 1 + 128
    assert all(n.timestamp == ts for n in notes)
    assert values(notes[128]) == {
        "interfaces/interface[name=swp3]/ethernet/state/port-speed": "openconfig-if-ethernet:SPEED_400GB"
    }
    statuses = {k: v for n in notes[:128] for k, v in values(n).items()}
    assert statuses[f"interfaces/interface[name={UPLINK}]/state/oper-status"] == "UP"
    assert len(statuses) == 128


async def test_pfc_path_reports_a_storm(sim: Sim, stub: Any) -> None:
    sim.view.apply({"kind": "pfc_storm", "switch": LEAF, "port": UPLINK, "priority": 3, "rate_pps": 50_000})
    await asyncio.sleep(0.05)
    ts = sim.clock.freeze()
    prefix = f"qos/interfaces/interface[interface-id={UPLINK}]"
    call = stub.Subscribe()
    await call.write(sub_request(LEAF, f"/qos/interfaces/interface[interface-id={UPLINK}]", mode=ONCE))
    (note,) = await read_until_sync(call)
    got = values(note)
    port = port_of(sim, LEAF, UPLINK, ts)
    assert len(got) == 16
    for prio in range(8):
        assert got[f"{prefix}/switch-priority[priority={prio}]/state/counters/in-pause-pkts"] == port.pfc_rx[prio]
        assert got[f"{prefix}/switch-priority[priority={prio}]/state/counters/out-pause-pkts"] == port.pfc_tx[prio]
    assert sum(port.pfc_rx) + sum(port.pfc_tx) > 0

    resp = await stub.Get(
        gnmi_pb2.GetRequest(
            prefix=gpath(f"/qos/interfaces/interface[interface-id={UPLINK}]", target=LEAF),
            path=[gpath("switch-priority[priority=3]/state/counters")],
            encoding=PROTO,
        )
    )
    assert len(values(resp.notification[0])) == 2


async def test_lldp_path_matches_the_view(sim: Sim, stub: Any) -> None:
    call = stub.Subscribe()
    await call.write(sub_request(LEAF, "/lldp/interfaces/interface[name=*]/neighbors/neighbor[id=*]/state", mode=ONCE))
    notes = await read_until_sync(call)
    got = {k: v for n in notes for k, v in values(n).items()}
    table = sim.view.lldp(LEAF)
    assert len(got) == 4 * len(table) > 0
    for nb in table:
        base = f"lldp/interfaces/interface[name={nb.local_port}]/neighbors/neighbor[id=1]/state"
        assert got[f"{base}/system-name"] == nb.system_name
        assert got[f"{base}/port-id"] == nb.port_id
        assert got[f"{base}/chassis-id"] == nb.chassis_id
        assert got[f"{base}/port-description"] == nb.port_description


async def test_target_defined_streams_state_on_change_and_counters_sampled(sim: Sim, stub: Any) -> None:
    call = stub.Subscribe()
    await call.write(sub_request(LEAF, f"/interfaces/interface[name={UPLINK}]", sub_mode=TARGET_DEFINED))
    (dump,) = await read_until_sync(call)
    assert len(dump.update) == 22 + 6  # and link health: state/transceiver, three FEC counters, two BERs
    sim.view.apply({"kind": "link_down", "switch": LEAF, "port": UPLINK})
    change = await next_notification(call)
    changed = {text_of(u.path) for u in change.update}
    if "state/counters/in-octets" in changed:  # the 1 s sample came first
        change = await next_notification(call)
        changed = {text_of(u.path) for u in change.update}
    assert "state/oper-status" in changed and "state/counters/in-octets" not in changed
    sample = await next_notification(call)
    assert {text_of(u.path) for u in sample.update} >= {
        "state/counters/in-octets",
        "state/counters/carrier-transitions",
    }
    call.cancel()


async def test_lldp_neighbor_that_goes_away_is_deleted(sim: Sim, stub: Any) -> None:
    call = stub.Subscribe()
    await call.write(sub_request(LEAF, f"/lldp/interfaces/interface[name={UPLINK}]", sub_mode=ON_CHANGE))
    (dump,) = await read_until_sync(call)
    assert values(dump)[f"lldp/interfaces/interface[name={UPLINK}]/neighbors/neighbor[id=1]/state/system-name"] == (
        "sp-r1-1"
    )
    fault = sim.view.apply({"kind": "link_down", "switch": LEAF, "port": UPLINK})
    gone = await next_notification(call)
    assert len(gone.update) == 0 and len(gone.delete) == 4
    assert {text_of(d) for d in gone.delete} == {f"neighbors/neighbor[id=1]/state/{x}" for x in LLDP_LEAVES}
    sim.view.clear(fault.id)
    back = await next_notification(call)
    assert len(back.update) == 4 and len(back.delete) == 0
    call.cancel()


async def test_heartbeat_and_suppress_redundant(sim: Sim, stub: Any) -> None:
    status = gnmi_pb2.Subscription(
        path=gpath(f"/interfaces/interface[name={UPLINK}]/state/oper-status"), mode=ON_CHANGE, heartbeat_interval=SECOND
    )
    description = gnmi_pb2.Subscription(
        path=gpath(f"/interfaces/interface[name={UPLINK}]/state/description"),
        mode=SAMPLE,
        sample_interval=SECOND,
        suppress_redundant=True,
    )
    sl = gnmi_pb2.SubscriptionList(prefix=gpath(target=LEAF), subscription=[status, description], encoding=PROTO)
    call = stub.Subscribe()
    await call.write(gnmi_pb2.SubscribeRequest(subscribe=sl))
    (dump,) = await read_until_sync(call)  # both leaves, one Notification for the interface
    assert {text_of(u.path) for u in dump.update} == {"state/oper-status", "state/description"}
    for _ in range(2):  # heartbeats resend the unchanged status; the unchanged description stays quiet
        beat = await next_notification(call)
        assert [text_of(u.path) for u in beat.update] == ["state/oper-status"]
    call.cancel()


async def test_reboot_ends_streams_and_counters_restart(sim: Sim, stub: Any) -> None:
    sim.view.start()
    try:
        path = f"/interfaces/interface[name={UPLINK}]/state/counters"
        call = stub.Subscribe()
        await call.write(sub_request(LEAF, path))
        (before,) = await read_until_sync(call)
        sim.view.apply({"kind": "reboot", "switch": LEAF, "boot_s": 0.3})
        with pytest.raises(grpc.aio.AioRpcError) as err:
            async with asyncio.timeout(WAIT):
                while await call.read() is not grpc.aio.EOF:
                    pass
        assert err.value.code() == grpc.StatusCode.UNAVAILABLE
        assert "rebooted" in str(err.value.details())
        call = stub.Subscribe()
        await call.write(sub_request(LEAF, path, mode=ONCE))
        (after,) = await read_until_sync(call)
        key = f"interfaces/interface[name={UPLINK}]/state/counters"
        assert values(after)[f"{key}/in-octets"] < values(before)[f"{key}/in-octets"]
        assert values(after)[f"{key}/last-clear"] > values(before)[f"{key}/last-clear"]
    finally:
        await sim.view.stop()


# --- failures -------------------------------------------------------------------------------


async def _status(coro: Any) -> grpc.StatusCode:
    try:
        await coro
    except grpc.aio.AioRpcError as exc:
        return exc.code()
    return grpc.StatusCode.OK


async def _subscribe_status(stub: Any, request: Any) -> grpc.StatusCode:
    call = stub.Subscribe()
    try:
        await call.write(request)
    except grpc.aio.AioRpcError as exc:
        return exc.code()

    async def drain() -> None:
        while await call.read() is not grpc.aio.EOF:
            pass

    return await _status(asyncio.wait_for(drain(), WAIT))


async def test_bad_requests_fail_alone(sim: Sim, stub: Any) -> None:
    background = stub.Subscribe()
    await background.write(sub_request("lf-g1-r2", "/interfaces/interface[name=swp1]/state/counters/in-octets"))
    await read_until_sync(background)

    counters = "/interfaces/interface[name=*]/state/counters"
    bad_sub = gnmi_pb2.SubscribeRequest(
        subscribe=gnmi_pb2.SubscriptionList(
            prefix=gpath(target=LEAF), subscription=[gnmi_pb2.Subscription(path=gpath(counters))], mode=7
        )
    )
    malformed = sub_request(LEAF, counters)
    malformed.subscribe.subscription[0].path.elem.add(name="bad[name")
    cases = {
        "no SubscriptionList": (gnmi_pb2.SubscribeRequest(poll=gnmi_pb2.Poll()), grpc.StatusCode.INVALID_ARGUMENT),
        "unknown target": (sub_request("no-such-switch", counters), grpc.StatusCode.NOT_FOUND),
        "missing target": (sub_request("", counters), grpc.StatusCode.INVALID_ARGUMENT),
        "malformed path": (malformed, grpc.StatusCode.INVALID_ARGUMENT),
        "unknown path": (sub_request(LEAF, "/system/state"), grpc.StatusCode.NOT_FOUND),
        "bad mode": (bad_sub, grpc.StatusCode.INVALID_ARGUMENT),
        "JSON encoding": (sub_request(LEAF, counters, encoding=0), grpc.StatusCode.UNIMPLEMENTED),
        "ASCII encoding": (sub_request(LEAF, counters, encoding=3), grpc.StatusCode.UNIMPLEMENTED),
        "interval too short": (
            sub_request(LEAF, counters, interval_ns=SECOND // 100),
            grpc.StatusCode.INVALID_ARGUMENT,
        ),
    }
    for name, (request, code) in cases.items():
        assert await _subscribe_status(stub, request) == code, name

    get = gnmi_pb2.GetRequest(prefix=gpath(target="nope"), path=[gpath(counters)], encoding=PROTO)
    assert await _status(stub.Get(get)) == grpc.StatusCode.NOT_FOUND
    get = gnmi_pb2.GetRequest(prefix=gpath(target=LEAF), path=[gpath("/interfaces/interface[name=swp999]")])
    assert await _status(stub.Get(get)) == grpc.StatusCode.UNIMPLEMENTED  # JSON (the default encoding)
    get.encoding = JSON_IETF
    assert await _status(stub.Get(get)) == grpc.StatusCode.NOT_FOUND  # no such port
    assert await _status(stub.Set(gnmi_pb2.SetRequest())) == grpc.StatusCode.UNIMPLEMENTED

    before = time.time_ns()
    note = await next_notification(background)
    assert note.timestamp > before and note.prefix.target == "lf-g1-r2"
    background.cancel()


async def test_unreachable_switch_goes_silent_then_resumes(sim: Sim, stub: Any) -> None:
    call = stub.Subscribe()
    await call.write(sub_request(LEAF, f"/interfaces/interface[name={UPLINK}]/state/counters/in-octets"))
    await read_until_sync(call)
    received: asyncio.Queue[Any] = asyncio.Queue()

    async def pump() -> None:  # a timed-out read would cancel the RPC: read in a task instead
        while (resp := await call.read()) is not grpc.aio.EOF:
            received.put_nowait(resp)

    reader = asyncio.create_task(pump())
    fault = sim.view.apply({"kind": "switch_unreachable", "switch": LEAF})
    get = gnmi_pb2.GetRequest(prefix=gpath(target=LEAF), path=[gpath("/interfaces")], encoding=PROTO)
    assert await _status(stub.Get(get)) == grpc.StatusCode.UNAVAILABLE
    assert await _subscribe_status(stub, sub_request(LEAF, "/interfaces", mode=ONCE)) == grpc.StatusCode.UNAVAILABLE
    while not received.empty():  # a sample may have been on its way
        received.get_nowait()
    await asyncio.sleep(2.2)  # two sample intervals: nothing, and no error
    assert received.empty() and not reader.done()
    sim.view.clear(fault.id)
    back = time.time_ns()
    async with asyncio.timeout(WAIT):
        note = (await received.get()).update
    assert note.timestamp >= back
    call.cancel()
    await asyncio.gather(reader, return_exceptions=True)


async def test_wrong_password_is_unauthenticated() -> None:
    sim = await _start(credentials=("admin", "s3cret"))
    try:

        def connect(password: str) -> dict[str, Any]:
            with gNMIclient(
                target=("127.0.0.1", sim.server.port), insecure=True, username="admin", password=password
            ) as client:
                result: dict[str, Any] = client.capabilities()
                return result

        with pytest.raises(gNMIException, match="invalid username or password"):
            await asyncio.to_thread(connect, "wrong")
        assert (await asyncio.to_thread(connect, "s3cret"))["gnmi_version"] == "0.8.0"

        async with grpc.aio.insecure_channel(sim.address) as channel:
            stub = gnmi_pb2_grpc.gNMIStub(channel)
            good = (("username", "admin"), ("password", "s3cret"))
            streaming = stub.Subscribe(metadata=good)
            await streaming.write(sub_request(LEAF, "/interfaces/interface[name=swp1]/state/counters/in-octets"))
            await read_until_sync(streaming)
            bad = stub.Subscribe(metadata=(("username", "admin"), ("password", "nope")))
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await bad.write(sub_request(LEAF, "/interfaces"))
                await bad.read()
            assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED
            assert await _status(stub.Capabilities(gnmi_pb2.CapabilityRequest())) == grpc.StatusCode.UNAUTHENTICATED
            await next_notification(streaming)
            streaming.cancel()
    finally:
        await sim.server.stop(0)


# --- TLS ------------------------------------------------------------------------------------


def _cert(name: str, issuer: tuple[Any, Any] | None = None, ca: bool = False) -> tuple[bytes, bytes, Any]:
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    issuer_name, issuer_key = (issuer[0].subject, issuer[1]) if issuer else (subject, key)
    now = dt.datetime.now(dt.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        .add_extension(
            x509.SubjectAlternativeName([x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
    )
    cert = builder.sign(issuer_key, hashes.SHA256())
    pem_key = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return cert.public_bytes(serialization.Encoding.PEM), pem_key, (cert, key)


async def test_tls_and_mtls() -> None:
    server_cert, server_key, _ = _cert("localhost")
    sim = await _start(tls=GnmiTls(server_cert, server_key))
    try:
        creds = grpc.ssl_channel_credentials(root_certificates=server_cert)
        async with grpc.aio.secure_channel(sim.address, creds) as channel:
            stub = gnmi_pb2_grpc.gNMIStub(channel)
            caps = await stub.Capabilities(gnmi_pb2.CapabilityRequest(), timeout=WAIT)
            assert caps.gNMI_version == "0.8.0"
            get = gnmi_pb2.GetRequest(prefix=gpath(target=LEAF), path=[gpath("/interfaces/interface[name=swp1]")])
            get.encoding = PROTO
            assert len((await stub.Get(get, timeout=WAIT)).notification[0].update) == 22 + 6  # with link health
        async with grpc.aio.insecure_channel(sim.address) as channel:
            stub = gnmi_pb2_grpc.gNMIStub(channel)
            code = await _status(stub.Capabilities(gnmi_pb2.CapabilityRequest(), timeout=2))
            assert code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)
    finally:
        await sim.server.stop(0)

    ca_pem, _, ca = _cert("fabricmon test CA", ca=True)
    client_cert, client_key, _ = _cert("collector", issuer=ca)
    sim = await _start(tls=GnmiTls(server_cert, server_key, client_ca=ca_pem))
    try:
        for cert_chain, ok in ((None, False), (client_cert, True)):
            creds = grpc.ssl_channel_credentials(
                root_certificates=server_cert,
                private_key=client_key if cert_chain else None,
                certificate_chain=cert_chain,
            )
            async with grpc.aio.secure_channel(sim.address, creds) as channel:
                stub = gnmi_pb2_grpc.gNMIStub(channel)
                code = await _status(stub.Capabilities(gnmi_pb2.CapabilityRequest(), timeout=2))
                assert (code == grpc.StatusCode.OK) is ok
    finally:
        await sim.server.stop(0)

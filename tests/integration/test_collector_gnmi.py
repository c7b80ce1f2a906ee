"""The gNMI collector against real gRPC on loopback: the simulator, and a tiny misbehaving target."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import ipaddress
import time
from collections import Counter, defaultdict
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import grpc
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from pydantic import SecretStr
from pygnmi.spec.v080 import gnmi_pb2

from collector.config import PLAINTEXT, CollectorConfig, TlsConfig
from collector.gnmi import GnmiCollector, GnmiTuning
from collector.gnmi_stream import Backoff
from collector.gnmi_transport import ChannelError, H2Channel
from collector.records import LldpReading, PortReading, TargetState
from collector.targets import SwitchTarget
from fabric.model import FabricParams
from fabric.topology import build_aipod
from simulator.fabric_state import FabricState
from simulator.gnmi_server import GnmiTls, serve_gnmi
from simulator.runner import RunningSim, SimOptions, start_sim, stop_sim
from tests.support.waiting import until

LEAF = "lf-g1-r1"
SPINE = "sp-r1-1"
PARAMS = FabricParams(gpus=64, radix=16)
FAST = GnmiTuning(backoff_initial_s=0.2, backoff_max_s=1.0)
#: Our HTTP/2 client (the default) and grpc.aio (the fallback) must behave the same to a user.
BOTH_TRANSPORTS = pytest.mark.parametrize("transport", ["h2", "grpc"])
COUNTERS = (
    "in_octets",
    "out_octets",
    "in_unicast_pkts",
    "out_unicast_pkts",
    "in_errors",
    "in_discards",
    "in_fcs_errors",
    "carrier_transitions",
    "in_pause_frames",
    "out_pause_frames",
    "last_clear_ns",
)


class RecordingSink:
    """A Sink that keeps everything."""

    def __init__(self) -> None:
        self.ports: list[PortReading] = []
        self.lldp: list[LldpReading] = []
        self.states: list[tuple[float, str, TargetState, str | None]] = []
        self.invalid: Counter[tuple[str, str]] = Counter()

    async def put_ports(self, readings: Sequence[PortReading]) -> None:
        self.ports.extend(readings)

    async def put_lldp(self, readings: Sequence[LldpReading]) -> None:
        self.lldp.extend(readings)

    def set_state(self, switch: str, state: TargetState, detail: str | None = None) -> None:
        self.states.append((time.monotonic(), switch, state, detail))

    def count_invalid(self, switch: str, what: str, n: int = 1) -> None:
        self.invalid[(switch, what)] += n

    def state(self, switch: str) -> TargetState | None:
        return next((s for _, sw, s, _ in reversed(self.states) if sw == switch), None)

    def detail(self, switch: str) -> str | None:
        return next((d for _, sw, _, d in reversed(self.states) if sw == switch), None)

    def history(self, switch: str) -> list[TargetState]:
        return [s for _, sw, s, _ in self.states if sw == switch]


@contextlib.asynccontextmanager
async def collecting(
    targets: Sequence[SwitchTarget],
    sink: RecordingSink,
    interval_s: float = 1.0,
    tuning: GnmiTuning = FAST,
    transport: str = "h2",
) -> AsyncIterator[GnmiCollector]:
    config = CollectorConfig(gnmi_interval_s=interval_s, gnmi_transport=transport)
    collector = GnmiCollector(targets, sink, config, tuning=tuning)
    task = asyncio.create_task(collector.run())
    try:
        yield collector
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    assert task.cancelled()


def gnmi_target(switch: str, address: str, **kw: Any) -> SwitchTarget:
    """A gNMI target; plaintext unless ``tls`` is given (the simulator here serves plaintext)."""
    kw.setdefault("tls", PLAINTEXT)
    return SwitchTarget(
        switch=switch, protocol="gnmi", address=address, gnmi_target=kw.pop("gnmi_target", switch), **kw
    )


async def simulator(port: int = 0) -> tuple[RunningSim, str]:
    sim = await start_sim(SimOptions(params=PARAMS, gnmi=f"127.0.0.1:{port}", snmp=None, control=None))
    assert sim.gnmi is not None
    return sim, f"127.0.0.1:{sim.gnmi.port}"


def test_backoff_follows_grpcs_connection_backoff_schedule() -> None:
    backoff = Backoff()
    delays = [backoff.next() for _ in range(14)]
    for i, delay in enumerate(delays):
        base = min(1.6**i, 120.0)
        assert base * 0.8 <= delay <= base * 1.2
    assert max(delays) <= 144.0 and delays[-1] >= 96.0  # capped at 120 s, +/-20 %
    backoff.reset()
    assert 0.8 <= backoff.next() <= 1.2


# --- against the simulator ------------------------------------------------------------------


@BOTH_TRANSPORTS
async def test_whole_fabric_matches_the_simulator(transport: str) -> None:
    sim, address = await simulator()
    state = sim.state
    assert state is not None
    names = list(state.fabric.switches)
    sink = RecordingSink()
    try:
        async with collecting([gnmi_target(n, address) for n in names], sink, transport=transport) as collector:
            await until(lambda: all(sink.state(n) is TargetState.CONNECTED for n in names), 10, "all connected")
            ports = sum(len(state.ports(n)) for n in names)

            def sampled(k: int) -> bool:  # every port has k readings with counters
                seen = Counter((r.switch, r.port) for r in sink.ports if r.in_octets is not None)
                return len(seen) == ports and min(seen.values()) >= k

            await until(lambda: sampled(3), 5, "the dump and two samples")
            readings = list(sink.ports)
            lldp = list(sink.lldp)
            # before any fault: the view evaluated at each reading's timestamp is what was sent
            for r in readings:
                if r.in_octets is None:
                    continue
                want = next(p for p in state.ports(r.switch, r.time_ns) if p.name == r.port)
                assert {c: getattr(r, c) for c in COUNTERS} == {c: getattr(want, c) for c in COUNTERS}, r
                # status and speed only where the notification carried them (the dump; ON_CHANGE)
                assert r.oper_up in (None, want.oper_up) and r.speed_bps in (None, want.speed_bps)
                # PFC is a subscription of its own (/qos): in this reading or in one beside it
                assert r.pfc_rx in (None, want.pfc_rx) and r.pfc_tx in (None, want.pfc_tx), r
            per_port: dict[tuple[str, str], list[PortReading]] = defaultdict(list)
            for r in readings:
                per_port[(r.switch, r.port)].append(r)
            assert len(per_port) == ports
            for key, series in per_port.items():  # the dump said every port's status and speed
                assert any(r.oper_up is not None and r.speed_bps is not None for r in series), key
                assert any(r.pfc_rx is not None and r.pfc_tx is not None for r in series), key  # and PFC
            for series in per_port.values():
                octets = [r.in_octets for r in sorted(series, key=lambda r: r.time_ns) if r.in_octets is not None]
                assert len(octets) >= 3 and octets == sorted(octets)  # the dump + 2 samples, monotonic
            latest = {(r.switch, r.port): r.neighbors for r in lldp}
            for n in names:
                want_lldp: dict[str, set[tuple[str, str, str, str]]] = defaultdict(set)
                for nb in state.lldp(n):
                    want_lldp[nb.local_port].add((nb.system_name, nb.port_id, nb.port_description, nb.chassis_id))
                got = {
                    port: {(x.system_name, x.port_id, x.port_description, x.chassis_id) for x in nbs}
                    for (sw, port), nbs in latest.items()
                    if sw == n
                }
                assert got == dict(want_lldp)
            # a link goes down: ON_CHANGE, so within an interval, with no counters invented
            fault = state.apply({"kind": "link_down", "switch": LEAF})
            await until(  # within an interval
                lambda: any(r.switch == LEAF and r.port == fault.port and r.oper_up is False for r in sink.ports),
                1.0,
                "oper_up False",
            )
            assert collector.stats.values > 0 and not sink.invalid and collector.stats.reconnects == 0
        assert set(sink.history(LEAF)) == {TargetState.CONNECTING, TargetState.CONNECTED}
    finally:
        await stop_sim(sim)


async def test_simulator_restart_and_switch_reboot_resubscribe() -> None:
    sim, address = await simulator()
    port = int(address.rpartition(":")[2])
    sink = RecordingSink()
    try:
        async with collecting([gnmi_target(LEAF, address), gnmi_target(SPINE, address)], sink) as collector:
            await until(lambda: sink.state(LEAF) is TargetState.CONNECTED, 10, "connected")
            await stop_sim(sim)
            await until(lambda: sink.state(LEAF) is TargetState.UNREACHABLE, 5, "unreachable")
            await asyncio.sleep(1.0)  # a few failed attempts, backing off
            sim, _ = await simulator(port)
            back = time.time_ns()
            await until(lambda: sink.state(LEAF) is TargetState.CONNECTED, 8, "connected again")
            await until(lambda: any(r.switch == LEAF and r.time_ns > back for r in sink.ports), 3, "new readings")
            assert collector.stats.reconnects >= 2
            assert sink.history(LEAF)[-2:] == [TargetState.UNREACHABLE, TargetState.CONNECTED]

            # a rebooted switch ends its stream (UNAVAILABLE); the collector resubscribes after the boot
            assert sim.state is not None
            before = max(r.in_octets or 0 for r in sink.ports if r.switch == LEAF)
            sim.state.apply({"kind": "reboot", "switch": LEAF, "boot_s": 1.0})
            rebooted = time.time_ns()
            await until(lambda: sink.state(LEAF) is TargetState.UNREACHABLE, 3, "stream ended")
            await until(lambda: sink.state(LEAF) is TargetState.CONNECTED, 8, "resubscribed")
            await until(
                lambda: any(r.switch == LEAF and r.time_ns > rebooted and r.in_octets is not None for r in sink.ports),
                3,
                "readings after the reboot",
            )
            after = [r for r in sink.ports if r.switch == LEAF and r.time_ns > rebooted and r.in_octets is not None]
            assert max(r.in_octets or 0 for r in after) < before  # counters restarted from 0
            assert sink.state(SPINE) is TargetState.CONNECTED
    finally:
        await stop_sim(sim)


async def test_unreachable_switch_goes_stale_never_zero_and_recovers() -> None:
    sim, address = await simulator()
    assert sim.state is not None
    sink = RecordingSink()
    try:
        async with collecting([gnmi_target(LEAF, address)], sink):
            await until(lambda: sink.state(LEAF) is TargetState.CONNECTED, 10, "connected")
            await until(lambda: len({r.time_ns for r in sink.ports}) >= 2, 3, "a sample")
            fault = sim.state.apply({"kind": "switch_unreachable", "switch": LEAF})
            silenced = time.time_ns()
            started = time.monotonic()
            await until(lambda: sink.state(LEAF) is TargetState.STALE, 6, "stale")
            took = time.monotonic() - started
            assert 2.0 <= took <= 4.5, took  # 3 intervals of 1 s, checked 4 times an interval
            assert "no update" in (sink.detail(LEAF) or "")
            assert not [r for r in sink.ports if r.time_ns > silenced + 100_000_000]  # nothing invented
            sim.state.clear(fault.id)
            cleared = time.time_ns()
            await until(lambda: sink.state(LEAF) is TargetState.CONNECTED, 3, "connected again")
            await until(lambda: any(r.time_ns > cleared and r.in_octets for r in sink.ports), 3, "data again")
    finally:
        await stop_sim(sim)


# --- a target that misbehaves ---------------------------------------------------------------


def _path(text: str, target: str = "") -> Any:
    p = gnmi_pb2.Path(target=target)
    for part in [x for x in text.split("/") if x]:
        name, _, key = part.partition("[")
        p.elem.add(name=name, key=dict([key.rstrip("]").split("=", 1)]) if key else {})
    return p


def _response(ts: int, updates: list[tuple[str, dict[str, Any]]]) -> bytes:
    note = gnmi_pb2.Notification(
        timestamp=ts,
        prefix=_path("/interfaces/interface[name=swp1]", "bad"),
        update=[gnmi_pb2.Update(path=_path(p), val=gnmi_pb2.TypedValue(**v)) for p, v in updates],
    )
    data: bytes = gnmi_pb2.SubscribeResponse(update=note).SerializeToString()
    return data


async def _misbehaving_subscribe(request_iterator: Any, context: Any) -> None:
    await context.read()
    ts = time.time_ns()
    await context.write(
        _response(
            ts,
            [
                ("state/counters/in-octets", {"uint_val": 100}),
                ("state/counters/out-octets", {"string_val": "abc"}),  # a string for a number
                ("state/counters/in-errors", {"bool_val": True}),  # the wrong type
                ("state/counters/frobnicate", {"uint_val": 5}),  # an unknown path
                ("state/counters/in-discards", {"int_val": -3}),  # negative
                ("state/counters/in-unicast-pkts", {"string_val": "42"}),  # fine: SONiC-style string
            ],
        )
    )
    await context.write(_response(ts, [("state/description", {"string_val": "x" * 200_000})]))  # huge
    await context.write(b"\x0a\x05\xff\xff")  # not a message
    await context.write(gnmi_pb2.SubscribeResponse(sync_response=True).SerializeToString())
    await asyncio.sleep(0.2)
    await context.write(_response(ts + 10**9, [("state/counters/in-octets", {"uint_val": 200})]))
    await asyncio.sleep(3600)  # keep the stream open


async def test_malformed_updates_are_skipped_and_counted_and_the_stream_survives() -> None:
    server = grpc.aio.server()
    server.add_generic_rpc_handlers(
        (
            grpc.method_handlers_generic_handler(
                "gnmi.gNMI",
                {
                    "Subscribe": grpc.stream_stream_rpc_method_handler(
                        _misbehaving_subscribe,
                        request_deserializer=gnmi_pb2.SubscribeRequest.FromString,
                        response_serializer=None,
                    )
                },
            ),
        )
    )
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    sink = RecordingSink()
    tuning = GnmiTuning(backoff_initial_s=0.2, backoff_max_s=1.0, max_message_bytes=64_000)
    try:
        async with collecting([gnmi_target("bad", f"127.0.0.1:{port}")], sink, tuning=tuning) as collector:
            await until(lambda: len(sink.ports) >= 2, 5, "two readings")
            await asyncio.sleep(0.3)
            first, second = sink.ports[:2]
            assert (first.in_octets, first.in_unicast_pkts) == (100, 42)
            assert (first.out_octets, first.in_errors, first.in_discards) == (None, None, None)
            assert second.in_octets == 200
            kinds = {what: n for (sw, what), n in sink.invalid.items() if sw == "bad"}
            assert kinds == {
                "not_a_number": 1,
                "wrong_type": 1,
                "unknown_path": 1,
                "negative": 1,
                "oversize": 1,
                "malformed": 1,
            }
            assert sink.state("bad") is TargetState.CONNECTED and collector.stats.reconnects == 0
    finally:
        await server.stop(0)


# --- TLS and credentials --------------------------------------------------------------------


def _cert(name: str, issuer: tuple[Any, Any] | None = None) -> tuple[bytes, bytes, tuple[Any, Any]]:
    """(cert PEM, key PEM, (cert, key)): self-signed (a CA), or signed by ``issuer``."""
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    issuer_name, issuer_key = (issuer[0].subject, issuer[1]) if issuer else (subject, key)
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=issuer is None, path_length=None), critical=True)
        .add_extension(
            x509.SubjectAlternativeName([x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .sign(issuer_key, hashes.SHA256())
    )
    pem_key = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return cert.public_bytes(serialization.Encoding.PEM), pem_key, (cert, key)


@pytest.fixture(scope="module")
def view() -> FabricState:
    return FabricState(build_aipod(PARAMS))


@BOTH_TRANSPORTS
async def test_tls_right_ca_wrong_ca_and_plaintext(tmp_path: Path, view: FabricState, transport: str) -> None:
    cert, key, _ = _cert("localhost")
    stranger, _, _ = _cert("someone else")
    (tmp_path / "ca.pem").write_bytes(cert)
    (tmp_path / "other.pem").write_bytes(stranger)
    server = await serve_gnmi(view, "127.0.0.1", 0, tls=GnmiTls(cert, key))
    address = f"127.0.0.1:{server.port}"
    sink = RecordingSink()
    targets = [
        gnmi_target("good", address, gnmi_target=LEAF, tls=TlsConfig(enabled=True, ca_file=tmp_path / "ca.pem")),
        gnmi_target("wrong-ca", address, gnmi_target=LEAF, tls=TlsConfig(enabled=True, ca_file=tmp_path / "other.pem")),
        gnmi_target("plaintext", address, gnmi_target=LEAF),
        gnmi_target("no-ca", address, gnmi_target=LEAF, tls=TlsConfig(enabled=True, ca_file=tmp_path / "missing.pem")),
    ]
    try:
        async with collecting(targets, sink, transport=transport):
            await until(lambda: sink.state("good") is TargetState.CONNECTED, 10, "TLS connected")
            await until(lambda: sink.state("wrong-ca") is TargetState.ERROR, 5, "wrong CA refused")
            assert "TLS" in (sink.detail("wrong-ca") or "") and "CERTIFICATE_VERIFY_FAILED" in (
                sink.detail("wrong-ca") or ""
            )
            await until(lambda: sink.state("plaintext") in (TargetState.UNREACHABLE, TargetState.ERROR), 5, "plaintext")
            assert "TLS" in (sink.detail("plaintext") or "")
            await until(lambda: sink.state("no-ca") is TargetState.ERROR, 5, "missing CA file")
            assert "missing.pem unreadable" in (sink.detail("no-ca") or "")
            await asyncio.sleep(0.5)
            assert TargetState.CONNECTED not in sink.history("wrong-ca") + sink.history("plaintext")
            assert any(r.switch == "good" for r in sink.ports)
    finally:
        await server.stop(0)


@BOTH_TRANSPORTS
async def test_mutual_tls(tmp_path: Path, view: FabricState, transport: str) -> None:
    ca_pem, _, ca = _cert("fabricmon test CA")
    server_cert, server_key, _ = _cert("localhost", issuer=ca)
    client_cert, client_key, _ = _cert("collector", issuer=ca)
    for name, data in (("ca.pem", ca_pem), ("client.pem", client_cert), ("client.key", client_key)):
        (tmp_path / name).write_bytes(data)
    server = await serve_gnmi(view, "127.0.0.1", 0, tls=GnmiTls(server_cert, server_key, client_ca=ca_pem))
    address = f"127.0.0.1:{server.port}"
    mtls = TlsConfig(
        enabled=True, ca_file=tmp_path / "ca.pem", cert_file=tmp_path / "client.pem", key_file=tmp_path / "client.key"
    )
    sink = RecordingSink()
    targets = [
        gnmi_target("mtls", address, gnmi_target=LEAF, tls=mtls),
        gnmi_target(
            "no-client-cert", address, gnmi_target=LEAF, tls=TlsConfig(enabled=True, ca_file=tmp_path / "ca.pem")
        ),
    ]
    try:
        async with collecting(targets, sink, transport=transport):
            await until(lambda: sink.state("mtls") is TargetState.CONNECTED, 10, "mTLS connected")
            await until(
                lambda: sink.state("no-client-cert") in (TargetState.ERROR, TargetState.UNREACHABLE), 5, "refused"
            )
            assert TargetState.CONNECTED not in sink.history("no-client-cert")
    finally:
        await server.stop(0)


async def test_an_encrypted_client_key_is_a_clear_error_and_never_a_passphrase_prompt(tmp_path: Path) -> None:
    # OpenSSL would ask for the passphrase on the terminal, freezing the event loop (every switch)
    ca_pem, _, ca = _cert("fabricmon test CA")
    client_cert, _, (_, client_key) = _cert("collector", issuer=ca)
    encrypted = client_key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.BestAvailableEncryption(b"pw")
    )
    for name, data in (("ca.pem", ca_pem), ("client.pem", client_cert), ("client.key", encrypted)):
        (tmp_path / name).write_bytes(data)
    tls = TlsConfig(
        enabled=True, ca_file=tmp_path / "ca.pem", cert_file=tmp_path / "client.pem", key_file=tmp_path / "client.key"
    )
    with pytest.raises(ChannelError, match="encrypted"):
        H2Channel("127.0.0.1:57400", tls, FAST)


@BOTH_TRANSPORTS
async def test_wrong_password_is_an_error_state(view: FabricState, transport: str) -> None:
    server = await serve_gnmi(view, "127.0.0.1", 0, credentials=("admin", "s3cret"))
    address = f"127.0.0.1:{server.port}"
    sink = RecordingSink()
    creds = {"username": "admin", "allow_plaintext_credentials": True}  # a plaintext server, on purpose
    targets = [
        gnmi_target("right", address, gnmi_target=LEAF, password=SecretStr("s3cret"), **creds),
        gnmi_target("wrong", address, gnmi_target=LEAF, password=SecretStr("nope"), **creds),
        gnmi_target("unknown", address, gnmi_target="no-such-switch", password=SecretStr("s3cret"), **creds),
    ]
    try:
        async with collecting(targets, sink, transport=transport):
            await until(lambda: sink.state("right") is TargetState.CONNECTED, 10, "connected")
            await until(lambda: sink.state("wrong") is TargetState.ERROR, 5, "refused")
            assert "UNAUTHENTICATED" in (sink.detail("wrong") or "") and "nope" not in (sink.detail("wrong") or "")
            await until(lambda: sink.state("unknown") is TargetState.ERROR, 5, "unknown target")
            assert "NOT_FOUND" in (sink.detail("unknown") or "")
    finally:
        await server.stop(0)


@pytest.mark.slow
async def test_poll_mode_collects_every_interval() -> None:
    sim, address = await simulator()
    sink = RecordingSink()
    try:
        collector = GnmiCollector(
            [gnmi_target(LEAF, address)], sink, CollectorConfig(gnmi_interval_s=1.0, gnmi_mode="poll"), tuning=FAST
        )
        task = asyncio.create_task(collector.run())
        try:
            await until(lambda: len({r.time_ns for r in sink.ports if r.in_octets}) >= 3, 6, "three polls")
            assert sink.state(LEAF) is TargetState.CONNECTED
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
    finally:
        await stop_sim(sim)

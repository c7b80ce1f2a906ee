"""The simulator's sent-ledger on real Subscribe sessions (a fake gRPC context), and the stored-time rule
the comparison shares with the collector."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pygnmi.spec.v080 import gnmi_pb2

from collector.counters import _utc
from collector.records import COUNTER_FIELDS as COLLECTOR_COUNTERS
from fabric.model import FabricParams
from fabric.topology import build_aipod
from simulator.fabric_state import FabricState
from simulator.gnmi_shapes import make_shapes
from simulator.gnmi_subscribe import Stats, SubscribeSession
from simulator.gnmi_wire import Renderer
from simulator.ledger import COUNTER_FIELDS, SentLedger
from simulator.nos import Devices, Nos
from simulator.runner import SimOptions
from tests.support.ledger import COUNTER_COLUMNS, stored_time, stored_us

FABRIC = build_aipod(FabricParams(gpus=64, radix=16))
LEAF = "lf-g1-r1"
T0 = 1_790_000_000_123_456_789
SAMPLE, ON_CHANGE = 2, 1


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> int:
        return self.now


class Context:
    """What a Subscribe session needs of grpc.aio's context: ``write`` (failing after ``limit``)."""

    def __init__(self, limit: int | None = None) -> None:
        self.written: list[bytes] = []
        self.limit = limit

    async def write(self, message: bytes) -> None:
        if self.limit is not None and len(self.written) >= self.limit:
            raise ConnectionResetError("client went away")
        self.written.append(message)


def request(*paths: tuple[str, int], target: str = LEAF) -> Any:
    subs = []
    for text, mode in paths:
        path = gnmi_pb2.Path(elem=[gnmi_pb2.PathElem(name=n) for n in text.strip("/").split("/")])
        subs.append(gnmi_pb2.Subscription(path=path, mode=mode, sample_interval=10**9 if mode == SAMPLE else 0))
    sl = gnmi_pb2.SubscriptionList(
        prefix=gnmi_pb2.Path(target=target), subscription=subs, mode=0, encoding=gnmi_pb2.Encoding.PROTO
    )
    return gnmi_pb2.SubscribeRequest(subscribe=sl)


@pytest.fixture
def clock() -> Iterator[Clock]:
    yield Clock()


def session(
    clock: Clock, ledger: SentLedger, context: Context, *paths: tuple[str, int], nos: Nos = Nos.OPENCONFIG
) -> SubscribeSession:
    view = FabricState(FABRIC, seed=1, clock=clock)
    devices = Devices(tuple(FABRIC.switches), (nos,))
    return SubscribeSession(
        view,
        make_shapes(Renderer()),
        devices,
        Stats(),
        context,
        request(*paths),
        min_interval_ns=10**9,
        send_timeout_s=5,
        ledger=ledger,
    )


COUNTERS = ("/interfaces/interface/state/counters", SAMPLE)
PAUSES = ("/interfaces/interface/ethernet/state/counters", SAMPLE)
PFC = ("/qos/interfaces/interface/switch-priority/state/counters", SAMPLE)
STATUS = ("/interfaces/interface/state/oper-status", ON_CHANGE)


def test_counter_leaves_are_the_collectors_counter_columns() -> None:
    assert set(COLLECTOR_COUNTERS) == COUNTER_FIELDS == set(COUNTER_COLUMNS)


async def test_a_dump_records_one_sample_per_interface_at_its_timestamp(clock: Clock) -> None:
    ledger, ctx = SentLedger(), Context()
    s = session(clock, ledger, ctx, COUNTERS, PFC, STATUS)
    await s._send(s._dump(s._snapshot()))
    samples = ledger.samples()
    assert set(samples) == {(LEAF, p.name) for p in FABRIC.ports(LEAF)}  # swp1 ... swp16, as stored
    assert all(times == [T0] for times in samples.values())
    assert ledger.messages == len(ctx.written)
    assert ledger.resends == {}


async def test_state_and_pfc_alone_are_not_samples(clock: Clock) -> None:
    ledger = SentLedger()
    s = session(clock, ledger, Context(), PFC, STATUS)
    await s._send(s._dump(s._snapshot()))
    assert ledger.messages > 16 and ledger.samples() == {}


async def test_pause_frames_alone_are_samples(clock: Clock) -> None:
    ledger = SentLedger()
    s = session(clock, ledger, Context(), PAUSES)
    await s._send(s._dump(s._snapshot()))
    assert len(ledger.samples()) == 16


async def test_the_same_time_sent_again_is_kept_once_and_counted(clock: Clock) -> None:
    ledger = SentLedger()
    s = session(clock, ledger, Context(), COUNTERS)
    await s._send(s._dump(s._snapshot()))
    await s._send(s._dump(s._snapshot()))  # the clock did not move: a resubscribe at the same instant
    clock.now += 10**9
    await s._send(s._dump(s._snapshot()))
    assert all(times == [T0, T0 + 10**9] for times in ledger.samples().values())
    assert sum(ledger.resends.values()) == 16 and set(ledger.resends.values()) == {1}
    snap = ledger.snapshot()
    assert snap.total == 32 and snap.resent == 16 and snap.switches() == {LEAF}


async def test_eos_containers_of_one_instant_are_one_sample(clock: Clock) -> None:
    ledger = SentLedger()
    s = session(clock, ledger, Context(), COUNTERS, PAUSES, nos=Nos.EOS)
    await s._send(s._dump(s._snapshot()))
    assert ledger.messages > 32  # one Notification per container
    assert len(ledger.samples()) == 16 and ledger.resends == {}


async def test_only_what_was_written_is_recorded(clock: Clock) -> None:
    ledger, ctx = SentLedger(), Context(limit=5)
    s = session(clock, ledger, ctx, COUNTERS)
    with pytest.raises(ConnectionResetError):
        await s._send(s._dump(s._snapshot()))
    assert len(ledger.samples()) == 5 and ledger.messages == 5


async def test_freeze_stops_recording(clock: Clock) -> None:
    ledger = SentLedger()
    s = session(clock, ledger, Context(), COUNTERS)
    await s._send(s._dump(s._snapshot()))
    frozen = ledger.freeze()
    clock.now += 10**9
    await s._send(s._dump(s._snapshot()))
    assert ledger.frozen and ledger.snapshot() == frozen and frozen.total == 16
    with pytest.raises(TypeError):
        frozen.samples[(LEAF, "swp1")] = ()  # type: ignore[index]


def test_ledger_is_refused_for_shapes_it_cannot_decode() -> None:
    for nos in (Nos.XR, Nos.SONIC):
        with pytest.raises(ValueError, match=f"not {nos.value}"):
            SimOptions(ledger=True, nos=(Nos.OPENCONFIG, nos))
    SimOptions(ledger=True, nos=(Nos.OPENCONFIG, Nos.CUMULUS, Nos.EOS))
    SimOptions(nos=(Nos.XR,))  # no ledger: anything goes


async def test_no_ledger_no_recording(clock: Clock) -> None:
    ctx = Context()
    view = FabricState(FABRIC, seed=1, clock=clock)
    s = SubscribeSession(
        view, make_shapes(Renderer()), None, Stats(), ctx, request(COUNTERS), min_interval_ns=10**9, send_timeout_s=5
    )
    await s._send(s._dump(s._snapshot()))
    assert s._ledger is None and len(ctx.written) == 17  # 16 interfaces + sync_response


# --- stored times -----------------------------------------------------------------------------


@given(st.integers(1_000_000_000 * 10**9, 4_000_000_000 * 10**9))
def test_stored_time_is_the_collectors(ns: int) -> None:
    assert stored_time(ns) == _utc(ns)
    assert stored_us(ns) in (ns // 1000, ns // 1000 + 1)


def test_stored_time_rounds_through_a_float() -> None:
    base = 1_790_000_000_000_000_000  # 2026-09-21 14:13:20 UTC; a float step here is ~238 ns
    assert stored_time(base + 900) == datetime(2026, 9, 21, 14, 13, 20, 1, tzinfo=UTC)  # not truncated
    # 600 ns past the microsecond: integer rounding says up, the float (…0.000000477 s) says down.
    assert stored_us(base + 600) == base // 1000 != (base + 600 + 500) // 1000
    assert stored_us(base + 700) == base // 1000 + 1

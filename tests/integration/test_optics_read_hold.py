"""A link-health stream reads at most every ``GnmiTuning.optics_read_every_s`` (real gRPC on loopback).

A switch writes its minute of FEC and DOM a message at a time; read as they came, each trickle
was a wake-up of the stream, its flusher and the hand-off to the writers. Held, the stream reads
what came meanwhile in one batch: the samples are the same, every one of them, in fewer
hand-offs. Here the simulator samples FEC and DOM every second (its least interval), so a hold of
2 s gathers two samples per read; without it, each sample is its own hand-off or more.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from collections.abc import Sequence

import pytest

from collector.config import PLAINTEXT, CollectorConfig
from collector.gnmi import GnmiCollector, GnmiTuning
from collector.targets import SwitchTarget
from fabric.model import FabricParams
from simulator.runner import SimOptions, start_sim, stop_sim
from store.dom import DomSample
from store.fec import FecSample
from tests.support.sinks import NullSink
from tests.support.waiting import until

pytestmark = pytest.mark.asyncio(loop_scope="function")

LEAF = "lf-g1-r1"
INTERVAL_S = 1.0
WINDOW_S = 7.0
HOLD_S = 2.0


class OpticsRecorder(NullSink):
    """A sink that keeps the link-health samples and counts its hand-offs."""

    def __init__(self) -> None:
        self.fec: list[FecSample] = []
        self.dom: list[DomSample] = []
        self.handoffs = 0

    async def put_optics(self, fec: Sequence[FecSample], dom: Sequence[DomSample]) -> None:
        self.handoffs += 1
        self.fec.extend(fec)
        self.dom.extend(dom)

    def count_invalid(self, switch: str, what: str, n: int = 1) -> None:
        raise AssertionError(f"{switch}: {n} invalid ({what})")


async def _collect(
    address: str, hold_s: float, window_s: float = WINDOW_S, transport: str = "h2"
) -> tuple[OpticsRecorder, float]:
    """The leaf's link health for ``window_s`` after its first DOM sample, then the collector
    cancelled; the sink and the window's first sample time (s)."""
    sink = OpticsRecorder()
    target = SwitchTarget(switch=LEAF, protocol="gnmi", address=address, gnmi_target=LEAF, tls=PLAINTEXT)
    config = CollectorConfig(
        gnmi_interval_s=1.0,
        dom_interval_s=INTERVAL_S,
        fec_interval_s=INTERVAL_S,
        thresholds_interval_s=1.0,
        gnmi_transport=transport,
    )
    tuning = GnmiTuning(backoff_initial_s=0.2, backoff_max_s=1.0, optics_read_every_s=hold_s)
    collector = GnmiCollector([target], sink, config, tuning=tuning)
    task = asyncio.create_task(collector.run())
    try:
        await until(lambda: bool(sink.dom), 20.0, "the first DOM sample")
        start, handoffs = sink.dom[-1].time.timestamp(), sink.handoffs
        await asyncio.sleep(window_s)
        sink.handoffs -= handoffs
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    return sink, start


def _complete(sink: OpticsRecorder, start: float, end: float) -> Counter[str]:
    """Per port, the DOM sample times within [start, end]; each port must have every one of them."""
    times: dict[str, set[float]] = {}
    for s in sink.dom:
        if start <= s.time.timestamp() <= end:
            times.setdefault(s.port, set()).add(s.time.timestamp())
    union = set().union(*times.values())
    assert all(t == union for t in times.values()), "a port lost a DOM sample"
    fec = {(s.port, s.time.timestamp()) for s in sink.fec}
    assert len(fec) == len(sink.fec), "a FEC sample came twice"
    return Counter({port: len(t) for port, t in times.items()})


async def test_a_held_stream_reads_every_sample_in_fewer_handoffs() -> None:
    sim = await start_sim(
        SimOptions(params=FabricParams(gpus=64, radix=16), gnmi="127.0.0.1:0", snmp=None, control=None)
    )
    try:
        assert sim.gnmi is not None
        address = f"127.0.0.1:{sim.gnmi.port}"
        held, start = await _collect(address, HOLD_S)
        counts = _complete(held, start, start + WINDOW_S - HOLD_S - 1.0)
        # every port, every sample of the window (but its end), whatever the hold
        assert min(counts.values()) >= WINDOW_S - HOLD_S - 2, counts
        # at most a read per hold, and the hand-off at the stop: fewer than the samples
        assert held.handoffs <= WINDOW_S / HOLD_S + 2 < WINDOW_S / INTERVAL_S, held.handoffs
        eager, start = await _collect(address, 0.0)
        _complete(eager, start, start + WINDOW_S - 2.0)
        assert eager.handoffs >= WINDOW_S / INTERVAL_S - 1 > held.handoffs, (eager.handoffs, held.handoffs)
    finally:
        await stop_sim(sim)


async def test_what_came_during_a_hold_is_handed_over_when_the_collector_stops() -> None:
    """Stopped 3 s into a 10 s hold, the stream decodes what it has not read yet: the samples of
    those seconds are handed over by the drain, not left in the stream's buffer."""
    sim = await start_sim(
        SimOptions(params=FabricParams(gpus=64, radix=16), gnmi="127.0.0.1:0", snmp=None, control=None)
    )
    try:
        assert sim.gnmi is not None
        sink, start = await _collect(f"127.0.0.1:{sim.gnmi.port}", 10.0, window_s=3.5)
        later = {s.time.timestamp() for s in sink.dom if s.time.timestamp() > start + 0.5}
        assert len(later) >= 2, sorted(later)  # read only at the stop
        counts = _complete(sink, start + 0.5, max(later))
        assert len(set(counts.values())) == 1 and len(counts) == 16, counts
    finally:
        await stop_sim(sim)


async def test_grpc_aio_which_reads_a_message_at_a_time_is_never_held() -> None:
    """The grpc.aio fallback gives one message per read: held, it would fall behind the switch."""
    sim = await start_sim(
        SimOptions(params=FabricParams(gpus=64, radix=16), gnmi="127.0.0.1:0", snmp=None, control=None)
    )
    try:
        assert sim.gnmi is not None
        sink, start = await _collect(f"127.0.0.1:{sim.gnmi.port}", 10.0, window_s=3.5, transport="grpc")
        later = {s.time.timestamp() for s in sink.dom if s.time.timestamp() > start + 0.5}
        assert len(later) >= 2, sorted(later)
        counts = _complete(sink, start + 0.5, max(later) - 1.0)
        assert len(counts) == 16 and min(counts.values()) >= 1, counts
    finally:
        await stop_sim(sim)

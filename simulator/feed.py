"""Read a simulated fabric's state straight into a collector Sink, at exact instants.

For tests and benchmarks of what comes after the collectors: the protocol layers have their
own end-to-end tests, and analyzer checks are easier to pin down when data arrives at chosen
instants. What ``FabricState`` reports goes through the same :class:`~collector.records.Sink`
(usually the collectors' :class:`~collector.pipeline.Pipeline`), so rates, link events and LLDP
tables are derived exactly as in production.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from collector.optics_decode import Invalid, OpenConfigOptics
from collector.records import LldpNeighborReading, LldpReading, PortReading, Sink, TargetState
from simulator.fabric_state import FabricState
from simulator.gnmi_optics import openconfig_leaves
from simulator.view import PortCounters
from store.db import Connection
from store.dom import write_dom
from store.fec import write_fec


def reading(switch: str, p: PortCounters, now_ns: int) -> PortReading:
    return PortReading(
        switch, p.name, now_ns, oper_up=p.oper_up, speed_bps=p.speed_bps,
        in_octets=p.in_octets, out_octets=p.out_octets, in_unicast_pkts=p.in_unicast_pkts,
        out_unicast_pkts=p.out_unicast_pkts, in_multicast_pkts=p.in_multicast_pkts,
        out_multicast_pkts=p.out_multicast_pkts, in_broadcast_pkts=p.in_broadcast_pkts,
        out_broadcast_pkts=p.out_broadcast_pkts, in_errors=p.in_errors, out_errors=p.out_errors,
        in_discards=p.in_discards, out_discards=p.out_discards, in_fcs_errors=p.in_fcs_errors,
        carrier_transitions=p.carrier_transitions, in_pause_frames=p.in_pause_frames,
        out_pause_frames=p.out_pause_frames, pfc_rx=p.pfc_rx, pfc_tx=p.pfc_tx, last_clear_ns=p.last_clear_ns,
    )  # fmt: skip


async def feed(state: FabricState, pipeline: Sink, now_ns: int, *, lldp: bool = True) -> None:
    """Every port of every reachable switch at ``now_ns``, and (optionally) every LLDP table."""
    for name in state.switch_names():
        info = state.switch(name)
        if info is None or not info.reachable:
            continue
        await pipeline.put_ports([reading(name, p, now_ns) for p in state.ports(name, now_ns)])
        if lldp:
            tables: dict[str, list[LldpNeighborReading]] = {p.name: [] for p in state.ports(name, now_ns)}
            for n in state.lldp(name):
                tables.setdefault(n.local_port, []).append(
                    LldpNeighborReading(n.system_name, n.port_id, n.port_description, n.chassis_id)
                )
            await pipeline.put_lldp([LldpReading(name, port, now_ns, tuple(ns)) for port, ns in tables.items()])


async def feed_rounds(
    state: FabricState,
    sink: Sink,
    clock: list[int],
    rounds: int,
    faults: Sequence[Mapping[str, Any]] = (),
    *,
    step_s: float = 10.0,
    lldp_every_round: bool = True,
    progress: Callable[[int], None] | None = None,
) -> int:
    """``rounds`` sampling rounds ``step_s`` apart, every switch marked connected first.

    ``clock`` is the state's clock (a one-element list of Unix ns, advanced here). ``faults``
    are applied after the first round, so they show as transitions. Returns the last instant.
    """
    for name in state.switch_names():
        sink.set_state(name, TargetState.CONNECTED)
    for i in range(rounds):
        clock[0] += int(step_s * 1e9)
        state.tick(clock[0])
        if i == 1:
            for fault in faults:
                state.apply(fault)
        await feed(state, sink, clock[0], lldp=lldp_every_round or i == 0)
        if progress is not None:
            progress(i)
    return clock[0]


class OpticsFeed:
    """Every reachable switch's transceivers and FEC, as OpenConfig leaves through the collector's
    decoder (one per switch: it keeps the device's interface ↔ transceiver map), into the tables."""

    def __init__(self, state: FabricState, invalid: Invalid | None = None) -> None:
        self.state = state
        self._invalid: Invalid = invalid or (lambda kind, n: None)
        self._decoders: dict[str, OpenConfigOptics] = {}

    async def feed(self, conn: Connection, now_ns: int) -> int:
        """Write one sample of every optic at ``now_ns``; return the DOM rows written."""
        at = datetime.fromtimestamp(now_ns / 1e9, tz=UTC)
        written = 0
        for name in self.state.switch_names():
            info = self.state.switch(name)
            if info is None or not info.reachable:
                continue
            dec = self._decoders.get(name)
            if dec is None:
                dec = self._decoders[name] = OpenConfigOptics(name, self._invalid)
            leaves = [leaf for r in self.state.transceivers(name, now_ns) for leaf in openconfig_leaves(r)]
            batch = dec.decode(at, leaves)
            await write_fec(conn, batch.fec)
            written += await write_dom(conn, batch.dom)
        return written

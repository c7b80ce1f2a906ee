"""The simulated network as its counters see it: ports, cables, flows, and who carries what.

A :class:`SimPort` per switch port; a :class:`Wire` per cable, shared by both ends of a
switch-to-switch cable, so oper status, speed, carrier transitions and last change are one
value seen from two sides; two :class:`~simulator.traffic.Flow` objects per wire, shared the
same way (one end's tx flow is the other end's rx flow). A leaf's down port owns its wire and
flows whatever server is plugged into it, so a miswire changes the LLDP neighbour, never the
port's counters. Uncabled ports get a wire and flows too (dark until a miswire lands there).

:class:`Wiring` holds them, re-rates flows when cables or faults change (:meth:`Wiring.settle`:
changed leaves first, then the spines they feed) and evaluates a switch's counters at an
instant (:meth:`Wiring.evaluate`). Fault effects mutate it through :meth:`Wiring.refresh`,
:attr:`Wiring.storms` and :attr:`Wiring.bursts`.
"""

from __future__ import annotations

import functools
import random

from fabric.model import Endpoint, Fabric, LinkKind, Role
from fabric.naming import if_index
from simulator.traffic import (
    ROCE_PRIORITY,
    Flow,
    Linear,
    Phase,
    TrafficParams,
    leaf_rates,
    link_capacity,
    pause_share,
    spine_up_rates,
)
from simulator.view import LLDP_PORT_IFNAME, LLDP_PORT_LOCAL, LLDP_PORT_MAC, LldpNeighbor, PortCounters

#: Share of a storm's pause rate that the paused switch sends on each of its other live ports.
PFC_SPREAD = 0.25
_ZERO8 = (0,) * 8
_GBPS = 1_000_000_000


class SimSwitch:
    """One simulated switch; ``booting`` / ``unreachable`` hold the ids of the faults causing it."""

    __slots__ = ("boot_ns", "booting", "by_name", "cleared_ns", "clock_steps", "downs", "name", "nos", "ports", "role",
                 "snmp_delay", "unreachable", "ups")  # fmt: skip

    def __init__(self, name: str, role: Role, boot_ns: int, nos: str | None = None) -> None:
        self.name, self.role, self.boot_ns, self.nos = name, role, boot_ns, nos
        self.ports: list[SimPort] = []
        self.by_name: dict[str, SimPort] = {}
        self.downs: list[SimPort] = []
        self.ups: list[SimPort] = []
        self.booting: set[str] = set()
        self.unreachable: set[str] = set()
        self.snmp_delay: dict[str, float] = {}  # fault id -> seconds its SNMP answers are late
        self.cleared_ns = 0  # the last ``clear counters`` (Unix ns), 0: none
        #: (fault id, since) -> (since, until or None while in force, ns its clock was stepped by): kept
        #: once over, for the times stamped during it
        self.clock_steps: dict[tuple[str, int], tuple[int, int | None, int]] = {}


class SimPort:
    """One switch port; ``base`` holds its raw counters at the last reboot (subtracted on read).

    ``removed`` holds the ids of the faults that pulled its optic (the interface is not present).
    """

    __slots__ = ("base", "desc", "fin", "fout", "if_index", "name", "removed", "sw", "wire")

    def __init__(self, sw: SimSwitch, name: str, if_index: int) -> None:
        self.sw, self.if_index, self.name = sw, if_index, name
        self.desc = ""
        self.removed: set[str] = set()
        self.base: PortCounters | None = None
        self.wire: Wire
        self.fin: Flow
        self.fout: Flow

    def peer(self) -> SimPort | None:
        """The switch port at the other end of the cable, if it is a switch."""
        wire = self.wire
        return wire.b if wire.a is self else wire.a


class Wire:
    """A cable at ``a`` (a switch port); ``b`` is the other switch end, or ``server`` a NIC."""

    __slots__ = ("a", "b", "caps", "carrier", "design_bps", "down", "last_change", "load", "oper", "server",
                 "speed_bps")  # fmt: skip

    def __init__(self, a: SimPort, b: SimPort | None, server: Endpoint | None, speed_bps: int, t0: int) -> None:
        self.a, self.b, self.server = a, b, server
        self.design_bps = self.speed_bps = speed_bps
        self.oper = b is not None or server is not None
        self.carrier = 1 if self.oper else 0  # the link came up once after the switches booted
        self.last_change = t0
        self.down: set[str] = set()  # ids of faults holding it down
        self.caps: dict[str, int] = {}  # fault id -> degraded speed (bps)
        self.load = 0.0  # peak bytes/s per direction, before jitter and pauses

    def ends(self) -> list[SimPort]:
        """The switch ports on this cable."""
        return [self.a] if self.b is None else [self.a, self.b]


class Wiring:
    """All simulated ports and cables of a fabric, their loads, and their counters at an instant."""

    def __init__(self, fabric: Fabric, params: TrafficParams, origin_ns: int, seed: int) -> None:
        self.params = params
        self.origin_ns = origin_ns
        self.phase = Phase(params, origin_ns)
        self.switches: dict[str, SimSwitch] = {}
        self.dirty: set[SimSwitch] = set()
        #: (switch, port or None) changed since the owner last took them, in order.
        self.changed: dict[tuple[str, str | None], None] = {}
        #: fault id -> (port, priority, pause frames/s) and (port, FCS errors/s).
        self.storms: dict[str, tuple[SimPort, int, float]] = {}
        self.bursts: dict[str, tuple[SimPort, float]] = {}
        self._pfc: dict[tuple[Flow, int], float] = {}
        self._errors: dict[Flow, float] = {}
        self._pauses: dict[Flow, float] = {}
        self._build(fabric, random.Random(f"flows:{seed}"))
        self.dirty.update(self.switches.values())
        self.settle(origin_ns)
        self.changed.clear()

    def _flow(self, rng: random.Random) -> Flow:
        p = self.params
        lo, hi = p.frame_bytes
        return Flow(self.origin_ns, 1.0 + rng.uniform(-p.jitter, p.jitter), rng.randint(lo, hi))

    def _build(self, fabric: Fabric, rng: random.Random) -> None:
        t0 = self.origin_ns
        for name, info in fabric.switches.items():
            sw = self.switches[name] = SimSwitch(name, info.role, t0, info.nos)
            plan = fabric.ports(name)
            sw.ports = [SimPort(sw, p.name, if_index(info.nos, p.number)) for p in plan]
            sw.by_name = {p.name: p for p in sw.ports}
            sw.downs = [port for port, p in zip(sw.ports, plan, strict=True) if p.direction == "down"]
            sw.ups = [port for port, p in zip(sw.ports, plan, strict=True) if p.direction == "up"]
        for link in fabric.links:
            b = self.port(link.b.node, link.b.port)
            speed = link.speed_gbps * _GBPS
            if link.kind is LinkKind.SERVER_LEAF:
                b.wire = Wire(b, None, link.a, speed, t0)
                b.fin, b.fout = self._flow(rng), self._flow(rng)
            else:
                a = self.port(link.a.node, link.a.port)
                a.wire = b.wire = Wire(a, b, None, speed, t0)
                a.fout = b.fin = self._flow(rng)
                b.fout = a.fin = self._flow(rng)
                a.desc = f"{link.b.node}:{link.b.port}"
            b.desc = f"{link.a.node}:{link.a.port}"
        for name, sw in self.switches.items():
            speed = fabric.switches[name].speed_gbps * _GBPS
            for port in sw.ports:
                if not hasattr(port, "wire"):
                    port.wire = Wire(port, None, None, speed, t0)
                    port.fin, port.fout = self._flow(rng), self._flow(rng)

    def port(self, switch: str, port: str) -> SimPort:
        """The port named ``port`` of ``switch``; KeyError when there is none."""
        try:
            return self.switches[switch].by_name[port]
        except KeyError:
            raise KeyError(f"{switch}:{port}") from None

    # -- changes ------------------------------------------------------------------------

    def refresh(self, wire: Wire, t: int) -> None:
        """Recompute a cable's oper status and speed from its faults; count and queue changes."""
        booting = wire.a.sw.booting or (wire.b is not None and wire.b.sw.booting)
        oper = (wire.b is not None or wire.server is not None) and not wire.down and not booting
        speed = min(wire.caps.values(), default=wire.design_bps)
        if oper == wire.oper and speed == wire.speed_bps:
            return
        if oper != wire.oper:
            wire.oper = oper
            wire.carrier += 1
            wire.last_change = t
        wire.speed_bps = speed
        self.touch(wire)

    def touch(self, wire: Wire) -> None:
        """Queue both ends of ``wire`` for re-rating and for the change listeners."""
        for end in wire.ends():
            self.dirty.add(end.sw)
            self.changed[(end.sw.name, end.name)] = None

    def reset(self, sw: SimSwitch, t: int) -> None:
        """Restart every counter of ``sw`` from 0 at ``t`` (a reboot)."""
        self._rebase(sw, t)
        sw.boot_ns = t

    def clear_counters(self, sw: SimSwitch, t: int) -> None:
        """Restart every counter of ``sw`` from 0 at ``t``, the switch still up (``clear counters``)."""
        self._rebase(sw, t)
        sw.cleared_ns = t

    def _rebase(self, sw: SimSwitch, t: int) -> None:
        self.settle(t)
        for port, counters in zip(sw.ports, self.evaluate(sw, t, raw=True), strict=True):
            port.base = counters

    def settle(self, t: int) -> None:
        """Re-rate the flows of changed switches at ``t`` (leaves first, then the spines they feed)."""
        phi = self.phase.phi(t)
        dirty, self.dirty = self.dirty, set()
        spines: set[SimSwitch] = set()
        for sw in dirty:
            if sw.role is Role.SPINE:
                spines.add(sw)
                continue
            if sw.role is Role.LEAF:
                self._rate_leaf(sw, t, phi)
            for port in sw.ups if sw.role is Role.LEAF else sw.downs:
                peer = port.peer()
                if peer is not None:
                    spines.add(peer.sw)
        for sw in spines:
            self._rate_spine(sw, t, phi)
        self._rate_faults(t, phi)

    def _rate_leaf(self, sw: SimSwitch, t: int, phi: int) -> None:
        p, mc = self.params, self.params.mcast_pps
        nics = [
            min(p.nic_peak * w.design_bps / 8, link_capacity(w.speed_bps)) if w.oper and w.server else 0.0
            for w in (port.wire for port in sw.downs)
        ]
        up_caps = [link_capacity(port.wire.speed_bps) if port.wire.oper else 0.0 for port in sw.ups]
        down_loads, up_loads = leaf_rates(p, nics, up_caps)
        for ports, loads in ((sw.downs, down_loads), (sw.ups, up_loads)):
            for port, load in zip(ports, loads, strict=True):
                wire = port.wire
                wire.load = load
                port.fin.set_load(t, phi, load, wire.oper, mc)
                port.fout.set_load(t, phi, load, wire.oper, mc)

    def _rate_spine(self, sw: SimSwitch, t: int, phi: int) -> None:
        p, mc = self.params, self.params.mcast_pps
        down_loads = [port.wire.load if port.wire.oper else 0.0 for port in sw.downs]
        up_caps = [link_capacity(port.wire.speed_bps) if port.wire.oper else 0.0 for port in sw.ups]
        for port, load in zip(sw.ups, spine_up_rates(p, down_loads, up_caps), strict=True):
            wire = port.wire
            wire.load = load
            port.fin.set_load(t, phi, load, wire.oper, mc)
            port.fout.set_load(t, phi, load, wire.oper, mc)

    def _rate_faults(self, t: int, phi: int) -> None:
        """Recompute the sparse fault rates (PFC pauses, FCS errors, pause throttling); apply the diff.

        A storm at port P of switch X: X sends pauses out of P; the peer Y receives them and
        stops sending to X (on the RoCE priority, throughput drops by the paused share); Y in
        turn pauses its other live ports at :data:`PFC_SPREAD` of the rate (one hop only).
        """
        pfc: dict[tuple[Flow, int], float] = {}
        errors: dict[Flow, float] = {}
        pauses: dict[Flow, float] = {}

        def pause(port: SimPort, prio: int, pps: float) -> None:
            pfc[(port.fout, prio)] = pfc.get((port.fout, prio), 0.0) + pps
            if prio == ROCE_PRIORITY:
                pauses[port.fin] = pauses.get(port.fin, 1.0) * (1.0 - pause_share(pps, port.wire.speed_bps))

        for port, prio, pps in self.storms.values():
            if not port.wire.oper:
                continue  # no frames, no pauses, on a dark cable
            pause(port, prio, pps)
            peer = port.peer()
            for other in peer.sw.ports if peer is not None else ():
                if other is not peer and other.wire.oper:
                    pause(other, prio, pps * PFC_SPREAD)
        for port, pps in self.bursts.values():
            if port.wire.oper:
                errors[port.fin] = errors.get(port.fin, 0.0) + pps
        self._apply_fault_rates(t, phi, pfc, errors, pauses)

    def _apply_fault_rates(
        self,
        t: int,
        phi: int,
        pfc: dict[tuple[Flow, int], float],
        errors: dict[Flow, float],
        pauses: dict[Flow, float],
    ) -> None:
        """Move the flows from the previous fault rates to these (absent: back to none)."""
        for flow, prio in self._pfc.keys() | pfc.keys():
            slots = flow.extras(t).pfc
            seg = slots[prio]
            if seg is None:
                seg = slots[prio] = Linear(t)
            seg.set_rate(t, pfc.get((flow, prio), 0.0))
        for flow in self._errors.keys() | errors.keys():
            flow.extras(t).errors.set_rate(t, errors.get(flow, 0.0))
        for flow in self._pauses.keys() | pauses.keys():
            flow.pause = pauses.get(flow, 1.0)
            flow.set_load(t, phi, flow.base_bps, flow.live, self.params.mcast_pps)
        self._pfc, self._errors, self._pauses = pfc, errors, pauses

    # -- reads --------------------------------------------------------------------------

    def evaluate(self, sw: SimSwitch, t: int, *, raw: bool = False) -> list[PortCounters]:
        """Counters of every port of ``sw`` at ``t``, counted from its last reboot unless ``raw``."""
        phi = self.phase.phi(t)
        clear = max(sw.boot_ns, sw.cleared_ns)
        out: list[PortCounters] = []
        append = out.append
        rx: tuple[int, ...]
        tx: tuple[int, ...]
        for port in sw.ports:
            fi, fo, w = port.fin, port.fout, port.wire
            i_oct = fi.oct_acc + int(fi.oct_rate * (phi - fi.oct_phi0))
            o_oct = fo.oct_acc + int(fo.oct_rate * (phi - fo.oct_phi0))
            i_pkt, o_pkt = i_oct // fi.frame, o_oct // fo.frame
            i_mc = fi.mc_acc + int(fi.mc_rate * (t - fi.mc_t0))
            o_mc = fo.mc_acc + int(fo.mc_rate * (t - fo.mc_t0))
            i_bc, o_bc, carrier = i_mc >> 3, o_mc >> 3, w.carrier
            errs, rx, tx = 0, _ZERO8, _ZERO8
            if fi.extra is not None:
                errs = fi.extra.errors.value(t)
                rx = fi.extra.pfc_counts(t)
            if fo.extra is not None:
                tx = fo.extra.pfc_counts(t)
            b = port.base
            if b is not None and not raw:
                i_oct, o_oct, i_pkt, o_pkt = (i_oct - b.in_octets, o_oct - b.out_octets,
                                              i_pkt - b.in_unicast_pkts, o_pkt - b.out_unicast_pkts)  # fmt: skip
                i_mc, o_mc, i_bc, o_bc = (i_mc - b.in_multicast_pkts, o_mc - b.out_multicast_pkts,
                                          i_bc - b.in_broadcast_pkts, o_bc - b.out_broadcast_pkts)  # fmt: skip
                errs, carrier = errs - b.in_errors, carrier - b.carrier_transitions
                if b.pfc_rx is not _ZERO8:
                    rx = tuple(x - y for x, y in zip(rx, b.pfc_rx, strict=True))
                if b.pfc_tx is not _ZERO8:
                    tx = tuple(x - y for x, y in zip(tx, b.pfc_tx, strict=True))
            # fmt: off
            append(PortCounters(
                port.name, port.if_index, port.desc, True, w.oper, w.speed_bps, w.last_change, clear,
                i_oct, o_oct, i_pkt, o_pkt, i_mc, o_mc, i_bc, o_bc,
                errs, 0, 0, 0, errs, carrier, 0, 0, rx, tx, not port.removed,
            ))
            # fmt: on
        return out

    def lldp(self, sw: SimSwitch) -> list[LldpNeighbor]:
        """The LLDP remote table of ``sw``: one entry per port whose cable is up."""
        out = []
        for port in sw.ports:
            wire = port.wire
            if not wire.oper:
                continue
            if wire.server is not None:
                # lldpd's defaults on a Linux host: the port id is the interface's MAC, and the
                # port description carries its name
                node, remote = wire.server.node, wire.server.port
                port_id, desc, subtype = chassis_id(f"{node}/{remote}"), remote, LLDP_PORT_MAC
            else:
                peer = port.peer()
                assert peer is not None
                node = peer.sw.name
                if peer.sw.nos == "junos":
                    # Junos sends a locally assigned port id, the interface's SNMP ifIndex, and
                    # its name as the port description
                    port_id, desc, subtype = str(peer.if_index), peer.name, LLDP_PORT_LOCAL
                elif peer.sw.nos == "onyx":
                    # NVIDIA Onyx (MLNX-OS) sends the port's MAC as its port id, its name as the description
                    port_id, desc, subtype = chassis_id(f"{node}/{peer.name}"), peer.name, LLDP_PORT_MAC
                else:
                    port_id, desc, subtype = peer.name, peer.desc, LLDP_PORT_IFNAME
            out.append(LldpNeighbor(port.name, port.if_index, chassis_id(node), node, port_id, desc, subtype))
        return out


@functools.lru_cache(maxsize=65536)
def chassis_id(node: str) -> str:
    """A stable, locally administered MAC-like chassis id for a node name."""
    bits = random.Random(f"chassis:{node}").getrandbits(40)
    return ":".join(f"{b:02x}" for b in (0x02, *bits.to_bytes(5, "big")))

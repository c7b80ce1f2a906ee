"""What the protocol front-ends (gNMI server, SNMP agent) read from the simulated fabric.

The simulated fabric (``simulator/fabric_state.py``) implements :class:`FabricView`; the
gNMI server and the SNMP agent only ever see this interface, so they stay independent of
the traffic model, and a replayed recording can stand behind them too.

Counters are unsigned 64-bit integers as a switch reports them (monotonic, restarted only by a
reboot or a clear). Times are Unix nanoseconds.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

PFC_PRIORITIES = 8
#: LldpPortIdSubtype values (LLDP-MIB) the simulated devices send.
LLDP_PORT_MAC = 3
LLDP_PORT_IFNAME = 5
LLDP_PORT_LOCAL = 7


@dataclass(slots=True)
class PortCounters:
    """One port's state and counters at one instant."""

    name: str  # as the inventory names it: "swp1", "Ethernet1/1", "et-0/0/1:2"
    if_index: int  # stable, in the NOS's own scheme (IF-MIB ifIndex; fabric.naming.if_index)
    description: str  # ifAlias / description: the designed peer, e.g. "sp-r1-1:Ethernet3/1"
    admin_up: bool
    oper_up: bool
    speed_bps: int  # live speed (a degraded 400G port reports 200G)
    last_change_ns: int  # last oper-status change (Unix ns)
    last_clear_ns: int  # last counter clear or reboot (Unix ns)
    in_octets: int
    out_octets: int
    in_unicast_pkts: int
    out_unicast_pkts: int
    in_multicast_pkts: int
    out_multicast_pkts: int
    in_broadcast_pkts: int
    out_broadcast_pkts: int
    in_errors: int
    out_errors: int
    in_discards: int
    out_discards: int
    in_fcs_errors: int
    carrier_transitions: int
    in_pause_frames: int  # 802.3x MAC pause (all priorities)
    out_pause_frames: int
    pfc_rx: tuple[int, ...]  # received PFC pause frames, per priority 0..7
    pfc_tx: tuple[int, ...]  # sent PFC pause frames, per priority 0..7
    #: False while the port's optic is pulled (a ``link_down`` fault with ``removed``): gNMI
    #: deletes the interface and stops sending it, SNMP reports ifOperStatus notPresent(6).
    present: bool = True


@dataclass(frozen=True, slots=True)
class LldpNeighbor:
    """One LLDP remote-table entry as the switch sees it on a local port."""

    local_port: str
    local_if_index: int
    chassis_id: str  # e.g. a MAC-like id derived from the name
    system_name: str  # "srv-g1-001" or "sp-r1-1"
    port_id: str  # "Ethernet17/1"; a MAC for a server (lldpd); an ifIndex for a Junos port
    port_description: str  # a server's NIC name ("mlx5_2"); a Junos port's name
    port_id_subtype: int = LLDP_PORT_IFNAME  # how to read ``port_id`` (LldpPortIdSubtype)


@dataclass(frozen=True, slots=True)
class SwitchInfo:
    """Switch-level facts."""

    name: str
    role: str  # leaf | spine | superspine
    boot_time_ns: int  # sysUpTime = now - boot_time
    reachable: bool  # False while a `switch_unreachable` fault (or a reboot) silences it
    snmp_delay_s: float = 0.0  # how late its SNMP agent answers (an ``snmp_slow`` fault)
    nos: str | None = None  # the NOS it runs, as the inventory says (its LLDP and ifIndex follow it)
    #: ``clock_step`` faults, in force or over: (since, until or None, step), Unix ns
    clock_steps: tuple[tuple[int, int | None, int], ...] = ()

    def clock_step_at(self, t_ns: int) -> int:
        """How far the switch's clock was stepped at ``t_ns``: a time it stamped then (a
        Notification, last-change, last-clear) keeps that step, whatever its clock does since."""
        return sum(step for since, until, step in self.clock_steps if since <= t_ns and (until is None or t_ns < until))


#: Called with (switch, port or None) whenever something ON_CHANGE subscribers care about changes
#: (oper status, speed, LLDP neighbours, reachability, reboot).
ChangeListener = Callable[[str, str | None], None]


class FabricView(Protocol):
    """Read access to the simulated switches; ``now_ns`` lets a replay or test fix the clock."""

    def switch_names(self) -> Sequence[str]:
        """All switches served, in a stable order."""
        ...

    def switch(self, name: str) -> SwitchInfo | None:
        """Facts of one switch, or None when no such switch is simulated."""
        ...

    def ports(self, switch: str, now_ns: int | None = None) -> list[PortCounters]:
        """Every port of the switch with counters evaluated at ``now_ns`` (default: the clock's now).

        Each call returns new objects: a reader may adjust them (the gNMI server moves times
        to a switch's skewed clock).
        """
        ...

    def lldp(self, switch: str) -> list[LldpNeighbor]:
        """The switch's LLDP remote table (a miswire shows here)."""
        ...

    def now_ns(self) -> int:
        """The simulation clock (Unix ns)."""
        ...

    def add_listener(self, listener: ChangeListener) -> None:
        """Register a change callback (called from the event loop thread)."""
        ...

    def remove_listener(self, listener: ChangeListener) -> None:
        """Unregister a change callback."""
        ...

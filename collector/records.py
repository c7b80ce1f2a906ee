"""What the protocol collectors hand to the pipeline: raw readings, as the switch reported them.

A protocol collector (``collector/gnmi*``, ``collector/snmp*``) turns protobufs or varbinds into
:class:`PortReading` and :class:`LldpReading` objects and nothing else leaves it. Counter
hygiene (deltas, resets, wraps, rates) happens once, after it, in ``collector/counters.py``.

Counters are unsigned integers as reported (64-bit, or 32-bit where ``width32`` says so);
``None`` means "not reported in this reading", never zero. The same holds for ``oper_up`` and
``speed_bps``: a reading carries them only when its notification (or poll) reported them, and
counter hygiene carries the port's last known state.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from fabric.record import COUNTER_FIELDS as COUNTER_FIELDS  # the counters, declared once there

if TYPE_CHECKING:
    from store.dom import DomSample


#: A ``wrap32`` member meaning "the per-interface PFC totals are 32-bit" (IEEE8021-PFC-MIB Counter32).
PFC_TOTAL_WRAP32 = "pfc_total"


@dataclass(slots=True)
class PortReading:
    """One port of one switch at one instant (``time_ns``: the switch's timestamp, Unix ns)."""

    switch: str
    port: str
    time_ns: int
    oper_up: bool | None = None
    speed_bps: int | None = None
    in_octets: int | None = None
    out_octets: int | None = None
    in_unicast_pkts: int | None = None
    out_unicast_pkts: int | None = None
    in_multicast_pkts: int | None = None
    out_multicast_pkts: int | None = None
    in_broadcast_pkts: int | None = None
    out_broadcast_pkts: int | None = None
    in_errors: int | None = None
    out_errors: int | None = None
    in_discards: int | None = None
    out_discards: int | None = None
    in_fcs_errors: int | None = None
    carrier_transitions: int | None = None
    in_pause_frames: int | None = None
    out_pause_frames: int | None = None
    #: PFC pause frames received / sent per priority 0..7 (None: not reported). A source with
    #: per-interface totals only (IEEE8021-PFC-MIB) reports them as ``pfc_rx_total``/``pfc_tx_total``.
    pfc_rx: tuple[int, ...] | None = None
    pfc_tx: tuple[int, ...] | None = None
    pfc_rx_total: int | None = None
    pfc_tx_total: int | None = None
    #: Counter-reset evidence: gNMI ``last-clear`` (Unix ns) or SNMP ifCounterDiscontinuityTime.
    last_clear_ns: int | None = None
    #: The switch's boot instant (Unix ns) when known (SNMP: now - sysUpTime): a change is a reboot.
    boot_ns: int | None = None
    #: The port's last oper-status change (Unix ns) when known (SNMP ifLastChange): a change with
    #: the same ``oper_up`` means the link flapped between two readings.
    last_change_ns: int | None = None
    #: Counter fields that are 32-bit at the source (they wrap mod 2^32), e.g. IF-MIB's ifInErrors;
    #: share one frozenset per source rather than building one per reading.
    wrap32: frozenset[str] = frozenset()
    #: The switch deleted this interface (an optic pulled, a breakout changed): it is down and
    #: its counters, when it comes back, start a new baseline.
    removed: bool = False
    #: When the collector received it (Unix ns), for a reading stamped by the switch's clock
    #: (gNMI): the clock guard bounds ``time_ns`` by it. None: the collector stamped the reading
    #: itself (SNMP), and there is no device clock to doubt.
    received_ns: int | None = field(default=None, compare=False)


@dataclass(frozen=True, slots=True)
class LldpNeighborReading:
    """One LLDP remote-table entry."""

    system_name: str
    port_id: str
    port_description: str = ""
    chassis_id: str = ""


@dataclass(slots=True)
class LldpReading:
    """A port's whole LLDP remote table at one instant (empty: no neighbour)."""

    switch: str
    port: str
    time_ns: int
    neighbors: tuple[LldpNeighborReading, ...]
    #: As :attr:`PortReading.received_ns`.
    received_ns: int | None = field(default=None, compare=False)


class TargetState(StrEnum):
    """What the collector knows about reaching a switch."""

    CONNECTING = "connecting"
    CONNECTED = "connected"  # data flows
    STALE = "stale"  # connected, but no update in 3 intervals: never read as zero traffic
    UNREACHABLE = "unreachable"  # connection failed or timed out; retrying with backoff
    ERROR = "error"  # the switch refused us (auth, TLS, unknown target, bad subscription)


class Sink(Protocol):
    """Where a protocol collector sends what it read. ``put`` waits when the pipeline is full."""

    async def put_ports(self, readings: Sequence[PortReading]) -> None:
        """Hand over readings (any number, any switches). Back-pressure: may wait, never drops."""
        ...

    async def put_lldp(self, readings: Sequence[LldpReading]) -> None:
        """Hand over LLDP tables."""
        ...

    def set_state(self, switch: str, state: TargetState, detail: str | None = None) -> None:
        """Report reachability; called on every change (cheap, never blocks)."""
        ...

    def count_invalid(self, switch: str, what: str, n: int = 1) -> None:
        """Count values skipped as malformed (wrong type, unknown path, absurd size)."""
        ...


@runtime_checkable
class DomSink(Protocol):
    """A Sink that also takes transceiver DOM samples (to ``transceiver_dom``, through store/dom.py).

    Separate from :class:`Sink` so that a sink without DOM still serves: a collector hands DOM
    only to a sink that has ``put_dom``.
    """

    async def put_dom(self, samples: Sequence[DomSample]) -> None:
        """Hand over DOM samples (any switches). Back-pressure: may wait."""
        ...

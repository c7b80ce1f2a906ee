"""The neutral telemetry records, one per (switch, port, time), in table column order.

They are NamedTuples: slotted, named, and passed to COPY as they are, with no per-row
conversion. Field order is the column order of the hypertables (a test checks it against the
live schema). Counters are unsigned 64-bit on the wire: ``to_int8`` stores the same 64 bits
in a bigint.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import NamedTuple

U64 = 1 << 64
I64_MAX = (1 << 63) - 1


def to_int8(value: int) -> int:
    """The bigint holding ``value``'s 64 bits (two's complement past 2^63). Out of range: ValueError."""
    if not 0 <= value < U64:
        raise ValueError(f"counter {value} is not an unsigned 64-bit value")
    return value - U64 if value > I64_MAX else value


def to_int8s(values: Sequence[int]) -> list[int]:
    """:func:`to_int8` of each of ``values``: copied at once when all are in 0..2^63-1, as a FEC
    histogram's bins nearly always are."""
    if values and min(values) >= 0 and max(values) <= I64_MAX:
        return list(values)
    return [to_int8(v) for v in values]


def from_int8(value: int) -> int:
    """Inverse of :func:`to_int8`."""
    return value + U64 if value < 0 else value


class PortSample(NamedTuple):
    """One port's counters and ingest-time rates at one instant (table ``port_counters``)."""

    time: datetime
    switch: str
    port: str
    oper_status: int | None = None
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
    interval_s: float | None = None
    in_bps: float | None = None
    out_bps: float | None = None
    in_pps: float | None = None
    out_pps: float | None = None
    in_errors_ps: float | None = None
    out_errors_ps: float | None = None
    in_discards_ps: float | None = None
    out_discards_ps: float | None = None
    in_fcs_errors_ps: float | None = None
    counter_reset: bool = False


class PfcSample(NamedTuple):
    """PFC pause counters of one port and priority (table ``pfc_counters``); priority -1: all."""

    time: datetime
    switch: str
    port: str
    priority: int
    rx_pause: int | None = None
    tx_pause: int | None = None
    interval_s: float | None = None
    rx_pause_pps: float | None = None
    tx_pause_pps: float | None = None
    counter_reset: bool = False


class LinkEvent(NamedTuple):
    """An oper-status transition (table ``link_events``); ``down_s`` ends an outage."""

    time: datetime
    switch: str
    port: str
    old_status: str
    new_status: str
    down_s: float | None = None
    source: str = "oper-status"
    #: Flaps the event stands for: > 1 for flaps between samples that carrier-transitions counted but
    #: status missed; 0 for a ``down`` that carrier-transitions had already counted.
    flaps: int = 1


class Reachability(NamedTuple):
    """Whether the collector reached a switch (table ``switch_reachability``)."""

    time: datetime
    switch: str
    reachable: bool
    state: str
    protocol: str | None = None
    detail: str | None = None


#: Each record type's table, for the writer.
TABLES: dict[type[tuple[object, ...]], str] = {
    PortSample: "port_counters",
    PfcSample: "pfc_counters",
    LinkEvent: "link_events",
    Reachability: "switch_reachability",
}

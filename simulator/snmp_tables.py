"""The object model of the simulated SNMP agent: one switch at one instant, scalars and tables.

:mod:`simulator.snmp_mib` lists the objects served and walks them; the modules that build rows
(:mod:`simulator.snmp_entity`) describe their tables with these same types.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from simulator.optics import OpticReading
from simulator.snmp_ber import OID
from simulator.view import LldpNeighbor, PortCounters, SwitchInfo

Value = int | bytes | OID


class MibContext:
    """One switch at one instant: what every getter reads.

    ``optics`` reads the switch's transceivers at the same instant, on demand: only a walk of the
    entity tables pays for it. ``memo`` keeps rows built from it (:mod:`simulator.snmp_entity`).
    """

    __slots__ = ("_port_rows", "info", "lldp", "memo", "now_ns", "optics", "ports")

    def __init__(
        self,
        info: SwitchInfo,
        ports: list[PortCounters],
        lldp: list[LldpNeighbor],
        now_ns: int,
        optics: Callable[[], list[OpticReading]] | None = None,
    ) -> None:
        self.info = info
        self.ports = ports
        self.lldp = lldp
        self.now_ns = now_ns
        self.optics = optics
        self.memo: dict[str, Any] = {}
        self._port_rows: list[tuple[OID, Any]] | None = None

    def ticks_since_boot(self, t_ns: int) -> int:
        """A TimeStamp: sysUpTime (centiseconds) at ``t_ns``, 0 for anything before the boot."""
        return max(0, (t_ns - self.info.boot_time_ns) // 10_000_000)

    def port_rows(self) -> list[tuple[OID, Any]]:
        """(ifIndex,) → port rows, shared by every ifIndex-indexed table."""
        if self._port_rows is None:
            # A duplicated ifIndex would repeat an OID and break walks: the first port wins.
            by_index: dict[int, PortCounters] = {}
            for p in self.ports:
                if p.if_index > 0:
                    by_index.setdefault(p.if_index, p)
            self._port_rows = [((i,), by_index[i]) for i in sorted(by_index)]
        return self._port_rows


@dataclass(frozen=True, slots=True)
class Scalar:
    """A scalar object; its only instance is ``oid.0``."""

    name: str
    oid: OID
    syntax: int
    get: Callable[[MibContext], Value]


@dataclass(frozen=True, slots=True)
class Column:
    """One column of a table: sub-identifier under the entry, BER syntax, getter over a row."""

    sub: int
    name: str
    syntax: int
    get: Callable[[Any, MibContext], Value]


@dataclass(frozen=True, slots=True)
class Table:
    """A conceptual table: its entry OID, its columns (ascending) and how to list its rows."""

    name: str
    entry: OID
    columns: tuple[Column, ...]
    rows: Callable[[MibContext], list[tuple[OID, Any]]]

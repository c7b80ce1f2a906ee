"""One gNMI stream's open group: what a notification timestamp's updates said, until it closes into readings.

:class:`GroupState` is the state half of :class:`collector.gnmi_decode.StreamDecoder`: each
port's row of the open timestamp (counters, PFC, clear and change instants), the ports whose
status or speed it reported, the LLDP tables it changed and the interfaces it deleted. Closing
the group turns them into :class:`PortReading` and :class:`LldpReading` objects, stamped with
the time the group's first notification arrived (the clock guard's receive time).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import cast

from collector.gnmi_values import (
    DECODE_ERROR,
    MAX_NEIGHBORS,
    MAX_TEXT,
    TOO_LONG,
    TOO_MANY,
    Bad,
    PortState,
    Resolver,
    lldp_neighbor,
    neighbor_order,
    pfc_row,
)
from collector.profiles import (
    LAST_CHANGE,
    LAST_CLEAR,
    PFC_RX,
    PFC_RX_TOTAL,
    PFC_TX,
    PFC_TX_TOTAL,
    ROW_LEN,
    Elem,
    Family,
    Leaf,
)
from collector.records import COUNTER_FIELDS, LldpReading, PortReading

log = logging.getLogger("collector.gnmi_decode")  # the decoder's logger: its records keep their name

_N = len(COUNTER_FIELDS)

#: The PortReading fields :class:`GroupState` passes by position, in order. They must open
#: PortReading's fields (tests/unit/fabric/test_record_shape.py).
READING_ORDER: tuple[str, ...] = (
    *("switch", "port", "time_ns", "oper_up", "speed_bps"),
    *COUNTER_FIELDS,
    *("pfc_rx", "pfc_tx", "pfc_rx_total", "pfc_tx_total", "last_clear_ns", "boot_ns", "last_change_ns"),
)
_reading = cast(Callable[..., PortReading], PortReading)


class GroupState:
    """A stream's open group and the ports' decoder state (see the module docstring)."""

    def __init__(
        self,
        switch: str,
        resolver: Resolver,
        ports: dict[str, PortState],
        invalid: Callable[[str, int], None],
        *,
        owns_lldp: bool = True,
    ) -> None:
        self.switch = switch
        self.values = 0
        self.notifications = 0
        self.ignored = 0
        self.ready_ports: list[PortReading] = []
        self.ready_lldp: list[LldpReading] = []
        self._r = resolver
        self._profile = resolver.profile
        self._ports = ports
        self._invalid = invalid
        self._owns_lldp = owns_lldp
        self._received_ns = 0
        self._oper_seen: set[str] = set()
        self._speed_seen: set[str] = set()
        self._pending: dict[str, list[int | None]] = {}
        self._ts = -1
        self._lldp_dirty: set[str] = set()
        self._lldp_before: set[str] | None = None
        self._lldp_seen: set[str] = set()
        self._removed: dict[str, list[int | None]] = {}  # port → its row before the delete, this group
        self.failures = 0  # messages (or groups) the decoder failed on: counted, skipped, logged once

    # -- the group -------------------------------------------------------------------------

    def begin(self) -> None:
        """A new subscription starts: its dump will restate every LLDP table (see :meth:`sync`)."""
        self.close_group()
        if self._owns_lldp:
            self._lldp_before = {p for p, st in self._ports.items() if st.lldp}
            self._lldp_seen = set()

    def _failed(self, what: str) -> None:
        """After an exception: count it and log it (with its traceback the first time)."""
        self.failures += 1
        if self.failures == 1:
            log.exception("gNMI %s: the decoder failed on %s; skipped", self.switch, what)
        else:
            log.debug("gNMI %s: the decoder failed on %s; skipped", self.switch, what, exc_info=True)
        try:
            self._invalid(DECODE_ERROR, 1)
        except Exception:  # the counter's own failure must not undo what this method is for
            log.debug("gNMI %s: could not count a decode error", self.switch, exc_info=True)

    def sync(self) -> None:
        """End of the initial dump: close the group; ports the dump did not restate lost their LLDP."""
        if self._lldp_before is not None:
            for port in self._lldp_before - self._lldp_seen:
                self._ports[port].lldp.clear()
                self._lldp_dirty.add(port)
            self._lldp_before = None
        self.close_group()

    @property
    def pending(self) -> bool:
        """Whether a group is open (readings that wait for their timestamp to complete)."""
        return bool(self._pending or self._lldp_dirty or self._removed)

    def take(self) -> tuple[list[PortReading], list[LldpReading]]:
        """The completed readings, handed over (the lists are replaced)."""
        ports, lldp = self.ready_ports, self.ready_lldp
        self.ready_ports, self.ready_lldp = [], []
        return ports, lldp

    def close_group(self) -> None:
        """Turn the open timestamp's rows into readings. Never raises (the group is dropped if it fails)."""
        try:
            self._close_group()
        except Exception:
            # Dropped, or the same group would fail again at every close, and begin() with it.
            self._pending, self._lldp_dirty, self._removed = {}, set(), {}
            self._oper_seen.clear()
            self._speed_seen.clear()
            self._failed("closing a group")

    def _close_group(self) -> None:
        ts, sw, states = self._ts, self.switch, self._ports
        first_port, first_lldp = len(self.ready_ports), len(self.ready_lldp)
        if self._removed:
            self._close_removed()
        if self._pending:
            out = self.ready_ports
            # A reading carries status and speed only when its notifications reported them:
            # counter hygiene keeps the port's state, and a carried value would be an
            # "observation" at a time the switch did not say it (collector/counters.py).
            oper_seen, speed_seen = self._oper_seen, self._speed_seen
            for port, row in self._pending.items():
                st = states.get(port) or self._state(port)
                change = row[LAST_CHANGE]
                if change is None:
                    change = st.last_change
                else:
                    st.last_change = change
                out.append(
                    _reading(
                        sw,
                        port,
                        ts,
                        st.oper if port in oper_seen else None,
                        st.speed if port in speed_seen else None,
                        *row[:_N],
                        pfc_row(row[PFC_RX:PFC_TX], st.pfc_rx),
                        pfc_row(row[PFC_TX:], st.pfc_tx),
                        row[PFC_RX_TOTAL],
                        row[PFC_TX_TOTAL],
                        row[LAST_CLEAR],
                        None,
                        change,
                    )
                )
            self._pending = {}
        self._oper_seen.clear()
        self._speed_seen.clear()
        if self._lldp_dirty:
            for port in sorted(self._lldp_dirty):
                table = states[port].lldp
                neighbors = tuple(lldp_neighbor(table[nid]) for nid in sorted(table, key=neighbor_order))
                self.ready_lldp.append(LldpReading(sw, port, ts, neighbors))
            self._lldp_dirty = set()
        # when the group's first notification arrived: the clock guard's "receive time"
        recv = self._received_ns
        for r in self.ready_ports[first_port:]:
            r.received_ns = recv
        for t in self.ready_lldp[first_lldp:]:
            t.received_ns = recv

    def _row(self, port: str) -> list[int | None]:
        row = self._pending.get(port)
        if row is None:
            row = self._pending[port] = [None] * ROW_LEN
        return row

    def _state(self, port: str) -> PortState:
        st = self._ports.get(port)
        if st is None:
            st = self._ports[port] = PortState()
        return st

    # -- LLDP tables and removed ports ----------------------------------------------------

    def _lldp_set(self, port: str, leaf: Leaf, text: str) -> None:
        nid = leaf.neighbor
        if len(nid) > MAX_TEXT:
            raise Bad(TOO_LONG)
        table = self._state(port).lldp
        entry = table.get(nid)
        if entry is None:
            if len(table) >= MAX_NEIGHBORS:  # a switch naming neighbours without end grows no table
                raise Bad(TOO_MANY)
            entry = table[nid] = {}
        entry[leaf.field] = text
        self._lldp_dirty.add(port)
        self._lldp_seen.add(port)

    def _remove(self, port: str) -> None:
        """The switch deleted the interface: report it gone and forget what it said before."""
        old = self._ports.get(port)
        fresh = self._ports[port] = PortState()
        if old is not None and old.lldp:
            if self._owns_lldp:
                self._lldp_dirty.add(port)  # its neighbours went with it
            else:
                fresh.lldp = old.lldp  # the tables another stream owns
        row = self._pending.pop(port, None)
        if row is not None or port not in self._removed:
            self._removed[port] = row or [None] * ROW_LEN

    def _close_removed(self) -> None:
        """The readings of this group's removed ports; one sent again after its delete was replaced."""
        for port, row in self._removed.items():
            if port in self._pending:
                continue
            self.ready_ports.append(
                _reading(
                    self.switch,
                    port,
                    self._ts,
                    False,
                    None,
                    *row[:_N],
                    None,
                    None,
                    row[PFC_RX_TOTAL],
                    row[PFC_TX_TOTAL],
                    row[LAST_CLEAR],
                    None,
                    row[LAST_CHANGE],
                    removed=True,
                )
            )
        self._removed = {}

    def _lldp_delete(self, fam: Family, port: str, rest: Sequence[Elem]) -> None:
        table = self._state(port).lldp
        key, caps = fam.normalize(rest)
        spec = fam.leaves.get(key)
        if spec is not None:
            leaf = spec.bind(caps)
            entry = table.get(leaf.neighbor) if leaf is not None else None
            if leaf is None or entry is None:
                return
            entry.pop(leaf.field, None)
            if not entry:
                del table[leaf.neighbor]
        elif key in fam.ignore:
            return
        elif "neighbor" in caps:
            table.pop(caps["neighbor"], None)  # the neighbour entry, or a container below it
        else:
            table.clear()  # the port's whole table (or the neighbours container)
        self._lldp_dirty.add(port)

"""``fabricmon sim --replay``: serve a recorded switch stream as a live switch.

A :class:`ReplayView` implements :class:`~simulator.view.FabricView` for the one switch of a
recording (``fabricmon record``), so the gNMI server and the SNMP agent serve it exactly as
they serve the traffic model: the same paths, the same OIDs, the same counters.

Time: the recording plays from its first notification, ``speedup`` times its own pace. Served
timestamps (and the time-valued leaves ``last-change`` / ``last-clear``) are shifted to the
present, so a collector stores the replay as live data instead of data from the past. When the
recording ends, the last values stay (a switch whose counters stopped), and ``finished`` is set.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pygnmi.spec.v080 import gnmi_pb2

from fabric.model import natural_key
from fabric.tasks import stop_task
from simulator.gnmi_paths import (
    IF_FIELDS,
    LEAVES,
    LLDP_FIELDS,
    PFC_PRIORITIES,
    Elem,
    Family,
    Kind,
    PathError,
    path_elems,
)
from simulator.gnmi_wire import SPEEDS
from simulator.recording import Entry, Header, read_recording
from simulator.view import ChangeListener, LldpNeighbor, PortCounters, SwitchInfo

log = logging.getLogger(__name__)

_ROOT_NAMES: dict[tuple[str, ...], tuple[Family, str]] = {
    ("interfaces", "interface"): (Family.INTERFACES, "name"),
    ("qos", "interfaces", "interface"): (Family.PFC, "interface-id"),
    ("lldp", "interfaces", "interface"): (Family.LLDP, "name"),
}
#: Interface leaves a recording keeps that the replay does not serve: link health's FEC counters,
#: BER and the transceiver's name (replaying optics is not built). Counted apart, not as unknown.
NOT_REPLAYED = frozenset({
    "state/transceiver",
    "ethernet/state/counters/fec-corrected-blocks",
    "ethernet/state/counters/fec-uncorrectable-blocks",
    "ethernet/state/counters/in-symbol-error",
    "ethernet/state/pre-fec-ber/instant",
    "ethernet/state/post-fec-ber/instant",
})  # fmt: skip
_SPEED_BPS = {name: bps for bps, name in SPEEDS.items()}
_TIME_FIELDS = {"last_change_ns", "last_clear_ns"}
_STATE_FIELDS = {"oper_up", "admin_up", "speed_bps"}


def _leaf_key(elems: Sequence[Elem]) -> str:
    return "/".join(str(e) for e in elems)


def _leaf_table() -> dict[tuple[Family, str], tuple[Kind, int]]:
    table: dict[tuple[Family, str], tuple[Kind, int]] = {}
    for family, leaves in LEAVES.items():
        for leaf in leaves:
            table[(family, _leaf_key(leaf.rel))] = (leaf.kind, leaf.column)
    return table


_LEAVES = _leaf_table()


@dataclass(slots=True)
class _Port:
    values: dict[str, Any] = field(default_factory=dict)
    pfc_rx: list[int] = field(default_factory=lambda: [0] * PFC_PRIORITIES)
    pfc_tx: list[int] = field(default_factory=lambda: [0] * PFC_PRIORITIES)
    lldp: dict[str, dict[str, str]] = field(default_factory=dict)


def decode_value(kind: Kind, value: gnmi_pb2.TypedValue) -> Any:
    """A TypedValue as the Python value of a PortCounters field (None when it does not fit)."""
    which = value.WhichOneof("value")
    raw: Any = getattr(value, which) if which else None
    if which in ("json_ietf_val", "json_val"):
        try:
            raw = json.loads(raw)
        except ValueError:
            return None
    if kind is Kind.UINT:
        try:
            return int(raw)
        except (TypeError, ValueError):
            return None
    if kind is Kind.STATUS:
        return str(raw).upper() == "UP"
    if kind is Kind.SPEED:
        return _SPEED_BPS.get(str(raw).rpartition(":")[2])
    return None if raw is None else str(raw)


class ReplayView:
    """The recorded switch, advancing with the clock."""

    def __init__(self, path: str | Path, *, speedup: float = 1.0, clock: Callable[[], int] = time.time_ns) -> None:
        if speedup <= 0:
            raise ValueError("speedup must be > 0")
        header, entries = read_recording(path)
        self.header: Header = header
        self._entries: list[Entry] = list(entries)
        self._speedup = speedup
        self._clock = clock
        self._started_wall = clock()
        self._first_ns = self._entries[0].recv_ns if self._entries else header.started_ns
        self._offset = self._started_wall - self._first_ns
        self._next = 0
        self._ports: dict[str, _Port] = {}
        self._listeners: list[ChangeListener] = []
        self._task: asyncio.Task[None] | None = None
        self.skipped = 0
        self.not_replayed = 0  # leaves of :data:`NOT_REPLAYED`, known and left out

    # --- FabricView -------------------------------------------------------------------------

    def switch_names(self) -> Sequence[str]:
        return [self.header.switch]

    def switch(self, name: str) -> SwitchInfo | None:
        if name != self.header.switch:
            return None
        self._advance()
        role = "superspine" if name.startswith("ssp-") else "spine" if name.startswith("sp-") else "leaf"
        clears = [p.values["last_clear_ns"] for p in self._ports.values() if "last_clear_ns" in p.values]
        boot = min(clears) if clears else self._first_ns + self._offset
        return SwitchInfo(name=name, role=role, boot_time_ns=boot, reachable=True)

    def ports(self, switch: str, now_ns: int | None = None) -> list[PortCounters]:
        if switch != self.header.switch:
            return []
        self._advance()
        names = sorted(self._ports, key=natural_key)
        return [self._counters(name, i + 1) for i, name in enumerate(names)]

    def lldp(self, switch: str) -> list[LldpNeighbor]:
        if switch != self.header.switch:
            return []
        self._advance()
        out: list[LldpNeighbor] = []
        names = sorted(self._ports, key=natural_key)
        for index, name in enumerate(names, start=1):
            for _, nbr in sorted(self._ports[name].lldp.items()):
                out.append(
                    LldpNeighbor(
                        local_port=name,
                        local_if_index=index,
                        chassis_id=nbr.get("chassis_id", ""),
                        system_name=nbr.get("system_name", ""),
                        port_id=nbr.get("port_id", ""),
                        port_description=nbr.get("port_description", ""),
                    )
                )
        return out

    def now_ns(self) -> int:
        return self._clock()

    def add_listener(self, listener: ChangeListener) -> None:
        self._listeners.append(listener)

    def remove_listener(self, listener: ChangeListener) -> None:
        with contextlib.suppress(ValueError):
            self._listeners.remove(listener)

    # --- playing ----------------------------------------------------------------------------

    @property
    def finished(self) -> bool:
        """True once every recorded response has been played."""
        return self._next >= len(self._entries)

    def position_ns(self) -> int:
        """Where in the recording the replay is (recorded receive time)."""
        return self._first_ns + int((self._clock() - self._started_wall) * self._speedup)

    def start(self) -> None:
        """Play on time in the background, so ON_CHANGE subscribers hear changes when they happen."""
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="replay")

    async def stop(self) -> None:
        """Stop the background player."""
        await stop_task(self._task, "the replay player", log)
        self._task = None

    async def _run(self) -> None:
        while True:
            self._advance()
            if self._next >= len(self._entries):
                break
            due = self._entries[self._next].recv_ns - self.position_ns()
            await asyncio.sleep(max(0.0, due / 1e9 / self._speedup))
        log.info("replay of %s finished", self.header.switch)

    def _advance(self) -> None:
        position = self.position_ns()
        while self._next < len(self._entries) and self._entries[self._next].recv_ns <= position:
            entry = self._entries[self._next]
            self._next += 1
            if entry.response.HasField("update"):
                self._apply(entry.response.update)

    def _apply(self, notification: gnmi_pb2.Notification) -> None:
        try:
            prefix = path_elems(notification.prefix)
        except PathError:
            self.skipped += len(notification.update)
            return
        changed: set[str | None] = set()
        for update in notification.update:
            try:
                elems = prefix + path_elems(update.path)
            except PathError:
                self.skipped += 1
                continue
            port = self._store(elems, update.val)
            if port is None:
                self.skipped += 1
            elif port:
                changed.add(port)
        for port_name in changed:
            for listener in list(self._listeners):
                listener(self.header.switch, port_name)

    def _store(self, elems: tuple[Elem, ...], value: gnmi_pb2.TypedValue) -> str | None:
        """Store one leaf; return the port when a state leaf changed ('' for counters), None if unknown."""
        for names, (family, key) in _ROOT_NAMES.items():
            n = len(names)
            if tuple(e.name for e in elems[:n]) != names:
                continue
            port = dict(elems[n - 1].keys).get(key)
            if not port:
                return None
            rel = list(elems[n:])
            neighbor = ""
            if family is Family.LLDP and len(rel) >= 2 and rel[1].name == "neighbor":
                neighbor = dict(rel[1].keys).get("id", "")
                rel[1] = Elem("neighbor", (("id", "*"),))
            found = _LEAVES.get((family, _leaf_key(rel)))
            if found is None:
                if family is Family.INTERFACES and _leaf_key(rel) in NOT_REPLAYED:
                    self.not_replayed += 1
                    return ""
                return None
            kind, column = found
            decoded = decode_value(kind, value)
            if decoded is None:
                return None
            state = self._ports.setdefault(port, _Port())
            return self._set(state, family, column, neighbor, decoded, port)
        return None

    def _set(self, state: _Port, family: Family, column: int, neighbor: str, value: Any, port: str) -> str:
        if family is Family.PFC:
            (state.pfc_rx if column < PFC_PRIORITIES else state.pfc_tx)[column % PFC_PRIORITIES] = int(value)
            return ""
        if family is Family.LLDP:
            state.lldp.setdefault(neighbor, {})[LLDP_FIELDS[column][1]] = str(value)
            return port
        name = IF_FIELDS[column]
        if name in _TIME_FIELDS and int(value) > 0:
            value = int(value) + self._offset
        old = state.values.get(name)
        state.values[name] = value
        return port if name in _STATE_FIELDS and old != value else ""

    def _counters(self, name: str, if_index: int) -> PortCounters:
        v = self._ports[name].values
        p = self._ports[name]

        def n(key: str) -> int:
            return int(v.get(key, 0))

        return PortCounters(
            name=name,
            if_index=if_index,
            description=str(v.get("description", "")),
            admin_up=bool(v.get("admin_up", True)),
            oper_up=bool(v.get("oper_up", False)),
            speed_bps=n("speed_bps"),
            last_change_ns=n("last_change_ns"),
            last_clear_ns=n("last_clear_ns"),
            in_octets=n("in_octets"),
            out_octets=n("out_octets"),
            in_unicast_pkts=n("in_unicast_pkts"),
            out_unicast_pkts=n("out_unicast_pkts"),
            in_multicast_pkts=n("in_multicast_pkts"),
            out_multicast_pkts=n("out_multicast_pkts"),
            in_broadcast_pkts=n("in_broadcast_pkts"),
            out_broadcast_pkts=n("out_broadcast_pkts"),
            in_errors=n("in_errors"),
            out_errors=n("out_errors"),
            in_discards=n("in_discards"),
            out_discards=n("out_discards"),
            in_fcs_errors=n("in_fcs_errors"),
            carrier_transitions=n("carrier_transitions"),
            in_pause_frames=n("in_pause_frames"),
            out_pause_frames=n("out_pause_frames"),
            pfc_rx=tuple(p.pfc_rx),
            pfc_tx=tuple(p.pfc_tx),
        )

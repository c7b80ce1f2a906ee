"""Who answers a gNMI request, and what it says at one instant: the pieces Get and Subscribe share.

* :func:`resolve_target` and :func:`speaker_for`: the request's prefix target names the switch,
  except SONiC's database targets (``COUNTERS_DB``, ``APPL_DB``), where the switch is the one
  named by the ``username`` metadata (:mod:`simulator.nos` says why). The :class:`Speaker`
  carries the switch, the target its answers repeat, its NOS shape and its clock.
* :class:`Snapshot`: the switch's ports and LLDP table read once per instant (and once more per
  family a shape reads later, e.g. EOS's PFC), with the device clock offset applied to
  ``last-change``/``last-clear``; ports whose optic is pulled are left out and listed in
  :meth:`Snapshot.removed`.
* :class:`Batch`: the Notifications of one instant, one per (read offset, prefix, note),
  stamped with the device clock (offset and per-Notification jitter).
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import grpc
from pygnmi.spec.v080 import gnmi_pb2

from fabric.errors import FabricmonError
from simulator.gnmi_optics import OPTICS_FAMILIES
from simulator.gnmi_paths import Family, PathError, Selection, UnknownPathError, format_path, path_elems
from simulator.gnmi_shapes import Shape
from simulator.gnmi_wire import Encoding, Group, notification, timestamp
from simulator.nos import DEFAULT_DEVICE, SONIC_TARGETS, Device, Devices, Nos
from simulator.optics import OpticReading
from simulator.view import FabricView, LldpNeighbor, PortCounters, SwitchInfo

_LLDP_FAMILIES = frozenset({Family.LLDP, Family.SONIC_LLDP})


class RequestError(FabricmonError):
    """A request the target refuses; the RPC ends with ``code`` and ``message``."""

    def __init__(self, code: grpc.StatusCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def check_encoding(value: int) -> Encoding:
    """The requested encoding, or UNIMPLEMENTED for the ones not served."""
    try:
        return Encoding(value)
    except ValueError:
        name = gnmi_pb2.Encoding.Name(value) if value in gnmi_pb2.Encoding.values() else str(value)
        raise RequestError(
            grpc.StatusCode.UNIMPLEMENTED, f"encoding {name} is not supported (use JSON_IETF or PROTO)"
        ) from None


def resolve_target(prefix: Any, paths: Iterable[Any]) -> str:
    """The one target a request is for: the prefix target, else the (single) path target."""
    targets = {p.target for p in paths if p.target}
    if prefix.target:
        if targets - {prefix.target}:
            raise RequestError(grpc.StatusCode.INVALID_ARGUMENT, "path target differs from prefix target")
        return str(prefix.target)
    if not targets:
        raise RequestError(grpc.StatusCode.INVALID_ARGUMENT, "missing target (set it in the path prefix)")
    if len(targets) > 1:
        raise RequestError(grpc.StatusCode.INVALID_ARGUMENT, "one target per request")
    return str(targets.pop())


@dataclass(frozen=True, slots=True)
class Speaker:
    """Who answers: the simulated switch, the target its answers carry, its shape and clock."""

    switch: str
    target: str
    shape: Shape
    device: Device = DEFAULT_DEVICE


def speaker_for(
    view: FabricView, shapes: Mapping[Nos, Shape], devices: Devices | None, target: str, username: str = ""
) -> Speaker:
    """The speaker of a request for ``target`` (NOT_FOUND / INVALID_ARGUMENT when it names none)."""
    if target in SONIC_TARGETS:
        if not username:
            raise RequestError(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"target {target} is a SONiC database; name the switch in the 'username' metadata",
            )
        device = devices.get(username) if devices is not None else DEFAULT_DEVICE
        if view.switch(username) is None:
            raise RequestError(grpc.StatusCode.NOT_FOUND, f"no such switch: {username!r}")
        if device.nos is not Nos.SONIC:
            raise RequestError(
                grpc.StatusCode.NOT_FOUND,
                f"{username} runs {device.nos.value}, not SONiC: use its name as the target",
            )
        return Speaker(username, target, shapes[Nos.SONIC], device)
    device = devices.get(target) if devices is not None else DEFAULT_DEVICE
    # A SONiC switch asked by name answers OpenConfig (its translib front end).
    nos = Nos.OPENCONFIG if device.nos is Nos.SONIC else device.nos
    return Speaker(target, target, shapes[nos], device)


def selections(prefix: Any, path: Any, shape: Shape) -> list[Selection]:
    """What ``prefix`` + ``path`` selects (INVALID_ARGUMENT if malformed, NOT_FOUND if unknown)."""
    try:
        return shape.selections(prefix, path)
    except PathError as exc:
        raise RequestError(grpc.StatusCode.INVALID_ARGUMENT, str(exc)) from exc
    except UnknownPathError as exc:
        raise RequestError(grpc.StatusCode.NOT_FOUND, str(exc)) from exc


def describe(prefix: Any, path: Any) -> str:
    """Best-effort text of a request path, for error messages."""
    try:
        return format_path(path_elems(prefix) + path_elems(path))
    except PathError:
        return "<malformed path>"


def check_switch(view: FabricView, switch: str) -> SwitchInfo:
    """The switch a request names: NOT_FOUND if not simulated, UNAVAILABLE while unreachable."""
    info = view.switch(switch)
    if info is None:
        raise RequestError(grpc.StatusCode.NOT_FOUND, f"no such target: {switch!r}")
    if not info.reachable:
        raise RequestError(grpc.StatusCode.UNAVAILABLE, f"target {switch!r} is unreachable")
    return info


class Snapshot:
    """The view's data for one switch at one instant, read lazily (ports per read offset, LLDP)."""

    def __init__(self, view: FabricView, speaker: Speaker) -> None:
        self.view, self.speaker = view, speaker
        self.ts = view.now_ns()
        info = view.switch(speaker.switch)
        self._steps = info if info is not None and info.clock_steps else None
        #: the device clock's distance from true time now: its offset plus any ``clock_step`` in force
        self.clock_ns = self.clock_at(self.ts)
        self._ports: dict[int, list[PortCounters]] = {}
        self._lldp: list[LldpNeighbor] | None = None
        self._removed: frozenset[str] | None = None
        self._optics: dict[int, list[OpticReading]] = {}

    def ports(self, offset_ns: int = 0) -> list[PortCounters]:
        """The present ports, read ``offset_ns`` after the snapshot's time, in device time."""
        found = self._ports.get(offset_ns)
        if found is None:
            raw = self.view.ports(self.speaker.switch, self.ts + offset_ns)
            if self.clock_ns or self._steps is not None:  # fresh objects per call (FabricView.ports)
                for p in raw:
                    if p.last_change_ns:
                        p.last_change_ns += self.clock_at(p.last_change_ns)
                    if p.last_clear_ns:
                        p.last_clear_ns += self.clock_at(p.last_clear_ns)
            found = raw
            if not all(p.present for p in raw):
                found = [p for p in raw if p.present]
            if self._removed is None:
                self._removed = frozenset(p.name for p in raw if not p.present)
            self._ports[offset_ns] = found
        return found

    def clock_at(self, t_ns: int) -> int:
        """The device clock's distance from true time at ``t_ns`` (its offset, and the steps then)."""
        step = self._steps.clock_step_at(t_ns) if self._steps is not None else 0
        return self.speaker.device.clock_offset_ns + step

    def removed(self) -> frozenset[str]:
        """The ports whose interface is gone (optic pulled) at this instant."""
        if self._removed is None:
            self.ports()
        assert self._removed is not None
        return self._removed

    def optics(self, offset_ns: int = 0) -> list[OpticReading]:
        """The transceivers and FEC of the switch's present, cabled ports (link health)."""
        found = self._optics.get(offset_ns)
        if found is None:
            # a FabricView that simulates no transceivers (a replay) serves no link-health data
            read = getattr(self.view, "transceivers", None)
            found = [] if read is None else list(read(self.speaker.switch, self.ts + offset_ns))
            self._optics[offset_ns] = found
        return found

    def lldp(self) -> list[LldpNeighbor]:
        """The switch's LLDP remote table."""
        if self._lldp is None:
            self._lldp = self.view.lldp(self.speaker.switch)
        return self._lldp

    def groups(self, sel: Selection, encoding: Encoding) -> tuple[list[Group], int]:
        """The selection's Notification groups, and the read offset they are stamped with."""
        shape = self.speaker.shape
        offset = shape.offsets.get(sel.family, 0)
        if sel.family in OPTICS_FAMILIES:
            return shape.render_optics(self.speaker.target, sel, encoding, self.optics(offset)), offset
        if sel.family in shape.counters_optics:  # SONiC's COUNTERS hash: its FEC fields too
            ports, readings = self.ports(offset), self.optics(offset)
            return shape.render_with_optics(self.speaker.target, sel, encoding, ports, readings), offset
        if sel.family in _LLDP_FAMILIES:
            return shape.render(self.speaker.target, sel, encoding, (), self.lldp()), offset
        return shape.render(self.speaker.target, sel, encoding, self.ports(offset), ()), offset


class Batch:
    """The Notifications of one instant, merged per (read offset, prefix, note), in device time."""

    def __init__(
        self, ts: int, device: Device = DEFAULT_DEVICE, rng: random.Random | None = None, clock_ns: int | None = None
    ) -> None:
        """``clock_ns``: the device clock's distance from true time (default: the device's offset)."""
        self._ts = ts + (device.clock_offset_ns if clock_ns is None else clock_ns)
        self._jitter = device.jitter_ns
        self._rng = rng or random.Random()
        self._parts: dict[tuple[int, bytes, bytes], tuple[list[bytes], list[bytes]]] = {}
        self.updates = 0

    def add(
        self,
        prefix: bytes,
        updates: list[bytes],
        deletes: Sequence[bytes] = (),
        *,
        offset_ns: int = 0,
        note: bytes = b"",
    ) -> None:
        """Add updates (taking ownership of the list) and delete paths under one prefix."""
        key = (offset_ns, prefix, note)
        found = self._parts.get(key)
        if found is None:
            self._parts[key] = (updates, list(deletes))
        else:
            found[0].extend(updates)
            found[1].extend(deletes)
        self.updates += len(updates)

    def messages(self) -> list[bytes]:
        """One SubscribeResponse per part, in time order (a later read offset comes later)."""
        items: Iterable[tuple[tuple[int, bytes, bytes], tuple[list[bytes], list[bytes]]]] = self._parts.items()
        if len({k[0] for k in self._parts}) > 1:
            items = sorted(items, key=lambda kv: kv[0][0])
        stamps: dict[int, bytes] = {}
        out: list[bytes] = []
        jitter, rng = self._jitter, self._rng
        for (offset, prefix, _), (u, d) in items:
            if jitter:
                ts_field = timestamp(max(0, self._ts + offset + rng.randint(-jitter, jitter)))
            else:
                ts_field = stamps.get(offset) or stamps.setdefault(offset, timestamp(self._ts + offset))
            out.append(notification(ts_field, prefix, u, d))
        return out

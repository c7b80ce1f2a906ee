"""What each fault kind does to the simulated wiring, and how clearing it undoes that.

Every effect is recorded against the fault's id (a cable's ``down`` set, its ``caps``, a
switch's ``booting``/``unreachable`` set, the wiring's ``storms``/``bursts``), so overlapping
faults compose and clearing one leaves the others in force. Choices:

* ``link_flap``: down at once, then a toggle every ``period_s / 2``; with ``count``, it ends
  up after ``count`` down/up cycles (the fault stays listed until cleared).
* ``reboot``: cables down, counters restart from 0, unreachable for ``boot_s``, then cables up;
  it stays listed until cleared. Clearing it early ends the boot at once; counters are not
  restored (a reboot happened).
* ``link_down`` with ``removed``: the cable goes down as for a plain ``link_down`` and the
  port is marked not present (:attr:`SimPort.removed`) until the fault clears.
* ``snmp_slow``: recorded on the switch; the SNMP agent reads it from ``SwitchInfo``.
* ``counter_clear``: every port of the switch re-based at ``t`` (as a reboot does, without the
  boot) and the switch's ``cleared_ns`` set; clearing the fault undoes nothing.
* ``clock_step``: recorded on the switch (``clock_steps``, since when and, once cleared, until when);
  the gNMI server adds the steps in force at each time it stamps (``SwitchInfo.clock_step_at``):
  a Notification now, a last-change or last-clear when it happened. Clearing steps the clock back.
* the optics kinds (``optic_degrade``, ``laser_aging``, ``dirty_connector``, ``fec_burst``):
  recorded on the port's transceiver (:mod:`simulator.optics`); when the optic will fail, that
  instant is scheduled and the cable goes down then, until the fault clears (the optic is
  replaced). A ``fec_burst`` recovers after ``duration_s`` and stays listed until cleared.
* ``miswire``: the NIC moves to the port at the *same place* on ``to_leaf`` (what a technician
  does who picks the wrong switch; :func:`~simulator.faults.miswire_target`). If that port is
  free, the NIC lands there and the designed port goes dark; if it is taken, the two cables are
  swapped (both ports stay up, each sees the other's server in LLDP, and each counts an unplug
  and a plug as two carrier transitions).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from fabric.model import Endpoint
from simulator.faults import OPTIC_KINDS, AppliedFault, FaultConflict, FaultKind, miswire_target
from simulator.wiring import SimPort, Wire, Wiring

if TYPE_CHECKING:
    from simulator.fabric_state import FabricState


def start(state: FabricState, fault: AppliedFault, t: int) -> None:
    """Put ``fault`` into effect at ``t``; raises FaultError (and changes nothing) if it cannot be."""
    wiring, spec, fid = state.wiring, fault.spec, fault.id
    kind = spec.kind
    if kind is FaultKind.MISWIRE:
        _miswire(state, fault, t, undo=False)
    elif spec.port is None:
        _switch_start(state, fault, t)
    else:
        assert spec.port is not None
        port = wiring.port(fault.switch, spec.port)
        if kind is FaultKind.LINK_DOWN:
            port.wire.down.add(fid)
            if spec.removed:
                port.removed.add(fid)
                wiring.changed[(port.sw.name, port.name)] = None  # even if the link was down already
            wiring.refresh(port.wire, t)
        elif kind is FaultKind.LINK_FLAP:
            _flap(state, fault, 0, t)
        elif kind is FaultKind.SPEED_DEGRADE:
            assert spec.speed_gbps is not None
            port.wire.caps[fid] = spec.speed_gbps * 1_000_000_000
            wiring.refresh(port.wire, t)
        elif kind is FaultKind.PFC_STORM:
            assert spec.priority is not None and spec.rate_pps is not None
            wiring.storms[fid] = (port, spec.priority, spec.rate_pps)
        elif kind in OPTIC_KINDS:
            _optic_start(state, fault, t)
        else:
            assert spec.rate_pps is not None
            wiring.bursts[fid] = (port, spec.rate_pps)


def stop(state: FabricState, fault: AppliedFault, t: int) -> None:
    """End ``fault``'s effect at ``t``."""
    wiring, spec, fid = state.wiring, fault.spec, fault.id
    kind = spec.kind
    if kind is FaultKind.MISWIRE:
        _miswire(state, fault, t, undo=True)
    elif spec.port is None:
        _switch_stop(state, fault, t)
    else:
        assert spec.port is not None
        port = wiring.port(fault.switch, spec.port)
        if kind in OPTIC_KINDS:
            optic = state.optics.of(fault.switch, spec.port)
            optic.faults.pop(fid, None)
            optic.failed.discard(fid)
            optic.changed(t)
        if fid in port.removed:
            port.removed.discard(fid)
            wiring.changed[(port.sw.name, port.name)] = None
        wire = port.wire
        wire.down.discard(fid)
        wire.caps.pop(fid, None)
        wiring.storms.pop(fid, None)
        wiring.bursts.pop(fid, None)
        wiring.refresh(wire, t)


def _switch_start(state: FabricState, fault: AppliedFault, t: int) -> None:
    """The kinds that act on a whole switch."""
    wiring, spec, fid = state.wiring, fault.spec, fault.id
    sw = wiring.switches[fault.switch]
    kind = spec.kind
    if kind is FaultKind.SWITCH_UNREACHABLE:
        sw.unreachable.add(fid)
        wiring.changed[(sw.name, None)] = None
    elif kind is FaultKind.REBOOT:
        assert spec.boot_s is not None
        sw.booting.add(fid)
        for port in sw.ports:
            wiring.refresh(port.wire, t)
        wiring.reset(sw, t)
        wiring.changed[(sw.name, None)] = None
        state.schedule(t + round(spec.boot_s * 1e9), _once(state, fault, _boot_done))
    elif kind is FaultKind.SNMP_SLOW:
        assert spec.delay_s is not None
        sw.snmp_delay[fid] = spec.delay_s
    elif kind is FaultKind.CLOCK_STEP:
        assert spec.step_s is not None
        sw.clock_steps[(fid, fault.started_at_ns)] = (t, None, round(spec.step_s * 1e9))
    elif kind is not FaultKind.COUNTER_CLEAR:
        raise AssertionError(f"no switch-wide effect for {kind}")
    else:
        wiring.clear_counters(sw, t)


def _switch_stop(state: FabricState, fault: AppliedFault, t: int) -> None:
    wiring, kind, fid = state.wiring, fault.spec.kind, fault.id
    sw = wiring.switches[fault.switch]
    if kind is FaultKind.SWITCH_UNREACHABLE:
        sw.unreachable.discard(fid)
        wiring.changed[(sw.name, None)] = None
    elif kind is FaultKind.REBOOT:
        _boot_done(state, fault, t)
    elif kind is FaultKind.SNMP_SLOW:
        sw.snmp_delay.pop(fid, None)
    elif kind is FaultKind.CLOCK_STEP:
        since, _, step = sw.clock_steps[(fid, fault.started_at_ns)]
        sw.clock_steps[(fid, fault.started_at_ns)] = (since, t, step)  # stepped back
    elif kind is not FaultKind.COUNTER_CLEAR:  # a counter clear stays: cleared counters do not come back
        raise AssertionError(f"no switch-wide effect for {kind}")


def _once(
    state: FabricState, fault: AppliedFault, action: Callable[[FabricState, AppliedFault, int], None]
) -> Callable[[int], None]:
    """A timed action that does nothing if ``fault`` was cleared in the meantime."""

    def fire(when: int) -> None:
        if state.is_active(fault):
            action(state, fault, when)

    return fire


_OPTIC_ENTRY: dict[FaultKind, tuple[str, str]] = {
    FaultKind.OPTIC_DEGRADE: ("degrade", "db_per_hour"),
    FaultKind.LASER_AGING: ("aging", "ma_per_hour"),
    FaultKind.DIRTY_CONNECTOR: ("dirty", "loss_db"),
    FaultKind.FEC_BURST: ("burst", "duration_s"),
}


def _optic_start(state: FabricState, fault: AppliedFault, t: int) -> None:
    """An optics fault acts on the port's transceiver; a failure it leads to is scheduled."""
    spec = fault.spec
    assert spec.port is not None
    optic = state.optics.of(fault.switch, spec.port)
    tag, name = _OPTIC_ENTRY[spec.kind]
    figure = getattr(spec, name)
    assert isinstance(figure, float)
    optic.faults[fault.id] = (tag, t, figure)
    optic.changed(t)
    if spec.kind is FaultKind.FEC_BURST:
        state.schedule(t + round(figure * 1e9), _once(state, fault, _burst_done))
    when = optic.failure_at(t)
    if when is not None:
        state.schedule(when, _once(state, fault, _optic_failed))


def _burst_done(state: FabricState, fault: AppliedFault, t: int) -> None:
    """A FEC burst recovers (the fault stays listed until cleared)."""
    assert fault.spec.port is not None
    optic = state.optics.of(fault.switch, fault.spec.port)
    if optic.faults.pop(fault.id, None) is not None:
        optic.changed(t)


def _optic_failed(state: FabricState, fault: AppliedFault, t: int) -> None:
    """The optic can carry no more: the link goes down until the fault clears."""
    assert fault.spec.port is not None
    optic = state.optics.of(fault.switch, fault.spec.port)
    optic.failed.add(fault.id)
    optic.changed(t)
    wire = state.wiring.port(fault.switch, fault.spec.port).wire
    wire.down.add(fault.id)
    state.wiring.refresh(wire, t)


def _boot_done(state: FabricState, fault: AppliedFault, t: int) -> None:
    wiring = state.wiring
    sw = wiring.switches[fault.switch]
    if fault.id not in sw.booting:
        return
    sw.booting.discard(fault.id)
    for port in sw.ports:
        wiring.refresh(port.wire, t)
    wiring.changed[(sw.name, None)] = None


def _flap(state: FabricState, fault: AppliedFault, k: int, t: int) -> None:
    """Toggle ``k`` of a flap (even: down, odd: up), then schedule the next one."""
    spec, fid = fault.spec, fault.id
    assert spec.port is not None and spec.period_s is not None
    wire = state.wiring.port(fault.switch, spec.port).wire
    if k % 2 == 0:
        wire.down.add(fid)
    else:
        wire.down.discard(fid)
    state.wiring.refresh(wire, t)
    nxt = k + 1
    if spec.count is None or nxt < 2 * spec.count:
        when = fault.started_at_ns + nxt * round(spec.period_s * 1e9 / 2)
        state.schedule(when, _once(state, fault, lambda s, f, w: _flap(s, f, nxt, w)))


def _miswire(state: FabricState, fault: AppliedFault, t: int, *, undo: bool) -> None:
    wiring, spec = state.wiring, fault.spec
    assert spec.port is not None and spec.to_leaf is not None
    home = wiring.port(fault.switch, spec.port)
    to_port = miswire_target(state.fabric, Endpoint(fault.switch, spec.port), spec.to_leaf)
    assert to_port is not None  # resolve() checked it
    target = wiring.port(spec.to_leaf, to_port)
    if not undo:
        _check_free(state, fault, home, target)
        fault.to_port = target.name
    hw, tw = home.wire, target.wire
    if not undo and tw.server is None:  # a free port: the NIC lands there, its home goes dark
        tw.server, hw.server = hw.server, None
    elif undo and fault.swapped_with is None:
        hw.server, tw.server = tw.server, None
    else:
        if not undo:
            assert tw.server is not None
            fault.swapped_with = f"{tw.server.node}:{tw.server.port}"
        hw.server, tw.server = tw.server, hw.server
        _recable(wiring, hw, t)
        _recable(wiring, tw, t)
    wiring.refresh(hw, t)
    wiring.refresh(tw, t)


def _check_free(state: FabricState, fault: AppliedFault, home: SimPort, target: SimPort) -> None:
    if home.wire.server is None:
        raise FaultConflict(f"{fault.switch} {home.name} has no NIC plugged in to move")
    for other in state.active():
        if other.spec.kind is FaultKind.MISWIRE and other.id != fault.id:
            assert other.spec.to_leaf is not None and other.spec.port is not None
            ports = {(other.switch, other.spec.port), (other.spec.to_leaf, other.to_port)}
            for port in (home, target):
                if (port.sw.name, port.name) in ports:
                    raise FaultConflict(f"{port.sw.name} {port.name} is already miswired by fault {other.id}")


def _recable(wiring: Wiring, wire: Wire, t: int) -> None:
    """A live cable pulled and another plugged in: two carrier transitions, a new LLDP neighbour."""
    if wire.oper:
        wire.carrier += 2
        wire.last_change = t
    wiring.touch(wire)

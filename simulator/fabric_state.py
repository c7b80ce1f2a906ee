"""The simulated fabric behind :class:`simulator.view.FabricView`: time, faults and listeners.

:class:`FabricState` serves every leaf, spine and superspine of a fabric. Its counters are
closed forms of time (:mod:`simulator.traffic`) over the fabric's cables and flows
(:mod:`simulator.wiring`); nothing runs between events. Faults come in through
:meth:`FabricState.apply` and :meth:`FabricState.clear` (:mod:`simulator.faults` checks them,
:mod:`simulator.fault_effects` carries them out).

Timed transitions (flap toggles, the end of a reboot) wait in a heap and are processed in time
order *before* any read at a later time, so every reader sees the same counters whoever reads
first and whenever; :meth:`FabricState.run` makes them happen on time when nobody reads, and
delivers change notifications. A read at a time before the latest event is evaluated at that
event (the state never un-happens). Use from one thread, the event loop's.

The fabric started ``TrafficParams.uptime_ns`` before the state was built (days, from the
seed): counters begin large, as on switches that have been up for a while, and every switch
reports that common boot time until it reboots. After a reboot its counters restart from 0,
so its ports agree with their peers in deltas, no longer in absolute values.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from fabric.model import Fabric
from fabric.tasks import stop_task
from simulator import fault_effects
from simulator.faults import AppliedFault, FaultConflict, FaultError, FaultSpec, resolve
from simulator.optics import OpticReading, OpticsBook
from simulator.traffic import TrafficParams
from simulator.view import ChangeListener, LldpNeighbor, PortCounters, SwitchInfo
from simulator.wiring import Wiring

log = logging.getLogger(__name__)

#: The longest the background task sleeps when no transition is due.
IDLE_S = 1.0


class FabricState:
    """Every switch of ``fabric``, simulated: a FabricView with faults.

    Deterministic for ``seed`` and the sequence of clock readings (``clock`` returns Unix ns).
    """

    def __init__(self, fabric: Fabric, *, seed: int = 0, clock: Callable[[], int] = time.time_ns) -> None:
        self.fabric = fabric
        self.params = TrafficParams.from_seed(seed)
        self._clock = clock
        start = clock()
        self.wiring = Wiring(fabric, self.params, start - self.params.uptime_ns, seed)
        #: Every cabled port's transceiver and FEC decoder (simulator.optics).
        self.optics = OpticsBook(fabric, seed, start - self.params.uptime_ns)
        self._floor = start
        self._names = tuple(fabric.switches)
        self._faults: dict[str, AppliedFault] = {}
        self._ids = itertools.count(1)
        self._events: list[tuple[int, int, Callable[[int], None]]] = []
        self._seq = itertools.count()
        self._listeners: list[ChangeListener] = []
        self._task: asyncio.Task[None] | None = None
        self._wake: asyncio.Event | None = None

    # -- FabricView ---------------------------------------------------------------------

    def switch_names(self) -> Sequence[str]:
        """Every switch of the fabric, in the fabric's order."""
        return self._names

    def switch(self, name: str) -> SwitchInfo | None:
        """Role, boot time and reachability of one switch; None for an unknown name."""
        sw = self.wiring.switches.get(name)
        if sw is None:
            return None
        self._sync(None)
        delay = max(sw.snmp_delay.values(), default=0.0)
        return SwitchInfo(sw.name, sw.role.value, sw.boot_ns, not (sw.booting or sw.unreachable), delay, sw.nos,
                          tuple(sorted(sw.clock_steps.values())))  # fmt: skip

    def ports(self, switch: str, now_ns: int | None = None) -> list[PortCounters]:
        """Every port of ``switch`` with its counters at ``now_ns`` (default: now); [] if unknown."""
        sw = self.wiring.switches.get(switch)
        if sw is None:
            return []
        return self.wiring.evaluate(sw, self._sync(now_ns))

    def transceivers(self, switch: str, now_ns: int | None = None) -> list[OpticReading]:
        """DOM and FEC of every present, cabled port of ``switch`` at ``now_ns``; [] if unknown."""
        sw = self.wiring.switches.get(switch)
        if sw is None:
            return []
        t = self._sync(now_ns)
        present = [p.name for p in self.wiring.evaluate(sw, t) if p.present]
        return self.optics.read(switch, present, t)

    def lldp(self, switch: str) -> list[LldpNeighbor]:
        """The switch's LLDP remote table (entries leave with the link; a miswire shows here)."""
        sw = self.wiring.switches.get(switch)
        if sw is None:
            return []
        self._sync(None)
        return self.wiring.lldp(sw)

    def now_ns(self) -> int:
        """The clock's now (Unix ns)."""
        return self._clock()

    def add_listener(self, listener: ChangeListener) -> None:
        """Call ``listener(switch, port_or_None)`` on every oper/speed/LLDP/reachability change."""
        self._listeners.append(listener)

    def remove_listener(self, listener: ChangeListener) -> None:
        """Stop calling ``listener``; an unknown one is ignored."""
        with contextlib.suppress(ValueError):
            self._listeners.remove(listener)

    # -- faults -------------------------------------------------------------------------

    def apply(self, spec: FaultSpec | Mapping[str, Any]) -> AppliedFault:
        """Apply a fault now and return it as applied (``id``, chosen ``port``, ``started_at``).

        Raises :class:`FaultError` (:class:`FaultConflict` for an id in use or a cable already
        miswired) and then changes nothing.
        """
        if not isinstance(spec, FaultSpec):
            spec = FaultSpec.from_dict(spec)
        resolved = resolve(self.fabric, spec, self._next_id())
        if resolved.id in self._faults:
            raise FaultConflict(f"fault id {resolved.id!r} is already active")
        t = self._sync(None)
        fault = AppliedFault(resolved, t)
        self._faults[fault.id] = fault
        try:
            fault_effects.start(self, fault, t)
        except FaultError:
            del self._faults[fault.id]
            raise
        self._settle(t)
        return fault

    def clear(self, fault_id: str) -> bool:
        """End an active fault now (counters stay monotonic); False when no such fault is active."""
        if fault_id not in self._faults:
            return False
        t = self._sync(None)  # first: its own transitions due by now still happen
        fault = self._faults.pop(fault_id)
        fault_effects.stop(self, fault, t)
        self._settle(t)
        return True

    def active(self) -> list[AppliedFault]:
        """The active faults, oldest first."""
        return list(self._faults.values())

    def get(self, fault_id: str) -> AppliedFault | None:
        """One active fault, or None."""
        return self._faults.get(fault_id)

    def is_active(self, fault: AppliedFault) -> bool:
        """True while ``fault`` (this very application of it) is in effect."""
        return self._faults.get(fault.id) is fault

    def _next_id(self) -> str:
        while True:
            candidate = f"f{next(self._ids)}"
            if candidate not in self._faults:
                return candidate

    # -- time ---------------------------------------------------------------------------

    def tick(self, now_ns: int | None = None) -> None:
        """Process the transitions due by ``now_ns`` (default: now) and notify listeners."""
        self._sync(now_ns)
        self._flush()

    def schedule(self, when_ns: int, action: Callable[[int], None]) -> None:
        """Run ``action(when_ns)`` once time reaches ``when_ns`` (timed fault transitions)."""
        heapq.heappush(self._events, (when_ns, next(self._seq), action))
        if self._wake is not None:
            self._wake.set()

    async def run(self) -> None:
        """Fire timed transitions on time and deliver change notifications, until cancelled."""
        wake = self._wake = asyncio.Event()
        try:
            while True:
                self.tick()
                delay = IDLE_S
                if self._events:
                    delay = min(delay, max(0.0, (self._events[0][0] - self.now_ns()) / 1e9))
                wake.clear()
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(delay + 0.001):
                        await wake.wait()
        finally:
            self._wake = None

    def start(self) -> None:
        """Start :meth:`run` as a task this state owns (call from the event loop)."""
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self.run(), name="fabric-state")

    async def stop(self) -> None:
        """Cancel the task started by :meth:`start` and wait for it to end."""
        task, self._task = self._task, None
        await stop_task(task, "the fabric state's clock", log)

    def _sync(self, now_ns: int | None) -> int:
        """Clamp a read time to the latest change and process the transitions due by then."""
        t = self._clock() if now_ns is None else now_ns
        t = max(t, self._floor)
        events = self._events
        while events and events[0][0] <= t:
            when, _, action = heapq.heappop(events)
            when = max(when, self._floor)
            self._floor = when
            action(when)
            self.wiring.settle(when)
        return t

    def _settle(self, t: int) -> None:
        """Re-rate what the change at ``t`` touched, tell the listeners, wake the task."""
        self._floor = t
        self.wiring.settle(t)
        self._flush()
        if self._wake is not None:
            self._wake.set()

    def _flush(self) -> None:
        changed = self.wiring.changed
        if not changed:
            return
        self.wiring.changed = {}
        for switch, port in changed:
            for listener in list(self._listeners):
                try:
                    listener(switch, port)
                except Exception:  # one broken subscriber must not stop the simulation
                    log.exception("change listener %r failed", listener)

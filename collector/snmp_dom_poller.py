"""One switch's transceiver DOM over SNMP: when the entity tables are read, and one DOM poll.

:mod:`collector.snmp_dom` decodes; this keeps a switch's tables and plan between polls. The tables
are read at the first poll, after a reboot (:meth:`DomPoller.invalidate`) and when an unknown
sensor answers (a module plugged in). Every :data:`REFRESH_POLLS` polls the plan is checked: where
the agent's entLastChangeTime (RFC 6933: sysUpTime at the last change of any entity row) is where
it was at the last read, only the sensors' oper status is re-read, and the plan is re-made from
the tables kept if a status moved; otherwise, on an agent that does not serve it (or answers it
with an error, counted), and every :data:`FULL_CHECKS` checks whatever it says (an agent whose
stamp never moves, a module swapped for another kind at the same indexes), every table is read
again.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import UTC, datetime

from collector.oids import (
    ENT_ALIAS,
    ENT_LAST_CHANGE,
    ENT_PHYSICAL,
    SENSOR_LIVE,
    SENSOR_STATIC,
    SENSOR_STATUS,
    Column,
)
from collector.snmp_client import SnmpProtocolError
from collector.snmp_dom import EntityTree, Invalid, SensorPlan, apply_plan, plan
from collector.snmp_walk import Value
from store.dom import DomSample

#: The plan is checked after this many DOM polls (an hour at the default 60 s): oper status re-read,
#: or every table where entLastChangeTime moved. Unknown sensors and reboots re-read them at once.
REFRESH_POLLS = 60
#: Every this many checks (a day at the defaults) every table is read, entLastChangeTime or not.
FULL_CHECKS = 24


class _Unread:
    """Not read yet (a stamp of None means the agent has none)."""


_UNREAD = _Unread()

Walk = Callable[[Sequence[Column], int | None], Awaitable[dict[str, dict[str, Value]]]]
#: GET of scalar instances; the ones the agent lacks are absent from the answer.
Get = Callable[[Sequence[str]], Awaitable[Mapping[str, Value]]]


class DomPoller:
    """One switch's DOM over SNMP: its cached entity tables and sensor plan, and one DOM poll."""

    def __init__(self, switch: str, count_invalid: Invalid) -> None:
        self.switch = switch
        self.count_invalid = count_invalid
        self.plan: SensorPlan | None = None
        self.polls = 0  # since the plan was last made
        self.unmapped = 0  # sensors skipped so far: no entity maps them to an interface
        self.refreshes = 0  # reads of every entity table
        self.replans = 0  # re-plans from the tables kept (entLastChangeTime unmoved, a status changed)
        self.checks = 0  # periodic checks
        self._tree = EntityTree()
        self._static: dict[str, dict[str, Value]] = {}
        self._stamp: int | None = None  # entLastChangeTime at the last read; None: not served

    def invalidate(self) -> None:
        """Re-read the entity tables at the next poll (a reboot may renumber them)."""
        self.plan = None

    async def _read_tables(self, walk: Walk, get: Get, stamp: int | _Unread | None = _UNREAD) -> SensorPlan:
        # the stamp first (or the one just read): a change while the tables are read shows next time
        self._stamp = await self._last_change(get) if isinstance(stamp, _Unread) else stamp
        physical = await walk(ENT_PHYSICAL, None)
        alias = await walk(ENT_ALIAS, None)
        self._static = await walk(SENSOR_STATIC, None)
        self._tree = EntityTree.from_walk(physical, alias)
        self.refreshes += 1
        return self._replan()

    async def _check(self, walk: Walk, get: Get, known: int) -> SensorPlan:
        """The periodic check: oper status only while entLastChangeTime stands still, else every table."""
        self.checks += 1
        stamp = await self._last_change(get)
        if stamp is None or stamp != self._stamp or self.checks % FULL_CHECKS == 0 or self.plan is None:
            return await self._read_tables(walk, get, stamp)
        status = (await walk(SENSOR_STATUS, known or None)).get("status", {})
        if status == self._static.get("status"):
            self.polls = 0
            return self.plan  # nothing moved: the plan stands
        self._static["status"] = status
        self.replans += 1
        return self._replan()

    def _replan(self) -> SensorPlan:
        self.plan = plan(self._tree, self._static)
        self.polls = 0
        return self.plan

    async def poll(self, walk: Walk, get: Get, if_names: Mapping[str, str], at_ns: int) -> list[DomSample]:
        """Walk the sensors' values (and the entity tables when due); the samples of mapped transceivers."""
        read = self.refreshes
        if self.plan is None:
            sensors = await self._read_tables(walk, get)
        elif self.polls >= REFRESH_POLLS:
            sensors = await self._check(walk, get, len(self.plan.known))
        else:
            sensors = self.plan
        values = (await walk(SENSOR_LIVE, len(sensors.known) or None)).get("value", {})
        if read == self.refreshes and any(i not in sensors.known for i in values):
            sensors = await self._read_tables(walk, get)  # a new sensor (a module plugged in): describe it now
            values = (await walk(SENSOR_LIVE, len(sensors.known) or None)).get("value", {})
        self.polls += 1
        at = datetime.fromtimestamp(at_ns / 1e9, tz=UTC)
        samples, counts = apply_plan(at, self.switch, sensors, values, if_names)
        for kind, n in counts.invalid.items():
            self.count_invalid(f"ENTITY-SENSOR-MIB: {kind}", n)
        self.unmapped += counts.unmapped
        return samples

    async def _last_change(self, get: Get) -> int | None:
        """The agent's entLastChangeTime (TimeTicks), None when it does not serve one or answers the
        GET with an error-status (counted: DOM goes on, its tables read every check)."""
        try:
            value = (await get([ENT_LAST_CHANGE])).get(ENT_LAST_CHANGE)
        except SnmpProtocolError:
            self.count_invalid("ENTITY-MIB: entLastChangeTime refused (error-status)", 1)
            return None
        return value if isinstance(value, int) and value.__class__ is int else None  # no bool

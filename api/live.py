"""Fabric-wide figures the API keeps in memory between requests.

* :class:`SwitchStates`: every switch's live state (ports up and reporting, last sample,
  reachability, its clock as its collector reports it) from one query over the newest sampling
  interval up to now (a row stamped in the future is read once its time comes), recomputed at
  most every ``ttl_s`` and by one request at a time (the others wait for it). A switch list is then a slice
  of memory, whatever the load: at 16,384 GPUs the query reads ~82K rows, so answering it per
  request would let a dashboard wall saturate the database.
* :class:`Placement`: where a job's hosts sit (their leaf per rail) and how many spines each
  rail has, from the inventory, remembered for the last few host sets.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from fabric.errors import TopologyError
from fabric.model import Fabric, Role
from store.db import Pool, Record

#: The newest sample up to now: a switch whose clock runs ahead must not move "now" into the future
#: (and empty every other switch's window); the collector bounds such times, readers bound them too.
NEWEST_SQL = "SELECT time FROM port_counters WHERE time <= $1 ORDER BY time DESC LIMIT 1"

_STATES_SQL = """
WITH w AS (
    SELECT switch, port, last(oper_status, time) AS st, max(time) AS t
    FROM port_counters WHERE time > $1 AND time <= $2 GROUP BY switch, port
),
agg AS (
    SELECT switch, max(t) AS last_sample, count(*) FILTER (WHERE st = 1) AS up, count(*) AS reporting
    FROM w GROUP BY switch
),
total AS (SELECT switch, count(*) AS n FROM ports GROUP BY switch),
reach AS (
    SELECT DISTINCT ON (switch) switch, reachable, state, time, detail
    FROM switch_reachability WHERE time <= $3 ORDER BY switch, time DESC
)
SELECT s.name, s.role, s.grp, s.rail, s.plane, s.known, a.last_sample, coalesce(a.up, 0) AS up,
       coalesce(a.reporting, 0) AS reporting, coalesce(t.n, 0) AS total,
       r.reachable, r.state, r.time AS since, r.detail,
       c.skew_s AS clock_skew_s, c.corrected AS clock_corrected, c.replaced AS clock_replaced
FROM switches s
LEFT JOIN agg a ON a.switch = s.name
LEFT JOIN total t ON t.switch = s.name
LEFT JOIN reach r ON r.switch = s.name
LEFT JOIN switch_clocks c ON c.switch = s.name
ORDER BY CASE s.role WHEN 'leaf' THEN 1 WHEN 'spine' THEN 2 WHEN 'superspine' THEN 3 ELSE 4 END,
         s.grp, s.rail, s.idx, s.name
"""


@dataclass(frozen=True, slots=True)
class SwitchSnapshot:
    """Every switch's state over one window (``start``, ``end``], in display order."""

    taken: float
    start: datetime | None
    end: datetime | None
    rows: list[Record] = field(default_factory=list)
    by_name: dict[str, Record] = field(default_factory=dict)


class SwitchStates:
    """The fabric's switch states, recomputed at most every ``ttl_s``."""

    def __init__(self, pool: Pool, window_s: float, *, ttl_s: float = 5.0) -> None:
        self.pool = pool
        self.window_s = window_s
        self.ttl_s = ttl_s
        self.computed = 0
        self._snapshot: SwitchSnapshot | None = None
        self._lock = asyncio.Lock()

    def _fresh(self) -> SwitchSnapshot | None:
        snap = self._snapshot
        return snap if snap is not None and time.monotonic() - snap.taken < self.ttl_s else None

    async def get(self) -> SwitchSnapshot:
        """The current snapshot (computing it when older than ``ttl_s``)."""
        snap = self._fresh()
        if snap is not None:
            return snap
        async with self._lock:
            snap = self._fresh()
            if snap is None:
                snap = self._snapshot = await self._compute()
                self.computed += 1
            return snap

    async def _compute(self) -> SwitchSnapshot:
        taken = time.monotonic()
        now = datetime.now(UTC)
        async with self.pool.acquire() as conn:
            end = await conn.fetchval(NEWEST_SQL, now)
            start = None if end is None else end - timedelta(seconds=self.window_s)
            rows = await conn.fetch(_STATES_SQL, start, end, now)
        return SwitchSnapshot(taken, start, end, list(rows), {r["name"]: r for r in rows})


class Placement:
    """Where hosts sit in the fabric: their leaf per rail, and each rail's spine count."""

    def __init__(self, fabric: Fabric, *, remember: int = 256) -> None:
        self.fabric = fabric
        self.remember = remember
        self.spines: dict[int, int] = {}
        for sw in fabric.switches.values():
            if sw.role is Role.SPINE and sw.rail is not None:
                self.spines[sw.rail] = self.spines.get(sw.rail, 0) + 1
        self._leaves: OrderedDict[tuple[str, ...], dict[int, tuple[str, ...]]] = OrderedDict()

    def leaves(self, hosts: tuple[str, ...]) -> dict[int, tuple[str, ...]]:
        """Rail → the leaves the hosts' NICs on that rail are cabled to (unknown hosts are skipped)."""
        hit = self._leaves.get(hosts)
        if hit is not None:
            self._leaves.move_to_end(hosts)
            return hit
        found: dict[int, set[str]] = {}
        for host in hosts:
            server = self.fabric.servers.get(host)
            if server is None:
                continue
            for gpu in range(1, server.gpus + 1):
                try:
                    leaf = self.fabric.leaf_for(host, gpu)
                except TopologyError:
                    continue
                rail = self.fabric.switches[leaf].rail
                if rail is not None:
                    found.setdefault(rail, set()).add(leaf)
        result = {rail: tuple(sorted(names)) for rail, names in sorted(found.items())}
        self._leaves[hosts] = result
        if len(self._leaves) > self.remember:
            self._leaves.popitem(last=False)
        return result

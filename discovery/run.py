"""The crawl: every seed switch read, then every switch its neighbours name that a target reaches.

Each switch is read once, over the protocol its ``targets`` entry names
(:data:`Crawl.readers`: ``gnmi`` → :mod:`discovery.lldp_gnmi`, ``snmp`` → :mod:`discovery.lldp_snmp`),
under one semaphore of ``concurrency`` slots and within ``timeout_s`` (connect, every request
and every retry included). A neighbour is crawled to when its system name matches a target's
patterns (or its short name does, for an FQDN) and it looks like a switch: it was seen with a
port id that is a name or a local number, not a MAC (servers' lldpd sends MACs), or a role
pattern names it a switch. A switch-like neighbour no target matches is listed, not read.

A switch that fails (a timeout, a refusal, a template it cannot fill) is a :class:`Failure` in
the result, never an exception out of the crawl. Every task belongs to one TaskGroup, so the
crawl returns only when every read has ended.

After the crawl, the switches whose neighbours name their ports by local number (Junos: the
ifIndex) and whose ifIndex map is unknown (read over gNMI) are asked for it, once each.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from collector.profile_load import load_profile
from collector.profiles import Profile
from collector.snmp_pysnmp import PysnmpEngines
from collector.targets import SwitchTarget
from config.errors import ConfigError
from discovery.errors import DiscoveryError, SwitchFailed
from discovery.graph import Names
from discovery.lldp_gnmi import GnmiReader
from discovery.lldp_snmp import read_snmp
from discovery.seeds import Targets
from discovery.tables import Neighbor, SwitchTable

log = logging.getLogger(__name__)

#: Called after each switch: (switches done, switches scheduled so far, of those failed).
Progress = Callable[[int, int, int], None]


@dataclass(frozen=True, slots=True)
class CrawlOptions:
    """How hard to crawl: per-switch time limit, switches read at once, the gNMI transport."""

    timeout_s: float = 30.0
    concurrency: int = 64
    gnmi_transport: str = "h2"


@dataclass(frozen=True, slots=True)
class Failure:
    """A switch discovery could not read, and why."""

    switch: str
    error: str
    protocol: str | None = None
    address: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"switch": self.switch, "protocol": self.protocol, "address": self.address, "error": self.error}

    def __str__(self) -> str:
        how = f" ({self.protocol} {self.address})" if self.protocol else ""
        return f"{self.switch}{how}: {self.error}"


@dataclass(slots=True)
class CrawlResult:
    """Every table read, every failure, and the switch-like names no target reaches (→ who saw them)."""

    tables: dict[str, SwitchTable] = field(default_factory=dict)
    failed: dict[str, Failure] = field(default_factory=dict)
    not_targeted: dict[str, str] = field(default_factory=dict)
    seeds: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def polled(self) -> set[str]:
        """Every switch discovery tried to read."""
        return set(self.tables) | set(self.failed)


class Crawl:
    """One discovery run's reads (see the module docstring)."""

    def __init__(
        self,
        targets: Targets,
        options: CrawlOptions,
        *,
        is_switch: Callable[[str], bool] = lambda _name: False,
        progress: Progress | None = None,
    ) -> None:
        """``is_switch`` says a name is a switch whatever its port ids (a role pattern)."""
        self.targets = targets
        self.options = options
        self.is_switch = is_switch
        self.progress = progress
        self.result = CrawlResult()
        self.readers: dict[str, Callable[[SwitchTarget], Awaitable[SwitchTable]]] = {
            "gnmi": self._read_gnmi,
            "snmp": self._read_snmp,
        }
        self._scheduled: set[str] = set()
        self._done = 0
        self._gnmi_targets: dict[str, tuple[SwitchTarget, Profile]] = {}
        self._limit = asyncio.Semaphore(options.concurrency)
        self._engines: PysnmpEngines | None = None
        self._gnmi = GnmiReader(options.gnmi_transport)
        self._tg: asyncio.TaskGroup | None = None

    async def run(self, seeds: Iterable[str]) -> CrawlResult:
        """Read the seeds and everything they lead to; then the ifIndex maps Junos-style ids need."""
        started = time.monotonic()
        self.result.seeds = list(seeds)
        self._engines = PysnmpEngines()
        try:
            async with asyncio.TaskGroup() as tg:
                self._tg = tg
                for name in self.result.seeds:
                    self._schedule(name, "a seed")
            self._tg = None
            await self._ifindex_pass()
        finally:
            self._engines.close()
        self.result.seconds = time.monotonic() - started
        return self.result

    # -- scheduling ---------------------------------------------------------------------------

    def _schedule(self, name: str, seen_by: str) -> None:
        if name in self._scheduled or name in self.result.not_targeted:
            return
        if not self.targets.matches(name):
            self.result.not_targeted[name] = seen_by
            return
        self._scheduled.add(name)
        assert self._tg is not None
        self._tg.create_task(self._poll(name), name=f"discover-{name}")

    def _follow(self, table: SwitchTable) -> None:
        """Schedule the switch-like neighbours of a table that a target reaches."""
        for port, entries in table.neighbors.items():
            for n in entries:
                name = self._crawl_name(n)
                if name is not None:
                    self._schedule(name, f"seen by {table.switch} {port}")

    def _crawl_name(self, n: Neighbor) -> str | None:
        """The name to crawl to for a neighbour, or None (a server, or nameless)."""
        name = n.system_name
        if not name:
            return None
        short = name.partition(".")[0]
        if short != name and not self.targets.matches(name) and self.targets.matches(short):
            name = short  # an FQDN whose host name is the target's
        if n.kind == "mac" and not self.is_switch(name):
            return None
        return name

    # -- reading one switch -------------------------------------------------------------------

    async def _poll(self, name: str) -> None:
        async with self._limit:
            target: SwitchTarget | None = None
            try:
                target = self.targets.resolve(name)
                async with asyncio.timeout(self.options.timeout_s):
                    table = await self.readers[target.protocol](target)
            except TimeoutError:
                self._fail(name, f"no answer within {self.options.timeout_s:g} s", target)
            except (SwitchFailed, DiscoveryError, ConfigError) as exc:
                self._fail(name, str(exc), target)
            except Exception as exc:  # a bug costs one switch, not the whole discovery
                log.exception("discovery: reading %s failed", name)
                self._fail(name, f"internal error: {type(exc).__name__}: {exc}", target)
            else:
                self.result.tables[name] = table
                self._follow(table)
            self._done += 1
            if self.progress is not None:
                self.progress(self._done, len(self._scheduled), len(self.result.failed))

    def _fail(self, name: str, error: str, target: SwitchTarget | None) -> None:
        protocol, address = (target.protocol, target.address) if target is not None else (None, None)
        self.result.failed[name] = Failure(name, error, protocol, address)

    async def _read_snmp(self, target: SwitchTarget) -> SwitchTable:
        assert self._engines is not None
        return await read_snmp(target, self._engines)

    async def _read_gnmi(self, target: SwitchTarget) -> SwitchTable:
        profile = load_profile(target.profile)
        table = await self._gnmi.read(target, profile)
        self._gnmi_targets[target.switch] = (target, profile)
        return table

    # -- ifIndex maps for local port ids ------------------------------------------------------

    async def _ifindex_pass(self) -> None:
        tables = self.result.tables
        names = Names(tables, self._scheduled)
        wanted = {
            names(n.system_name)
            for t in tables.values()
            for entries in t.neighbors.values()
            for n in entries
            if n.kind == "local"
        }
        todo = sorted(w for w in wanted if w in self._gnmi_targets and not tables[w].if_names)
        if todo:
            await asyncio.gather(*(self._ifindex(name) for name in todo))

    async def _ifindex(self, name: str) -> None:
        target, profile = self._gnmi_targets[name]
        async with self._limit:
            try:
                async with asyncio.timeout(self.options.timeout_s):
                    self.result.tables[name].if_names = await self._gnmi.read_ifindex(target, profile)
            except TimeoutError:
                pass  # the port descriptions stand in (see discovery.graph)

"""One switch over SNMP: its cached index tables, one poll, and the readings the poll yields.

A poll is a GET of sysUpTime and ifNumber, then (under the collector's concurrency limit) one
multi-column walk of every ifIndex-indexed counter (IF-MIB, EtherLike-MIB), the PFC table
(CISCO-PFC-EXT-MIB per priority, else IEEE8021-PFC-MIB totals) and lldpRemTable. Every DOM
interval, the transceivers' sensors are read apart, over a session of their own
(:meth:`SwitchPoller.poll_dom`, :mod:`collector.snmp_dom_poller`): an entity walk of hundreds of rows
has its own deadline, and never makes the counters late or the switch unreachable. The index
tables (ifName/ifDescr/ifAlias/ifType, lldpLocPortTable) are walked on the first poll, every
``INDEX_REFRESH_POLLS`` polls, when ifNumber changes, after an ifLastChange moved, and when
a counter row shows up for an ifIndex they lack.

Times: sysUpTime gives the boot instant (reading time - uptime). The agent read sysUpTime at
some instant between sending the GET and receiving its answer, so the GET is timed on both ends
and the reading placed at the midpoint, uncertain by half the round trip (a late answer, a retry
or a busy loop widens it). The epoch is kept while a new estimate agrees with it within both
estimates' uncertainties plus a second (clock drift, a tick of rounding): a reply 3 s late is not
a reboot. A move by more than that is one (the uptime went back), and a move by a multiple of
2^32 centiseconds is sysUpTime wrapping (497 days), not a reboot. TimeStamp columns
(ifCounterDiscontinuityTime, ifLastChange) become Unix ns on the same epoch, so they stay put
too while the epoch does: a moved ifCounterDiscontinuityTime is a counter clear (IF-MIB).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from collector import snmp_lldp
from collector.oids import (
    ALWAYS_32,
    CPFC_PRIORITY,
    IEEE_PFC,
    IF_COUNTERS,
    IF_COUNTERS_32,
    IF_INDEX,
    IF_NUMBER,
    LLDP_LOC_PORT,
    LLDP_REM,
    PFC_PRIORITIES,
    RATE_BOUND_32,
    SYS_UPTIME,
    Column,
    PfcSource,
    SnmpProfile,
)
from collector.records import COUNTER_FIELDS, PFC_TOTAL_WRAP32, LldpReading, PortReading
from collector.snmp_client import SnmpClient
from collector.snmp_dom_poller import DomPoller
from collector.snmp_walk import Value, Walked
from store.dom import DomSample

log = logging.getLogger(__name__)

TICK_NS = 10_000_000  # TimeTicks are centiseconds
UPTIME_WRAP_NS = (1 << 32) * TICK_NS
EPOCH_TOLERANCE_NS = 1_000_000_000
INDEX_REFRESH_POLLS = 10
MIN_FRAME_BITS = 84 * 8  # 64-byte frame + preamble + inter-frame gap
_WRAP = 1 << 32

#: Reading fields filled straight from a counter column (after an integer check).
_PLAIN = tuple(c.field for c in IF_COUNTERS if c.field in COUNTER_FIELDS)


@functools.cache
def wrap32_set(*extra: str) -> frozenset[str]:
    """The shared ``wrap32`` frozenset for one combination of 32-bit sources."""
    return frozenset(ALWAYS_32).union(extra)


class UptimeClock:
    """sysUpTime → a stable epoch (Unix ns of uptime 0) and boot instant."""

    def __init__(self) -> None:
        self.epoch_ns: int | None = None
        self.boot_ns: int | None = None
        #: How far the stored epoch may be off: half the round trip of the GET that set it.
        self.uncertainty_ns = 0

    def update(self, ticks: int, sent_ns: int, received_ns: int | None = None) -> None:
        """Take a sysUpTime reading whose GET was sent at ``sent_ns`` and answered at ``received_ns``."""
        half = max(0, (sent_ns if received_ns is None else received_ns) - sent_ns) // 2
        estimate = sent_ns + half - ticks * TICK_NS
        if self.epoch_ns is None or self.boot_ns is None:
            self.epoch_ns = self.boot_ns = estimate
            self.uncertainty_ns = half
            return
        moved = estimate - self.epoch_ns
        tolerance = EPOCH_TOLERANCE_NS + half + self.uncertainty_ns
        if abs(moved) <= tolerance:
            return  # the same epoch, seen through another round trip
        self.epoch_ns, self.uncertainty_ns = estimate, half
        wraps = round(moved / UPTIME_WRAP_NS)
        if wraps >= 1 and abs(moved - wraps * UPTIME_WRAP_NS) <= tolerance:
            return  # sysUpTime wrapped: the same boot
        self.boot_ns = estimate

    def stamp(self, ticks: int, now_ns: int) -> int | None:
        """A TimeStamp (sysUpTime at some event) as Unix ns."""
        if self.epoch_ns is None:
            return None
        t = self.epoch_ns + ticks * TICK_NS
        return t - UPTIME_WRAP_NS if t > now_ns + EPOCH_TOLERANCE_NS else t


@dataclass(slots=True)
class IndexCache:
    """A switch's slowly changing tables, keyed by ifIndex (as the walker's index text)."""

    names: dict[str, str] = field(default_factory=dict)
    aliases: dict[str, str] = field(default_factory=dict)
    types: dict[str, int] = field(default_factory=dict)
    lldp_ports: dict[str, str] = field(default_factory=dict)  # lldpLocPortNum → port name
    if_number: int | None = None
    polls: int = 0  # polls since the last refresh
    dirty: bool = True
    #: Counter fields whose 64-bit column this agent lacks (their 32-bit fallback is walked).
    missing: set[str] = field(default_factory=set)
    pfc: PfcSource | None = None
    pfc_known: bool = False
    last_change: dict[str, int] = field(default_factory=dict)


@dataclass(slots=True)
class PollResult:
    """What one poll produced."""

    ports: list[PortReading]
    lldp: list[LldpReading] | None
    requests: int
    varbinds: int


def _by_field(columns: Sequence[Column], walked: Walked) -> dict[str, dict[str, Value]]:
    return {c.field: walked.rows[i] for i, c in enumerate(columns)}


class SwitchPoller:
    """Polls one switch through its :class:`SnmpClient` and turns the answers into readings."""

    def __init__(
        self,
        switch: str,
        client: SnmpClient,
        profile: SnmpProfile,
        interval_s: float,
        count_invalid: Callable[[str, int], None],
        dom_interval_s: float | None = None,
        dom_client: SnmpClient | None = None,
    ) -> None:
        """``dom_interval_s``: read transceiver DOM every that many seconds (None: never), through
        ``dom_client`` (a session of its own, so that a DOM read never waits on, nor delays, the
        counters'; None: the counters' client)."""
        self.switch = switch
        self.client = client
        self.profile = profile
        self.interval_s = interval_s
        self.count_invalid = count_invalid
        self.clock = UptimeClock()
        self.cache = IndexCache()
        self._warned_32 = False
        self.dom = DomPoller(switch, count_invalid) if dom_interval_s is not None else None
        self.dom_interval_s = dom_interval_s
        self.dom_client = dom_client
        self._polls = 0

    # -- the poll -----------------------------------------------------------------------

    async def poll(self, limiter: asyncio.Semaphore) -> PollResult:
        """One poll; raises :class:`~collector.snmp_client.SnmpError` when the switch fails us."""
        c = self.client
        requests, varbinds = c.requests, c.varbinds
        sent = time.time_ns()
        scalars = await c.get([SYS_UPTIME, IF_NUMBER])  # outside the limit: a dead switch holds no slot
        t0 = time.time_ns()
        uptime, if_number = scalars.get(SYS_UPTIME), scalars.get(IF_NUMBER)
        if isinstance(uptime, int) and not isinstance(uptime, bool):
            booted = self.clock.boot_ns
            self.clock.update(uptime, sent, t0)
            if booted is not None and booted != self.clock.boot_ns:
                self.cache.dirty = True  # a reboot may renumber ifIndex
                if self.dom is not None:
                    self.dom.invalidate()  # and entPhysicalIndex
        else:
            self.count_invalid("sysUpTime missing or not TimeTicks", 1)
        async with limiter:
            cache = self.cache
            if (
                cache.dirty
                or cache.polls >= INDEX_REFRESH_POLLS
                or (isinstance(if_number, int) and if_number != cache.if_number)
            ):
                await self._refresh_index(if_number)
            cache.polls += 1
            counters, times = await self._walk_counters()
            pfc_source, pfc = await self._walk_pfc()
            rem = await self._walk(LLDP_REM, len(cache.lldp_ports) or None) if cache.lldp_ports else None
            t_lldp = time.time_ns()
        self._polls += 1
        ports = self._port_readings(counters, times, pfc_source, pfc, t0)
        lldp = self._lldp_readings(rem, t_lldp) if rem is not None else None
        return PollResult(ports, lldp, c.requests - requests, c.varbinds - varbinds)

    async def poll_dom(self, limiter: asyncio.Semaphore) -> list[DomSample]:
        """The transceivers' DOM (:mod:`collector.snmp_dom_poller`), apart from the counters' poll, over
        its own session: its deadline and its failures are not the counters'. Interfaces are
        named from the counters' index tables (read it after a poll succeeded)."""
        assert self.dom is not None
        client = self.dom_client or self.client

        async def walk(columns: Sequence[Column], rows_hint: int | None) -> dict[str, dict[str, Value]]:
            walked = await client.walk(columns, rows_hint)
            if walked.invalid:
                self.count_invalid("looping or runaway table walk", walked.invalid)
            return _by_field(columns, walked)

        async with limiter:
            return await self.dom.poll(walk, client.get, self.cache.names, time.time_ns())

    async def close(self) -> None:
        """Close the sessions (the counters' and DOM's)."""
        await self.client.close()
        if self.dom_client is not None:
            await self.dom_client.close()

    async def _walk(self, columns: Sequence[Column], rows_hint: int | None) -> dict[str, dict[str, Value]]:
        walked = await self.client.walk(columns, rows_hint)
        if walked.invalid:
            self.count_invalid("looping or runaway table walk", walked.invalid)
        return _by_field(columns, walked)

    async def _refresh_index(self, if_number: Value | None) -> None:
        cache = self.cache
        hint = if_number if isinstance(if_number, int) and 0 < if_number < 100_000 else None
        cols = await self._walk(IF_INDEX, hint)
        names = {i: snmp_lldp.text(v) for i, v in cols["name"].items()}
        for i, v in cols["descr"].items():
            if not names.get(i):
                names[i] = snmp_lldp.text(v) or f"ifIndex{i}"
        cache.names = names
        cache.aliases = {i: snmp_lldp.text(v) for i, v in cols["alias"].items()}
        cache.types = {i: v for i, v in cols["if_type"].items() if isinstance(v, int)}
        loc = await self._walk(LLDP_LOC_PORT, hint)
        cache.lldp_ports = snmp_lldp.local_ports(loc, cache.names, cache.aliases)
        cache.if_number = if_number if isinstance(if_number, int) else None
        cache.polls = 0
        cache.dirty = False
        cache.missing.clear()
        cache.pfc_known = False

    async def _walk_counters(self) -> tuple[dict[str, dict[str, Value]], dict[str, int]]:
        cache = self.cache
        columns = [IF_COUNTERS_32[c.field] if c.field in cache.missing else c for c in IF_COUNTERS]
        walked = await self.client.walk(columns, len(cache.names) or None)
        if walked.invalid:
            self.count_invalid("looping or runaway table walk", walked.invalid)
        cols, times = _by_field(columns, walked), walked.times
        if cols["oper_status"]:
            lacking = {f for f in IF_COUNTERS_32 if f not in cache.missing and not cols[f]}
            if lacking:  # an agent without the 64-bit columns: walk the 32-bit ones, from now on
                cache.missing |= lacking
                fallback = [IF_COUNTERS_32[f] for f in sorted(lacking)]
                cols.update(await self._walk(fallback, len(cache.names) or None))
        if cache.polls > 1 and any(i not in cache.names and i not in cache.types for i in cols["oper_status"]):
            await self._refresh_index(cache.if_number)  # a new interface: name it now
        last = {i: v for i, v in cols["last_change_ticks"].items() if isinstance(v, int)}
        if cache.last_change and last != cache.last_change:
            cache.dirty = True  # links changed: re-read names at the next poll
        cache.last_change = last
        return cols, times

    async def _walk_pfc(self) -> tuple[PfcSource | None, dict[str, dict[str, Value]]]:
        cache = self.cache
        ports = len(cache.names) or None
        order = ((cache.pfc,) if cache.pfc else ()) if cache.pfc_known else self.profile.pfc_sources
        for source in order:
            if source == "cisco":
                cols = await self._walk(CPFC_PRIORITY, ports * PFC_PRIORITIES if ports else None)
            else:
                cols = await self._walk(IEEE_PFC, ports)
            if any(cols.values()):
                cache.pfc, cache.pfc_known = source, True
                return source, cols
        cache.pfc, cache.pfc_known = None, True
        return None, {}

    # -- readings -----------------------------------------------------------------------

    def _uint(self, value: Value | None, what: str) -> int | None:
        if value is None:
            return None
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            return value
        self.count_invalid(f"{what}: not a non-negative integer", 1)
        return None

    def _port_readings(
        self,
        cols: Mapping[str, Mapping[str, Value]],
        times: Mapping[str, int],
        pfc_source: PfcSource | None,
        pfc: Mapping[str, Mapping[str, Value]],
        t0: int,
    ) -> list[PortReading]:
        cache, allowed, clock = self.cache, self.profile.if_types, self.clock
        rx_prio, tx_prio, rx_total, tx_total = self._pfc_maps(pfc_source, pfc)
        extra: list[str] = [f for f in cache.missing if f not in RATE_BOUND_32]
        if pfc_source == "ieee":
            extra.append(PFC_TOTAL_WRAP32)
        oper, speed = cols["oper_status"], cols["high_speed_mbps"]
        refused = 0
        out: list[PortReading] = []
        for index in {*oper, *cols["in_octets"]}:
            if allowed is not None and cache.types.get(index, 6) not in allowed:
                continue
            r = PortReading(self.switch, cache.names.get(index) or f"ifIndex{index}", times.get(index, t0))
            status = self._uint(oper.get(index), "ifOperStatus")
            r.oper_up = None if status is None else status == 1
            mbps = self._uint(speed.get(index), "ifHighSpeed")
            r.speed_bps = None if mbps is None else mbps * 1_000_000
            for name in _PLAIN:
                value = cols[name].get(index)
                if value is not None:
                    setattr(r, name, self._uint(value, name))
            wrap = extra
            if cache.missing & RATE_BOUND_32:
                kept, n = self._bound_32(r)
                wrap, refused = extra + kept, refused + n
            ticks = self._uint(cols["discontinuity_ticks"].get(index), "ifCounterDiscontinuityTime")
            r.last_clear_ns = None if ticks is None else clock.stamp(ticks, t0)
            ticks = self._uint(cols["last_change_ticks"].get(index), "ifLastChange")
            r.last_change_ns = None if ticks is None else clock.stamp(ticks, t0)
            r.boot_ns = clock.boot_ns
            if index in tx_prio:
                r.pfc_tx, r.pfc_rx = tuple(tx_prio[index]), tuple(rx_prio.get(index, [0] * PFC_PRIORITIES))
            r.pfc_tx_total, r.pfc_rx_total = tx_total.get(index), rx_total.get(index)
            r.wrap32 = wrap32_set(*sorted(wrap))
            out.append(r)
        if refused and not self._warned_32:
            self._warned_32 = True
            log.warning(
                "%s: no 64-bit ifHC* counters; refusing 32-bit octet/packet counters on %d fast ports "
                "(they wrap within one %gs poll: 86 ms at 400G)",
                self.switch, refused, self.interval_s,
            )  # fmt: skip
        return out

    def _bound_32(self, r: PortReading) -> tuple[list[str], int]:
        """Keep a 32-bit octet/packet fallback only where it cannot wrap within one interval."""
        wrap: list[str] = []
        refused = 0
        speed = r.speed_bps or 0
        for name in RATE_BOUND_32 & self.cache.missing:
            per_poll = speed / (8 if name.endswith("octets") else MIN_FRAME_BITS) * self.interval_s
            if speed and per_poll < _WRAP:
                wrap.append(name)
            elif getattr(r, name) is not None:
                setattr(r, name, None)
                refused = 1
        return wrap, refused

    def _pfc_maps(
        self, source: PfcSource | None, pfc: Mapping[str, Mapping[str, Value]]
    ) -> tuple[dict[str, list[int]], dict[str, list[int]], dict[str, int], dict[str, int]]:
        rx: dict[str, list[int]] = {}
        tx: dict[str, list[int]] = {}
        rx_total: dict[str, int] = {}
        tx_total: dict[str, int] = {}
        if source == "cisco":
            sent, received = (("pfc_indications", "pfc_requests") if self.profile.cpfc_inverted
                              else ("pfc_requests", "pfc_indications"))  # fmt: skip
            for column, into in ((sent, tx), (received, rx)):
                for index, value in pfc.get(column, {}).items():
                    port, _, prio = index.rpartition(".")
                    count = self._uint(value, column)
                    if count is None or not prio.isdigit() or int(prio) >= PFC_PRIORITIES:
                        if count is not None:
                            self.count_invalid("PFC priority out of range", 1)
                        continue
                    into.setdefault(port, [0] * PFC_PRIORITIES)[int(prio)] = count
        elif source == "ieee":
            sent, received = (("pfc_indications", "pfc_requests") if self.profile.ieee_inverted
                              else ("pfc_requests", "pfc_indications"))  # fmt: skip
            for column, totals in ((sent, tx_total), (received, rx_total)):
                for index, value in pfc.get(column, {}).items():
                    count = self._uint(value, column)
                    if count is not None:
                        totals[index] = count
        return rx, tx, rx_total, tx_total

    def _lldp_readings(self, rem: Mapping[str, Mapping[str, Value]], t_ns: int) -> list[LldpReading]:
        cache = self.cache
        by_local, invalid = snmp_lldp.neighbors(rem)
        if invalid:
            self.count_invalid("lldpRemTable index", invalid)
        allowed = self.profile.if_types
        types_by_name = {cache.names[i]: t for i, t in cache.types.items() if i in cache.names}
        ports = dict(cache.lldp_ports)
        for local in by_local:
            if local not in ports:
                if local in cache.names:
                    ports[local] = cache.names[local]
                else:
                    self.count_invalid("lldpRemLocalPortNum unknown", 1)
        out: list[LldpReading] = []
        for local, port in ports.items():
            if allowed is not None and types_by_name.get(port, 6) not in allowed:
                continue
            out.append(LldpReading(self.switch, port, t_ns, tuple(by_local.get(local, ()))))
        return out

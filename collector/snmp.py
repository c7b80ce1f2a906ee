"""The SNMP collector: every SNMP target polled on its own schedule, readings into the Sink.

Each switch has one task and one client (gufo-snmp where it serves the target, else pysnmp;
see :mod:`collector.snmp_client`). A switch polls every ``snmp_interval_s`` at a phase of
its own (a stable hash of its name spreads the fleet over the interval); a poll that runs past
its next turn makes that turn skip (counted), never pile up. Table walks run under one
semaphore of ``snmp_concurrency`` slots; the first request of a poll (a GET of sysUpTime) runs
outside it, so dead switches waiting out their timeouts hold no slot and delay nobody.

Target states (``Sink.set_state``, on change): CONNECTING at start, CONNECTED after a poll
succeeds, UNREACHABLE on timeouts, ERROR when the agent refuses us (SNMPv3 keys) or answers
errors, STALE when a reachable switch has had no successful poll for 3 intervals.
"""

from __future__ import annotations

import asyncio
import logging
import time
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial

from collector.config import CollectorConfig
from collector.oids import profile_for
from collector.records import DomSink, Sink, TargetState
from collector.snmp_client import (
    Backend,
    SnmpAuthError,
    SnmpClient,
    SnmpError,
    SnmpTimeout,
    choose_backend,
)
from collector.snmp_gufo import GufoClient
from collector.snmp_poll import SwitchPoller
from collector.snmp_pysnmp import PysnmpClient, PysnmpEngines
from collector.targets import SwitchTarget
from fabric.tasks import owned_tasks

log = logging.getLogger(__name__)

#: A switch with no successful poll for this many intervals is STALE.
STALE_INTERVALS = 3
#: The least a DOM read (entity tables walked anew, then sensor values) may take.
DOM_TIMEOUT_S = 30.0


@dataclass(slots=True)
class SnmpStats:
    """What the SNMP collector did (for /metrics and the benchmark)."""

    targets: int = 0
    backends: dict[str, int] = field(default_factory=dict)
    polls: int = 0
    polls_ok: int = 0
    polls_failed: int = 0
    skipped: int = 0  # scheduled turns missed because the previous poll overran
    skipped_by_switch: dict[str, int] = field(default_factory=dict)
    timeouts: int = 0
    auth_errors: int = 0
    requests: int = 0
    varbinds: int = 0
    readings: int = 0
    lldp_readings: int = 0
    dom_samples: int = 0
    dom_unmapped: int = 0  # DOM sensors no entity maps to an interface (skipped, never name-matched)
    dom_reads: int = 0  # DOM reads done, whatever their outcome
    dom_failures: int = 0  # DOM reads that timed out or failed (the counters are not affected)
    poll_seconds: float = 0.0
    last_success_ns: dict[str, int] = field(default_factory=dict)
    states: dict[str, TargetState] = field(default_factory=dict)


def open_poller(
    target: SwitchTarget,
    engines: PysnmpEngines,
    interval_s: float,
    invalid: Callable[[str, int], None],
    backend: Backend = "auto",
    dom_interval_s: float | None = None,
) -> SwitchPoller:
    """A switch's poller over the codec that serves it (see :func:`~collector.snmp_client.choose_backend`);
    ``dom_interval_s``: read transceiver DOM that often (None: never)."""
    gufo = choose_backend(target, backend) == "gufo"

    def session() -> SnmpClient:
        return GufoClient(target, invalid) if gufo else PysnmpClient(target, invalid, engines)

    client = session()
    dom = session() if dom_interval_s is not None else None
    return SwitchPoller(target.switch, client, profile_for(target.profile), interval_s, invalid, dom_interval_s, dom)


class SnmpCollector:
    """Polls SNMP targets into a :class:`~collector.records.Sink` until cancelled."""

    def __init__(
        self,
        targets: Sequence[SwitchTarget],
        sink: Sink,
        config: CollectorConfig,
        *,
        backend: Backend = "auto",
        spread_s: float | None = None,
    ) -> None:
        """``backend`` forces a codec (``pysnmp``) for comparisons; ``spread_s`` bounds the
        first-poll phases (default: the whole interval)."""
        self.targets = [t for t in targets if t.protocol == "snmp"]
        self.sink = sink
        self.config = config
        self.interval_s = config.snmp_interval_s
        #: DOM is read only for a sink that takes it (:class:`~collector.records.DomSink`).
        self.dom_sink = sink if isinstance(sink, DomSink) else None
        self.dom_interval_s = config.dom_interval_s if self.dom_sink is not None else None
        self.backend: Backend = backend
        self.spread_s = self.interval_s if spread_s is None else min(spread_s, self.interval_s)
        self.stats = SnmpStats(targets=len(self.targets))
        self._details: dict[str, str | None] = {}
        #: Set once a switch's counters first came in: its DOM loop starts then.
        self._heard: dict[str, asyncio.Event] = {}

    # -- lifecycle ----------------------------------------------------------------------

    async def run(self) -> None:
        """Poll until cancelled; owns every task and socket it opens, and closes them on the way out."""
        engines = PysnmpEngines()
        limiter = asyncio.Semaphore(self.config.snmp_concurrency)
        pollers: list[SwitchPoller] = []
        try:
            for target in self.targets:
                poller = self._poller(target, engines)
                if poller is not None:
                    pollers.append(poller)
            async with owned_tasks("SNMP collector", log) as tasks:
                for poller in pollers:
                    tasks.start(self._switch_loop(poller, limiter), f"snmp-{poller.switch}")
                    if poller.dom is not None and self.dom_sink is not None:
                        tasks.start(self._dom_loop(poller, limiter), f"snmp-dom-{poller.switch}")
                tasks.start(self._stale_watch(), "snmp-stale")
                await asyncio.wait(tasks.tasks)  # until cancelled; one that fails ends them all
        finally:
            for poller in pollers:
                try:
                    await poller.close()
                except Exception as exc:  # the others still close
                    log.warning("closing %s's SNMP client failed: %s", poller.switch, exc)
            engines.close()

    def _poller(self, target: SwitchTarget, engines: PysnmpEngines) -> SwitchPoller | None:
        switch = target.switch
        invalid = partial(self.sink.count_invalid, switch)  # the pipeline keeps the one count
        try:
            poller = open_poller(target, engines, self.interval_s, invalid, self.backend, self.dom_interval_s)
        except SnmpError as exc:
            self._state(switch, TargetState.ERROR, str(exc))
            return None
        kind = poller.client.backend
        self.stats.backends[kind] = self.stats.backends.get(kind, 0) + 1
        self._state(switch, TargetState.CONNECTING, f"SNMPv{target.snmp_version} via {kind}")
        return poller

    def _phase(self, switch: str) -> float:
        return (zlib.crc32(switch.encode()) % 10_000) / 10_000 * self.spread_s

    async def _switch_loop(self, poller: SwitchPoller, limiter: asyncio.Semaphore) -> None:
        loop = asyncio.get_running_loop()
        interval = self.interval_s
        due = loop.time() + self._phase(poller.switch)
        while True:
            await asyncio.sleep(max(0.0, due - loop.time()))
            await self._poll_once(poller, limiter)
            due += interval
            now = loop.time()
            if due <= now:  # the poll overran its turn(s): skip them, keep the phase
                missed = int((now - due) // interval) + 1
                self.stats.skipped += missed
                by = self.stats.skipped_by_switch
                by[poller.switch] = by.get(poller.switch, 0) + missed
                due += missed * interval

    async def _poll_once(self, poller: SwitchPoller, limiter: asyncio.Semaphore) -> None:
        switch = poller.switch
        started = time.monotonic()
        client = poller.client
        requests, varbinds = client.requests, client.varbinds
        self.stats.polls += 1
        try:
            async with asyncio.timeout(STALE_INTERVALS * self.interval_s):
                result = await poller.poll(limiter)
        except SnmpTimeout as exc:
            self._failed(switch, TargetState.UNREACHABLE, str(exc))
            self.stats.timeouts += 1
            return
        except SnmpAuthError as exc:
            self._failed(switch, TargetState.ERROR, str(exc))
            self.stats.auth_errors += 1
            return
        except SnmpError as exc:  # SnmpProtocolError, sockets that cannot open
            self._failed(switch, TargetState.ERROR, str(exc))
            return
        except TimeoutError:
            self._failed(switch, TargetState.UNREACHABLE, f"poll took over {STALE_INTERVALS * self.interval_s:g}s")
            return
        except Exception as exc:  # a bug must not end this switch's polling, nor anyone else's
            log.exception("%s: SNMP poll failed", switch)
            self._failed(switch, TargetState.ERROR, f"internal error: {type(exc).__name__}: {exc}")
            return
        finally:
            self.stats.poll_seconds += time.monotonic() - started
            self.stats.requests += client.requests - requests
            self.stats.varbinds += client.varbinds - varbinds
        self.stats.polls_ok += 1
        self.stats.last_success_ns[switch] = time.time_ns()
        self._heard.setdefault(switch, asyncio.Event()).set()
        self._state(switch, TargetState.CONNECTED, None)
        if result.ports:
            self.stats.readings += len(result.ports)
            await self.sink.put_ports(result.ports)
        if result.lldp is not None:
            self.stats.lldp_readings += len(result.lldp)
            await self.sink.put_lldp(result.lldp)

    async def _dom_loop(self, poller: SwitchPoller, limiter: asyncio.Semaphore) -> None:
        """The switch's DOM every ``dom_interval_s``, once its counters first came in (they name its
        interfaces), beside the counters' loop: neither waits on the other."""
        assert poller.dom_interval_s is not None
        loop = asyncio.get_running_loop()
        await self._heard.setdefault(poller.switch, asyncio.Event()).wait()
        every = poller.dom_interval_s
        # spread over the DOM interval as the counters are over theirs: a fleet's entity walks at
        # once would queue behind each other at a shared agent or proxy, and at our own socket
        spread = every * (self.spread_s / self.interval_s) if self.interval_s > 0 else 0.0
        due = loop.time() + (zlib.crc32(f"dom:{poller.switch}".encode()) % 10_000) / 10_000 * spread
        while True:
            await asyncio.sleep(max(0.0, due - loop.time()))
            await self._poll_dom(poller, limiter)
            due += every
            if due <= loop.time():  # overran: skip the turns, keep the phase
                due += (int((loop.time() - due) // every) + 1) * every

    async def _poll_dom(self, poller: SwitchPoller, limiter: asyncio.Semaphore) -> None:
        """One DOM read: a timeout or an error is counted and logged, and leaves the switch's state
        alone (that is its counters' to say)."""
        assert self.dom_sink is not None and poller.dom is not None
        unmapped = poller.dom.unmapped
        try:
            async with asyncio.timeout(max(DOM_TIMEOUT_S, STALE_INTERVALS * self.interval_s)):
                samples = await poller.poll_dom(limiter)
        except (SnmpError, TimeoutError) as exc:
            self.stats.dom_failures += 1
            log.info("%s: SNMP DOM read failed (counters unaffected): %s", poller.switch, exc or "timed out")
            return
        except Exception:  # a bug must not end this switch's polling
            self.stats.dom_failures += 1
            log.exception("%s: SNMP DOM read failed", poller.switch)
            return
        finally:
            self.stats.dom_reads += 1
            self.stats.dom_unmapped += poller.dom.unmapped - unmapped
        if samples:
            self.stats.dom_samples += len(samples)
            await self.dom_sink.put_dom(samples)

    def _failed(self, switch: str, state: TargetState, detail: str) -> None:
        self.stats.polls_failed += 1
        self._state(switch, state, detail)

    def _state(self, switch: str, state: TargetState, detail: str | None) -> None:
        if self.stats.states.get(switch) == state and self._details.get(switch) == detail:
            return
        if state in (TargetState.UNREACHABLE, TargetState.ERROR) and self.stats.states.get(switch) != state:
            log.warning("%s: SNMP %s: %s", switch, state.value, detail)
        self.stats.states[switch] = state
        self._details[switch] = detail
        self.sink.set_state(switch, state, detail)

    async def _stale_watch(self) -> None:
        """Mark CONNECTED switches STALE once they go 3 intervals without a successful poll."""
        limit_ns = int(STALE_INTERVALS * self.interval_s * 1e9)
        while True:
            await asyncio.sleep(max(0.05, self.interval_s / 2))
            now = time.time_ns()
            for switch, state in list(self.stats.states.items()):
                last = self.stats.last_success_ns.get(switch)
                if state == TargetState.CONNECTED and last is not None and now - last > limit_ns:
                    self._state(switch, TargetState.STALE, f"no successful SNMP poll for {(now - last) / 1e9:.0f}s")

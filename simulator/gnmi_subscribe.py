"""One gNMI request against the simulated fabric: validation, and the life of a Subscribe RPC.

Semantics follow the reference target (openconfig/gnmi ``subscribe/subscribe.go``):

* ONCE: a full dump, ``sync_response``, end of RPC.
* POLL: a full dump and ``sync_response``; then each ``Poll`` gets a fresh dump and
  ``sync_response``. Anything but a Poll afterwards is INVALID_ARGUMENT.
* STREAM: a full dump, ``sync_response``, then, until the client cancels or half-closes,
  per subscription: SAMPLE every ``sample_interval`` (0 means the minimum; below it is
  INVALID_ARGUMENT), ON_CHANGE when :meth:`FabricView.add_listener` reports a change (only
  changed leaves are sent; vanished LLDP neighbours as deletes), TARGET_DEFINED = SAMPLE for
  counters and ON_CHANGE for state and LLDP leaves. ``suppress_redundant`` and
  ``heartbeat_interval`` are honoured. With ``updates_only`` the dump is skipped and
  ``sync_response`` comes first (reference behaviour). For POLL, ``updates_only`` only skips
  the initial dump: each Poll still dumps.

Each switch speaks its NOS (:class:`simulator.gnmi_target.Speaker`): the shape renders the
groups (:mod:`simulator.gnmi_shapes`), a family it reads later is stamped later (EOS PFC), and
an EOS switch re-sends its ON_CHANGE interface state (unchanged, a new timestamp) half-way
between samples (an implicit ``heartbeat_interval`` of the shortest sample interval). Every
timestamp is the switch's clock (offset and jitter, :mod:`simulator.nos`). An interface whose
optic is pulled (``PortCounters.present`` False) gets one Notification deleting it per family
subscribed and no data until it is back; then its ON_CHANGE leaves are all sent again.

A switch that is not ``reachable`` is silent: its streams send nothing (no error, as a
real unreachable switch) and resume when it is back; new RPCs for it fail UNAVAILABLE. A
changed ``boot_time_ns`` ends its streams with UNAVAILABLE, as a rebooted switch drops its
gRPC sessions; the client resubscribes and sees a new ``sync_response``.

With a sent-ledger (:mod:`simulator.ledger`, ``SimOptions(ledger=True)``) each batch's messages
are noted there once ``context.write`` has taken them; without one, sending is unchanged.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import math
import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import grpc

from fabric.tasks import stop_task
from simulator.gnmi_paths import Family, Selection
from simulator.gnmi_shapes import Shape
from simulator.gnmi_target import (
    Batch,
    RequestError,
    Snapshot,
    Speaker,
    check_encoding,
    check_switch,
    resolve_target,
    selections,
    speaker_for,
)
from simulator.gnmi_wire import SYNC_RESPONSE, Renderer
from simulator.ledger import SentLedger
from simulator.nos import Devices, Nos
from simulator.view import FabricView

log = logging.getLogger(__name__)

__all__ = ["ON_CHANGE", "SAMPLE", "TARGET_DEFINED", "Plan", "RequestError", "Stats", "SubscribeSession", "build_plans"]

STREAM, ONCE, POLL = 0, 1, 2  # SubscriptionList.Mode
TARGET_DEFINED, ON_CHANGE, SAMPLE = 0, 1, 2  # SubscriptionMode
#: An EOS switch's status heartbeat period when a session has no SAMPLE subscription.
STATUS_HEARTBEAT_NS = 10_000_000_000


@dataclass(slots=True)
class Stats:
    """Counters of one server (exported by whoever runs it)."""

    active_streams: int = 0
    notifications: int = 0
    updates: int = 0


#: A diff cache entry's identity: (port, prefix field, note) of one group.
Ident = tuple[str, bytes, bytes]


@dataclass(eq=False, slots=True)
class Plan:
    """One selection with its delivery mode; ``sent`` caches what was sent (for diffs)."""

    sel: Selection
    sample_ns: int  # 0: ON_CHANGE
    suppress: bool = False
    heartbeat_ns: int = 0
    heartbeat_phase: float = 1.0  # the first heartbeat comes this share of a period after the dump
    next_sample: float = math.inf
    next_heartbeat: float = math.inf
    sent: dict[Ident, dict[bytes, bytes]] | None = field(default=None)


def build_plans(sl: Any, streaming: bool, min_interval_ns: int, shape: Shape | None = None) -> list[Plan]:
    """The plans of a SubscriptionList (validated: modes, intervals, paths); OpenConfig by default."""
    if shape is None:
        shape = Shape(Nos.OPENCONFIG, Renderer())
    by_key: dict[tuple[Family, str | None, str | None, str | None, int, bool, int], set[int]] = {}
    for sub in sl.subscription:
        mode, interval, heartbeat = SAMPLE, 1, 0  # ONCE and POLL: every plan is a plain dump
        if streaming:
            mode, interval, heartbeat = sub.mode, sub.sample_interval or min_interval_ns, sub.heartbeat_interval
            if mode not in (TARGET_DEFINED, ON_CHANGE, SAMPLE):
                raise RequestError(grpc.StatusCode.INVALID_ARGUMENT, f"unknown subscription mode {mode}")
            if mode != ON_CHANGE and interval < min_interval_ns:
                raise RequestError(
                    grpc.StatusCode.INVALID_ARGUMENT,
                    f"sample_interval {sub.sample_interval} ns is below the minimum of {min_interval_ns} ns",
                )
            if heartbeat and heartbeat < min_interval_ns:
                raise RequestError(grpc.StatusCode.INVALID_ARGUMENT, "heartbeat_interval is below the minimum")
        for sel in selections(sl.prefix, sub.path, shape):
            leaves = shape.leaves(sel.family)
            for on_change in (False, True):
                if mode == TARGET_DEFINED:
                    ix = {i for i in sel.leaves if leaves[i].on_change is on_change}
                else:
                    ix = set(sel.leaves) if on_change is (mode == ON_CHANGE) else set()
                if ix:
                    suppress = streaming and bool(sub.suppress_redundant) and not on_change
                    sample = 0 if on_change else interval
                    key = (sel.family, sel.port, sel.neighbor, sel.glob, sample, suppress, heartbeat)
                    by_key.setdefault(key, set()).update(ix)
    return [
        Plan(Selection(fam, tuple(sorted(ix)), port, nbr, glob), sample, supp, hb)
        for (fam, port, nbr, glob, sample, supp, hb), ix in by_key.items()
    ]


def add_status_heartbeats(plans: list[Plan]) -> None:
    """EOS: re-send ON_CHANGE interface state half-way between samples (as ON_CHANGE updates
    arrive on real boxes mid-interval), every shortest sample interval of the session."""
    samples = [p.sample_ns for p in plans if p.sample_ns]
    period = min(samples, default=STATUS_HEARTBEAT_NS)
    for plan in plans:
        if not plan.sample_ns and plan.sel.family is Family.INTERFACES and not plan.heartbeat_ns:
            plan.heartbeat_ns, plan.heartbeat_phase = period, 0.5


class SubscribeSession:
    """One Subscribe RPC for one switch (created from its first, validated, request)."""

    def __init__(
        self,
        view: FabricView,
        shapes: Mapping[Nos, Shape],
        devices: Devices | None,
        stats: Stats,
        context: Any,
        request: Any,
        *,
        min_interval_ns: int,
        send_timeout_s: float,
        username: str = "",
        ledger: SentLedger | None = None,
    ) -> None:
        if request.HasField("aliases"):
            raise RequestError(grpc.StatusCode.UNIMPLEMENTED, "aliases are not supported")
        if not request.HasField("subscribe"):
            raise RequestError(grpc.StatusCode.INVALID_ARGUMENT, "the first request must carry a SubscriptionList")
        sl = request.subscribe
        if sl.mode not in (STREAM, ONCE, POLL):
            raise RequestError(grpc.StatusCode.INVALID_ARGUMENT, f"subscription list mode {sl.mode} not recognized")
        if not sl.subscription:
            raise RequestError(grpc.StatusCode.INVALID_ARGUMENT, "the SubscriptionList has no subscription")
        if sl.use_models:
            raise RequestError(grpc.StatusCode.UNIMPLEMENTED, "use_models is not supported")
        self.encoding = check_encoding(sl.encoding)
        self.target = resolve_target(sl.prefix, (s.path for s in sl.subscription))
        self.speaker: Speaker = speaker_for(view, shapes, devices, self.target, username)
        self.switch = self.speaker.switch
        self.mode, self.updates_only = int(sl.mode), bool(sl.updates_only)
        self.plans = build_plans(sl, self.mode == STREAM, min_interval_ns, self.speaker.shape)
        if self.mode == STREAM and self.speaker.shape.status_heartbeat:
            add_status_heartbeats(self.plans)
        self.boot_ns = check_switch(view, self.switch).boot_time_ns
        self._view, self._stats, self._context = view, stats, context
        self._send_timeout = send_timeout_s
        self._ledger = ledger
        self._families = list(dict.fromkeys(p.sel.family for p in self.plans))
        self._rng = random.Random(f"jitter:{self.switch}")
        self._gone: frozenset[str] = frozenset()  # ports whose interface was deleted
        self._dirty: set[str | None] = set()
        self._wake = asyncio.Event()
        self._silent = False
        self._client_done = False

    def mark(self, port: str | None) -> None:
        """Listener hook: something ON_CHANGE cares about changed on ``port`` (None: the switch)."""
        self._dirty.add(port)
        self._wake.set()

    async def run(self) -> None:
        """Serve the RPC until it completes, the client goes away, or a RequestError ends it."""
        if self.mode == STREAM:
            reader = asyncio.create_task(self._watch_client(), name=f"gnmi-read-{self.switch}")
            try:
                await self._stream()
            finally:
                await stop_task(reader, f"gNMI {self.switch}: reading the client", log)
            return
        await self._send(self._dump(self._snapshot(), skip=self.updates_only))
        if self.mode == POLL:
            await self._poll()

    def _snapshot(self) -> Snapshot:
        return Snapshot(self._view, self.speaker)

    def _batch(self, snap: Snapshot) -> Batch:
        return Batch(snap.ts, self.speaker.device, self._rng, snap.clock_ns)

    async def _poll(self) -> None:
        while True:
            req = await self._context.read()
            if req is grpc.aio.EOF:
                return
            if not req.HasField("poll"):
                raise RequestError(grpc.StatusCode.INVALID_ARGUMENT, "only Poll may follow a POLL subscription")
            info = self._view.switch(self.switch)
            if info is None or not info.reachable:
                continue  # an unreachable switch does not answer
            await self._send(self._dump(self._snapshot()))

    async def _watch_client(self) -> None:
        """End a STREAM RPC when the client half-closes (what pygnmi's ``close()`` does)."""
        try:
            while await self._context.read() is not grpc.aio.EOF:
                pass  # nothing may follow a STREAM subscription; like the reference, ignore it
        finally:
            self._client_done = True
            self._wake.set()

    async def _stream(self) -> None:
        loop = asyncio.get_running_loop()
        snap = self._snapshot()
        if self.updates_only:
            for plan in self.plans:
                if plan.suppress or not plan.sample_ns:
                    self._diff(plan, snap, None, self._batch(snap))  # the baseline for later changes
        await self._send(self._dump(snap, skip=self.updates_only))
        start = loop.time()
        for plan in self.plans:
            plan.next_sample = start + plan.sample_ns / 1e9 if plan.sample_ns else math.inf
            hb = plan.heartbeat_ns
            plan.next_heartbeat = start + plan.heartbeat_phase * hb / 1e9 if hb else math.inf
        while not self._client_done:
            deadline = min(itertools.chain.from_iterable((p.next_sample, p.next_heartbeat) for p in self.plans))
            if self._silent or not self._dirty:
                try:
                    async with asyncio.timeout_at(None if math.isinf(deadline) else deadline):
                        await self._wake.wait()
                except TimeoutError:
                    pass
            self._wake.clear()
            if not self._client_done:
                await self._tick(loop.time())

    async def _tick(self, now: float) -> None:
        info = self._view.switch(self.switch)
        if info is None:
            raise RequestError(grpc.StatusCode.NOT_FOUND, f"target {self.switch!r} is gone")
        self._silent = not info.reachable
        if self._silent:  # keep the dirty set for when it is back
            for plan in self.plans:
                plan.next_sample = _advance(plan.next_sample, plan.sample_ns, now)
                plan.next_heartbeat = _advance(plan.next_heartbeat, plan.heartbeat_ns, now)
            return
        if info.boot_time_ns != self.boot_ns:
            raise RequestError(grpc.StatusCode.UNAVAILABLE, f"target {self.switch!r} rebooted; subscribe again")
        dirty = set(self._dirty)
        self._dirty.clear()
        scope = None if None in dirty else {p for p in dirty if p is not None}
        snap = self._snapshot()
        batch = self._batch(snap)
        self._removals(snap, batch)
        for plan in self.plans:
            heartbeat = plan.next_heartbeat <= now
            if heartbeat:
                plan.next_heartbeat = _advance(plan.next_heartbeat, plan.heartbeat_ns, now)
            if plan.sample_ns:
                if plan.next_sample > now:
                    continue
                plan.next_sample = _advance(plan.next_sample, plan.sample_ns, now)
                if heartbeat or not plan.suppress:
                    self._full(plan, snap, batch)
                else:
                    self._diff(plan, snap, None, batch)
            elif heartbeat:
                self._full(plan, snap, batch)
            elif dirty:
                self._diff(plan, snap, scope, batch)
        self._stats.updates += batch.updates
        await self._send(batch.messages())

    def _removals(self, snap: Snapshot, batch: Batch) -> None:
        """Delete the interfaces that went away since the last send (an optic pulled).

        One ``delete`` of the interface per family subscribed; what was sent for it is
        forgotten, so when it comes back every ON_CHANGE leaf is sent again.
        """
        removed = snap.removed()
        if removed == self._gone:
            return
        shape, target = self.speaker.shape, self.speaker.target
        for port in sorted(removed - self._gone):
            for family in self._families:
                if family is Family.OPTICS_COMPONENTS:  # the transceiver's component: not the interface
                    continue
                prefix, path = shape.delete(target, family, port)
                batch.add(prefix, [], [path])
            for plan in self.plans:
                if plan.sent:
                    for ident in [i for i in plan.sent if i[0] == port]:
                        del plan.sent[ident]
        self._gone = removed

    def _dump(self, snap: Snapshot, *, skip: bool = False) -> list[bytes]:
        """Every plan's data (unless ``skip``: updates_only), then ``sync_response``."""
        batch = self._batch(snap)
        self._gone = snap.removed()
        if not skip:
            for plan in self.plans:
                self._full(plan, snap, batch)
        self._stats.updates += batch.updates
        return [*batch.messages(), SYNC_RESPONSE]

    def _full(self, plan: Plan, snap: Snapshot, batch: Batch) -> None:
        """All of a plan's leaves into ``batch`` (refreshing its diff cache if it keeps one)."""
        groups, offset = snap.groups(plan.sel, self.encoding)
        if plan.suppress or not plan.sample_ns:
            plan.sent = {(g.port, g.prefix, g.note): dict(zip(g.keys, g.updates, strict=True)) for g in groups}
        for g in groups:
            batch.add(g.prefix, g.updates, offset_ns=offset, note=g.note)

    def _diff(self, plan: Plan, snap: Snapshot, scope: set[str] | None, batch: Batch) -> None:
        """What changed since the last send (on ``scope`` ports; None: all) into ``batch``."""
        sent = plan.sent if plan.sent is not None else {}
        plan.sent = sent
        groups, offset = snap.groups(plan.sel, self.encoding)
        # A group with no port ("": a whole SONiC table in one update) is in every scope.
        current = {(g.port, g.prefix, g.note): g for g in groups if scope is None or not g.port or g.port in scope}
        idents = set(current) | {i for i in sent if scope is None or not i[0] or i[0] in scope}
        for ident in sorted(idents):
            g = current.get(ident)
            now = dict(zip(g.keys, g.updates, strict=True)) if g else {}
            old = sent.get(ident, {})
            changed = [u for k, u in now.items() if old.get(k) != u]
            deleted = [k for k in old if k not in now]
            if now:
                sent[ident] = now
            else:
                sent.pop(ident, None)
            if changed or deleted:
                batch.add(ident[1], changed, deleted, offset_ns=offset, note=ident[2])

    async def _send(self, messages: list[bytes]) -> None:
        if not messages:
            return
        if self._ledger is not None:
            await self._send_noted(messages, self._ledger)
            return
        # One deadline per batch (not per message, which would cost a task each): a client
        # that stops reading ends its own RPC, as in the reference target's send timeout.
        async with asyncio.timeout(self._send_timeout):
            for message in messages:
                await self._context.write(message)
        self._stats.notifications += len(messages)

    async def _send_noted(self, messages: list[bytes], ledger: SentLedger) -> None:
        """:meth:`_send`, noting in the sent-ledger what was handed to gRPC (also when cut off)."""
        written = 0
        try:
            async with asyncio.timeout(self._send_timeout):
                for message in messages:
                    await self._context.write(message)
                    written += 1
        finally:
            ledger.record(self.switch, messages[:written])
        self._stats.notifications += len(messages)


def _advance(due: float, period_ns: int, now: float) -> float:
    """The next due time after ``now`` on the ``due + k * period`` grid (missed ticks skipped)."""
    if due > now or not period_ns:
        return due
    period = period_ns / 1e9
    return due + period * max(1, math.floor((now - due) / period) + 1)

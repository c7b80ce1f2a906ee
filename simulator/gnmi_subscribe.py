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

A switch that is not ``reachable`` is silent: its streams send nothing (no error, as a
real unreachable switch) and resume when it is back; new RPCs for it fail UNAVAILABLE. A
changed ``boot_time_ns`` ends its streams with UNAVAILABLE, as a rebooted switch drops its
gRPC sessions; the client resubscribes and sees a new ``sync_response``.
"""

from __future__ import annotations

import asyncio
import itertools
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import grpc
from pygnmi.spec.v080 import gnmi_pb2

from fabric.errors import FabricmonError
from simulator.gnmi_paths import (
    LEAVES,
    Family,
    PathError,
    Selection,
    UnknownPathError,
    format_path,
    merge,
    path_elems,
    select,
)
from simulator.gnmi_wire import SYNC_RESPONSE, Encoding, Group, Renderer, notification, timestamp
from simulator.view import FabricView, LldpNeighbor, PortCounters, SwitchInfo

STREAM, ONCE, POLL = 0, 1, 2  # SubscriptionList.Mode
TARGET_DEFINED, ON_CHANGE, SAMPLE = 0, 1, 2  # SubscriptionMode


class RequestError(FabricmonError):
    """A request the target refuses; the RPC ends with ``code`` and ``message``."""

    def __init__(self, code: grpc.StatusCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(slots=True)
class Stats:
    """Counters of one server (exported by whoever runs it)."""

    active_streams: int = 0
    notifications: int = 0
    updates: int = 0


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
    """The one switch a request is for: the prefix target, else the (single) path target."""
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


def selections(prefix: Any, path: Any) -> list[Selection]:
    """What ``prefix`` + ``path`` selects (INVALID_ARGUMENT if malformed, NOT_FOUND if unknown)."""
    try:
        elems = path_elems(prefix) + path_elems(path)
        return merge(select(elems))
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


def check_switch(view: FabricView, target: str) -> SwitchInfo:
    """The switch a request names: NOT_FOUND if not simulated, UNAVAILABLE while unreachable."""
    info = view.switch(target)
    if info is None:
        raise RequestError(grpc.StatusCode.NOT_FOUND, f"no such target: {target!r}")
    if not info.reachable:
        raise RequestError(grpc.StatusCode.UNAVAILABLE, f"target {target!r} is unreachable")
    return info


class Snapshot:
    """The view's data for one switch at one instant, read lazily (ports and LLDP separately)."""

    def __init__(self, view: FabricView, target: str) -> None:
        self.view, self.target = view, target
        self.ts = view.now_ns()
        self._ports: list[PortCounters] | None = None
        self._lldp: list[LldpNeighbor] | None = None

    def groups(self, renderer: Renderer, sel: Selection, encoding: Encoding) -> list[Group]:
        """The selection's Notification groups at this instant."""
        if sel.family is Family.LLDP:
            if self._lldp is None:
                self._lldp = self.view.lldp(self.target)
            return renderer.render(self.target, sel, encoding, (), self._lldp)
        if self._ports is None:
            self._ports = self.view.ports(self.target, self.ts)
        return renderer.render(self.target, sel, encoding, self._ports, ())


@dataclass(eq=False, slots=True)
class Plan:
    """One selection with its delivery mode; ``sent`` caches what was sent (for diffs)."""

    sel: Selection
    sample_ns: int  # 0: ON_CHANGE
    suppress: bool = False
    heartbeat_ns: int = 0
    next_sample: float = math.inf
    next_heartbeat: float = math.inf
    sent: dict[str, dict[bytes, bytes]] | None = field(default=None)


def build_plans(sl: Any, streaming: bool, min_interval_ns: int) -> list[Plan]:
    """The plans of a SubscriptionList (validated: modes, intervals, paths)."""
    by_key: dict[tuple[Family, str | None, str | None, int, bool, int], set[int]] = {}
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
        for sel in selections(sl.prefix, sub.path):
            leaves = LEAVES[sel.family]
            for on_change in (False, True):
                if mode == TARGET_DEFINED:
                    ix = {i for i in sel.leaves if leaves[i].on_change is on_change}
                else:
                    ix = set(sel.leaves) if on_change is (mode == ON_CHANGE) else set()
                if ix:
                    suppress = streaming and bool(sub.suppress_redundant) and not on_change
                    key = (sel.family, sel.port, sel.neighbor, 0 if on_change else interval, suppress, heartbeat)
                    by_key.setdefault(key, set()).update(ix)
    return [
        Plan(Selection(fam, tuple(sorted(ix)), port, nbr), sample, supp, hb)
        for (fam, port, nbr, sample, supp, hb), ix in by_key.items()
    ]


class SubscribeSession:
    """One Subscribe RPC for one switch (created from its first, validated, request)."""

    def __init__(
        self,
        view: FabricView,
        renderer: Renderer,
        stats: Stats,
        context: Any,
        request: Any,
        *,
        min_interval_ns: int,
        send_timeout_s: float,
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
        self.mode, self.updates_only = int(sl.mode), bool(sl.updates_only)
        self.plans = build_plans(sl, self.mode == STREAM, min_interval_ns)
        self.boot_ns = check_switch(view, self.target).boot_time_ns
        self._view, self._renderer, self._stats, self._context = view, renderer, stats, context
        self._send_timeout = send_timeout_s
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
            reader = asyncio.create_task(self._watch_client(), name=f"gnmi-read-{self.target}")
            try:
                await self._stream()
            finally:
                reader.cancel()
                await asyncio.gather(reader, return_exceptions=True)
            return
        await self._send(self._dump(Snapshot(self._view, self.target), skip=self.updates_only))
        if self.mode == POLL:
            await self._poll()

    async def _poll(self) -> None:
        while True:
            req = await self._context.read()
            if req is grpc.aio.EOF:
                return
            if not req.HasField("poll"):
                raise RequestError(grpc.StatusCode.INVALID_ARGUMENT, "only Poll may follow a POLL subscription")
            info = self._view.switch(self.target)
            if info is None or not info.reachable:
                continue  # an unreachable switch does not answer
            await self._send(self._dump(Snapshot(self._view, self.target)))

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
        snap = Snapshot(self._view, self.target)
        if self.updates_only:
            for plan in self.plans:
                if plan.suppress or not plan.sample_ns:
                    self._diff(plan, snap, None, _Batch(snap.ts))  # the baseline for later changes
        await self._send(self._dump(snap, skip=self.updates_only))
        start = loop.time()
        for plan in self.plans:
            plan.next_sample = start + plan.sample_ns / 1e9 if plan.sample_ns else math.inf
            plan.next_heartbeat = start + plan.heartbeat_ns / 1e9 if plan.heartbeat_ns else math.inf
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
        info = self._view.switch(self.target)
        if info is None:
            raise RequestError(grpc.StatusCode.NOT_FOUND, f"target {self.target!r} is gone")
        self._silent = not info.reachable
        if self._silent:  # keep the dirty set for when it is back
            for plan in self.plans:
                plan.next_sample = _advance(plan.next_sample, plan.sample_ns, now)
                plan.next_heartbeat = _advance(plan.next_heartbeat, plan.heartbeat_ns, now)
            return
        if info.boot_time_ns != self.boot_ns:
            raise RequestError(grpc.StatusCode.UNAVAILABLE, f"target {self.target!r} rebooted; subscribe again")
        dirty = set(self._dirty)
        self._dirty.clear()
        scope = None if None in dirty else {p for p in dirty if p is not None}
        snap = Snapshot(self._view, self.target)
        batch = _Batch(snap.ts)
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

    def _dump(self, snap: Snapshot, *, skip: bool = False) -> list[bytes]:
        """Every plan's data (unless ``skip``: updates_only), then ``sync_response``."""
        batch = _Batch(snap.ts)
        if not skip:
            for plan in self.plans:
                self._full(plan, snap, batch)
        self._stats.updates += batch.updates
        return [*batch.messages(), SYNC_RESPONSE]

    def _full(self, plan: Plan, snap: Snapshot, batch: _Batch) -> None:
        """All of a plan's leaves into ``batch`` (refreshing its diff cache if it keeps one)."""
        groups = snap.groups(self._renderer, plan.sel, self.encoding)
        if plan.suppress or not plan.sample_ns:
            plan.sent = {g.port: dict(zip(g.keys, g.updates, strict=True)) for g in groups}
        for g in groups:
            batch.add(g.prefix, g.updates)

    def _diff(self, plan: Plan, snap: Snapshot, scope: set[str] | None, batch: _Batch) -> None:
        """What changed since the last send (on ``scope`` ports; None: all) into ``batch``."""
        sent = plan.sent if plan.sent is not None else {}
        plan.sent = sent
        current = {
            g.port: g for g in snap.groups(self._renderer, plan.sel, self.encoding) if scope is None or g.port in scope
        }
        for port in sorted(set(current) | {p for p in sent if scope is None or p in scope}):
            g = current.get(port)
            now = dict(zip(g.keys, g.updates, strict=True)) if g else {}
            old = sent.get(port, {})
            changed = [u for k, u in now.items() if old.get(k) != u]
            deleted = [k for k in old if k not in now]
            if now:
                sent[port] = now
            else:
                sent.pop(port, None)
            if changed or deleted:
                prefix = g.prefix if g else self._renderer.prefix(self.target, plan.sel.family, port)
                batch.add(prefix, changed, deleted)

    async def _send(self, messages: list[bytes]) -> None:
        if not messages:
            return
        # One deadline per batch (not per message, which would cost a task each): a client
        # that stops reading ends its own RPC, as in the reference target's send timeout.
        async with asyncio.timeout(self._send_timeout):
            for message in messages:
                await self._context.write(message)
        self._stats.notifications += len(messages)


class _Batch:
    """The Notifications of one instant, merged per interface prefix (whatever plan they come from)."""

    def __init__(self, ts: int) -> None:
        self._ts = timestamp(ts)
        self._parts: dict[bytes, tuple[list[bytes], list[bytes]]] = {}
        self.updates = 0

    def add(self, prefix: bytes, updates: list[bytes], deletes: Sequence[bytes] = ()) -> None:
        """Add updates (taking ownership of the list) and delete paths for one interface."""
        found = self._parts.get(prefix)
        if found is None:
            self._parts[prefix] = (updates, list(deletes))
        else:
            found[0].extend(updates)
            found[1].extend(deletes)
        self.updates += len(updates)

    def messages(self) -> list[bytes]:
        """One SubscribeResponse per interface."""
        return [notification(self._ts, p, u, d) for p, (u, d) in self._parts.items()]


def _advance(due: float, period_ns: int, now: float) -> float:
    """The next due time after ``now`` on the ``due + k * period`` grid (missed ticks skipped)."""
    if due > now or not period_ns:
        return due
    period = period_ns / 1e9
    return due + period * max(1, math.floor((now - due) / period) + 1)

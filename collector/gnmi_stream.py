"""One gNMI Subscribe stream for one (switch, gNMI target): subscribe, read, decode, hand over.

The stream lives until cancelled. Each attempt opens a Subscribe RPC on the shared channel
(raw bytes in, so :class:`collector.gnmi_decode.StreamDecoder` owns size limits and parse
errors), writes the SubscriptionList and reads until the RPC ends. Between attempts it waits
on gRPC's connection-backoff schedule (1 s, x1.6, +/-20 % jitter, capped at 120 s; reset once a
stream has been healthy for an interval). What it learns is its :attr:`GnmiStream.state`:

* CONNECTING until the first ``sync_response``, then CONNECTED;
* STALE (set by the collector's watchdog) when a SAMPLE stream has sent nothing for 3
  intervals; nothing is synthesised meanwhile, and the first update makes it CONNECTED again;
  after ``idle_resubscribe_intervals`` of silence the RPC is dropped and opened again;
* UNREACHABLE for transport failures (connect refused or timed out, UNAVAILABLE, a rebooted
  switch closing the stream) and ERROR when the switch refuses us (UNAUTHENTICATED,
  PERMISSION_DENIED, NOT_FOUND target, INVALID_ARGUMENT/UNIMPLEMENTED subscription, a TLS
  handshake failure), each with a detail naming the cause. Both retry with backoff.

Readings are handed to the sink in batches (a full batch, a completed timestamp after a short
quiet spell, or a ``sync_response``) under a lock, so a slow sink stops the reader
(back-pressure) and batches keep their order.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Callable, Sequence, Sized
from dataclasses import dataclass
from typing import Protocol

import grpc
from pygnmi.create_gnmi_path import gnmi_path_generator
from pygnmi.spec.v080 import gnmi_pb2

from collector.gnmi_settings import GnmiStats, StreamSettings
from collector.gnmi_transport import Call, Channel, ChannelError, RpcError
from collector.gnmi_values import OVERSIZE
from collector.profiles import Profile, Subscription
from collector.records import LldpReading, PortReading, Sink, TargetState
from fabric.tasks import stop_task

log = logging.getLogger(__name__)

_STREAM, _POLL = 0, 2  # SubscriptionList.Mode
_ON_CHANGE, _SAMPLE = 1, 2  # SubscriptionMode
_ERROR_CODES = {
    grpc.StatusCode.UNAUTHENTICATED: "authentication failed",
    grpc.StatusCode.PERMISSION_DENIED: "permission denied",
    grpc.StatusCode.NOT_FOUND: "target or path not found",
    grpc.StatusCode.INVALID_ARGUMENT: "subscription refused",
    grpc.StatusCode.UNIMPLEMENTED: "subscription refused",
    grpc.StatusCode.FAILED_PRECONDITION: "subscription refused",
    grpc.StatusCode.OUT_OF_RANGE: "subscription refused",
}
_TLS_WORDS = ("ssl", "tls", "handshake", "certificate", "x509")
_CLOSED_WORDS = ("socket closed", "connection reset", "end of tcp stream")


@dataclass(slots=True)
class Backoff:
    """gRPC's connection backoff (doc/connection-backoff.md): jittered exponential, capped."""

    initial_s: float = 1.0
    multiplier: float = 1.6
    jitter: float = 0.2
    max_s: float = 120.0
    _current: float = 0.0

    def next(self) -> float:
        """The next delay in seconds."""
        self._current = self.initial_s if self._current == 0 else min(self._current * self.multiplier, self.max_s)
        return self._current * random.uniform(1 - self.jitter, 1 + self.jitter)

    def reset(self) -> None:
        """Start over at the initial delay (after a healthy stream)."""
        self._current = 0.0


class Decoder(Protocol):
    """What a stream reads of its decoder (:class:`collector.gnmi_decode.StreamDecoder`, or the
    link-health one of :mod:`collector.gnmi_optics`)."""

    values: int
    notifications: int
    ignored: int

    @property
    def ready_ports(self) -> Sized: ...
    @property
    def ready_lldp(self) -> Sized: ...
    @property
    def pending(self) -> bool: ...
    def begin(self) -> None: ...
    def feed(self, raw: bytes) -> bool: ...
    def close_group(self) -> None: ...
    def take(self) -> tuple[list[PortReading], list[LldpReading]]: ...


class _Failure(Protocol):
    def code(self) -> grpc.StatusCode: ...
    def details(self) -> str | None: ...


def classify(exc: _Failure, *, tls: bool) -> tuple[TargetState, str]:
    """The state and detail an RPC failure means for the switch (``tls``: the channel uses TLS)."""
    code = exc.code()
    details = (exc.details() or "").strip()
    lowered = details.lower()
    if code == grpc.StatusCode.UNAVAILABLE and any(w in lowered for w in _TLS_WORDS):
        return TargetState.ERROR, f"TLS handshake failed (certificate or TLS settings): {details}"
    if code == grpc.StatusCode.UNAVAILABLE and not tls and any(w in lowered for w in _CLOSED_WORDS):
        # A TLS-only target closes a plaintext connection at once: say what probably happened.
        return TargetState.UNREACHABLE, f"{code.name}: {details} (plaintext gRPC: does the target require TLS?)"
    if code in _ERROR_CODES:
        return TargetState.ERROR, f"{_ERROR_CODES[code]} ({code.name}): {details}"
    if code == grpc.StatusCode.RESOURCE_EXHAUSTED:
        return TargetState.UNREACHABLE, f"stream failed ({code.name}, a message above the channel limit?): {details}"
    return TargetState.UNREACHABLE, f"{code.name}: {details}"


def subscribe_request(
    profile: Profile,
    target: str,
    subs: Sequence[Subscription],
    interval_s: float,
    poll: bool,
    dom_interval_s: float | None = None,
    fec_interval_s: float | None = None,
    thresholds_interval_s: float | None = None,
) -> gnmi_pb2.SubscribeRequest:
    """The SubscriptionList for one stream (SAMPLE subscriptions at ``interval_s``; those marked
    ``interval: dom`` at ``dom_interval_s``, ``interval: fec`` at ``fec_interval_s`` and
    ``interval: thresholds`` at ``thresholds_interval_s``, when given)."""
    intervals = {"counters": round(interval_s * 1e9), "dom": round((dom_interval_s or interval_s) * 1e9),
                 "fec": round((fec_interval_s or interval_s) * 1e9),
                 "thresholds": round((thresholds_interval_s or interval_s) * 1e9)}  # fmt: skip
    subscriptions = [
        gnmi_pb2.Subscription(
            path=gnmi_path_generator(s.path),
            mode=_SAMPLE if s.mode == "sample" else _ON_CHANGE,
            sample_interval=intervals[s.interval] if s.mode == "sample" else 0,
        )
        for s in subs
    ]
    prefix = gnmi_pb2.Path(target=target, origin=profile.origin)
    return gnmi_pb2.SubscribeRequest(
        subscribe=gnmi_pb2.SubscriptionList(
            prefix=prefix, subscription=subscriptions, mode=_POLL if poll else _STREAM, encoding=profile.encoding
        )
    )


class GnmiStream:
    """Subscribe, read, decode and deliver for one (switch, target), resubscribing until cancelled.

    ``settings`` says what to subscribe to and how; the rest are what the stream works with:
    its decoder, the shared channel (built on first use), the sink and the collector's stats,
    the collector's concurrency limit, and ``on_state``, called on every state change.
    """

    def __init__(
        self,
        settings: StreamSettings,
        *,
        decoder: Decoder,
        channel: Callable[[], Channel],
        sink: Sink,
        stats: GnmiStats,
        limit: asyncio.Semaphore,
        on_state: Callable[[], None],
    ) -> None:
        self.switch, self.target = settings.switch, settings.target
        self.state = TargetState.CONNECTING
        self.detail: str | None = None
        self.sampled = settings.sampled  # has SAMPLE subscriptions: silence means STALE
        self.last_data = time.monotonic()
        self._request, self._dec, self._channel = settings.request.SerializeToString(), decoder, channel
        self._metadata = settings.metadata
        self._sink, self._stats, self._tuning = sink, stats, settings.tuning
        self._interval = interval_s = settings.interval_s
        self._poll = settings.poll
        self._first_timeout = settings.first_timeout_s
        self._tls = settings.tls
        self._limit = limit
        self._on_state = on_state
        self._lock = asyncio.Lock()
        self._wake = asyncio.Event()
        self._synced_at: float | None = None
        self._held = False
        self._counted = (0, 0, 0)  # decoder totals already added to the stats
        self._close_after = min(max(interval_s / 2, 0.05), 2.0)
        #: The least time between two reads of the call (0: read as messages come).
        self.read_every_s = 0.0
        self._idle_s = settings.tuning.idle_resubscribe_intervals * interval_s if settings.sampled else 0.0

    @property
    def synced(self) -> bool:
        """Whether the current (or last) RPC got its ``sync_response``."""
        return self._synced_at is not None

    def set_state(self, state: TargetState, detail: str | None = None) -> None:
        """Change the state and tell the switch (which reports the aggregate to the sink)."""
        if state is not self.state or detail != self.detail:
            self.state, self.detail = state, detail
            self._on_state()

    async def run(self) -> None:
        """Subscribe again and again, with backoff, until cancelled."""
        backoff = Backoff(
            self._tuning.backoff_initial_s,
            self._tuning.backoff_multiplier,
            self._tuning.backoff_jitter,
            self._tuning.backoff_max_s,
        )
        flusher = asyncio.create_task(self._flusher(), name=f"gnmi-flush-{self.switch}-{self.target}")
        try:
            attempts = 0
            while True:
                if attempts:
                    self._stats.reconnects += 1
                attempts += 1
                if self.state in (TargetState.CONNECTED, TargetState.STALE):
                    self.set_state(TargetState.CONNECTING)  # (after a failure, the failure stays reported)
                state, detail = await self._attempt()
                healthy = max(self._interval, 1.0)
                if self._synced_at is not None and time.monotonic() - self._synced_at >= healthy:
                    backoff.reset()
                self.set_state(state, detail)
                delay = backoff.next()
                log.info("gNMI %s/%s: %s (%s); retrying in %.1f s", self.switch, self.target, state, detail, delay)
                await asyncio.sleep(delay)
        finally:
            await stop_task(flusher, f"gNMI {self.switch}/{self.target}: the flusher", log)
            await self._drain()

    async def _drain(self) -> None:
        """On the way out (cancelled): hand over what was decoded, for a bounded time."""
        try:
            async with asyncio.timeout(self._tuning.drain_timeout_s):
                await self._flush(close=True)
        except Exception as exc:  # never let a slow or closed sink hold up or break shutdown
            log.warning("gNMI %s/%s: readings not handed over at shutdown: %r", self.switch, self.target, exc)

    async def _attempt(self) -> tuple[TargetState, str]:
        """One Subscribe RPC; returns the state and detail its end means."""
        self._synced_at = None
        try:
            outcome = await self._subscribe()
        finally:
            self._release()
        try:
            await self._flush(close=True)  # what arrived before the end is good data
        except Exception:
            log.exception("gNMI %s/%s: the sink failed", self.switch, self.target)
        return outcome

    async def _subscribe(self) -> tuple[TargetState, str]:
        try:
            await self._limit.acquire()
            self._held = True
            await self._read(self._channel())
            return TargetState.UNREACHABLE, "the target ended the stream"
        except (grpc.aio.AioRpcError, RpcError) as exc:
            if exc.code() == grpc.StatusCode.RESOURCE_EXHAUSTED:  # a message above the channel's limit
                self._sink.count_invalid(self.switch, OVERSIZE, 1)
            return classify(exc, tls=self._tls)
        except TimeoutError:
            if self.synced:
                return TargetState.UNREACHABLE, f"no update for {self._idle_s:g} s; resubscribing"
            return TargetState.UNREACHABLE, f"no response within {self._first_timeout:g} s"
        except ChannelError as exc:
            return TargetState.ERROR, str(exc)
        except Exception as exc:  # a bug (or a failing sink) costs one switch a retry, not the collector
            log.exception("gNMI %s/%s: unexpected failure", self.switch, self.target)
            return TargetState.ERROR, f"internal error: {type(exc).__name__}: {exc}"

    def _release(self) -> None:
        """Give back the concurrency slot (held from the attempt's start to its first sync)."""
        if self._held:
            self._held = False
            self._limit.release()

    async def _read(self, channel: Channel) -> None:
        """Open the call and read until it ends (a clean end returns; errors raise)."""
        dec, wake, stats = self._dec, self._wake, self._stats
        batch = self._tuning.batch_readings
        loop = asyncio.get_running_loop()
        dec.begin()
        call: Call | None = None
        poller: asyncio.Task[None] | None = None
        try:
            async with asyncio.timeout(self._first_timeout) as deadline:
                call = await channel.subscribe(self._metadata, self._oversize)
                await call.write(self._request)
                next_push = 0.0
                while True:
                    raws = await call.read_batch()
                    if not raws:
                        return
                    now = self.last_data = time.monotonic()
                    stats.responses += len(raws)
                    if now > next_push:  # move the idle deadline only now and then: it costs a timer
                        deadline.reschedule(loop.time() + self._idle_s if self._idle_s else None)
                        next_push = now + max(self._idle_s / 4, 0.5)
                    self._arrived()
                    for raw in raws:
                        if dec.feed(raw):
                            await self._flush(close=True)
                            if self._synced_at is None:
                                poller = self._on_first_sync(now, call)
                        elif len(dec.ready_ports) >= batch:
                            await self._flush(close=False)
                    if not wake.is_set():
                        wake.set()
                    if self.read_every_s and call.batches:
                        await self._hold(call)
        finally:
            if poller is not None:
                await stop_task(poller, f"gNMI {self.switch}/{self.target}: the poller", log)
            if call is not None:
                call.cancel()

    async def _hold(self, call: Call) -> None:
        """Wait ``read_every_s`` before the next read: what comes meanwhile is read in one batch.
        Cancelled, what came is decoded first (the drain then hands it over)."""
        try:
            await asyncio.sleep(self.read_every_s)
        except asyncio.CancelledError:
            raws = call.ready()
            self._stats.responses += len(raws)
            for raw in raws:
                self._dec.feed(raw)
            raise

    def _arrived(self) -> None:
        """Responses came: a STALE stream is CONNECTED again."""
        if self.state is TargetState.STALE:
            self.set_state(TargetState.CONNECTED)

    def _oversize(self, n: int) -> None:
        """``n`` messages above max_message_bytes, dropped unread by the channel."""
        self._sink.count_invalid(self.switch, OVERSIZE, n)

    def _on_first_sync(self, now: float, call: Call) -> asyncio.Task[None] | None:
        """CONNECTED; the concurrency slot given back; in POLL mode, the poller (returned) started."""
        self._synced_at = now
        self._release()
        self.set_state(TargetState.CONNECTED)
        if not self._poll:
            return None
        return asyncio.create_task(self._polls(call), name=f"gnmi-poll-{self.switch}")

    async def _polls(self, call: Call) -> None:
        poll = gnmi_pb2.SubscribeRequest(poll=gnmi_pb2.Poll()).SerializeToString()
        while True:
            await asyncio.sleep(self._interval)
            await call.write(poll)

    async def _flusher(self) -> None:
        """Hand over completed readings after a short quiet spell; close an open timestamp after a longer one."""
        short = self._tuning.flush_idle_s
        dec = self._dec
        while True:
            await self._wake.wait()
            self._wake.clear()
            while dec.pending or dec.ready_ports or dec.ready_lldp:
                quiet = time.monotonic() - self.last_data
                if quiet < short:
                    await asyncio.sleep(short - quiet)
                elif dec.ready_ports or dec.ready_lldp:
                    await self._flush(close=False)
                elif quiet < self._close_after:
                    await asyncio.sleep(self._close_after - quiet)
                else:
                    await self._flush(close=True)

    async def _flush(self, *, close: bool) -> None:
        """Hand the decoder's readings to the sink (in order, one flush at a time)."""
        async with self._lock:
            dec = self._dec
            if close:
                dec.close_group()
            ports, lldp = dec.take()
            self._account()
            if ports:
                self._stats.readings += len(ports)
                await self._sink.put_ports(ports)
            if lldp:
                await self._sink.put_lldp(lldp)

    def _account(self) -> None:
        dec, stats = self._dec, self._stats
        values, notes, ignored = self._counted
        stats.values += dec.values - values
        stats.notifications += dec.notifications - notes
        stats.ignored += dec.ignored - ignored
        self._counted = (dec.values, dec.notifications, dec.ignored)

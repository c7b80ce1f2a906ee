"""The gNMI collector: every gNMI switch's Subscribe streams, into a :class:`Sink`.

Per switch, the profile (:mod:`collector.profiles`) gives the subscriptions; they are grouped
by gNMI prefix target, one Subscribe stream per group (one for OpenConfig switches; SONiC
needs two, COUNTERS_DB and APPL_DB). A switch's streams share its channel
(:mod:`collector.gnmi_transport`): by default one HTTP/2 connection of our own client per
switch; with ``grpc.aio``, one channel per distinct address, TLS and credentials (the simulator
serves every switch on one address, a real switch has an address of its own). Each stream
(:mod:`collector.gnmi_stream`) decodes on the hot path (:mod:`collector.gnmi_decode`),
reconnects with gRPC's backoff schedule and reports its state; a switch's state is its worst
stream's, sent to ``sink.set_state`` on every change. A stream is given a
:class:`collector.gnmi_settings.StreamSettings`; values it skips as invalid are counted by the
sink alone (``sink.count_invalid``).

The collector owns every task it starts: :meth:`GnmiCollector.run` returns (or raises
CancelledError) only after all of them have ended and the channels are closed.

Channel settings, and why:

* keepalive pings every 30 s (``keepalive_permit_without_calls`` off, unlimited pings while a
  stream is open). Servers refuse clients that ping too often: gRPC-Go's default enforcement
  allows a ping per 5 min *without data* and strikes the client out with GOAWAY
  ``too_many_pings``; SAMPLE data every interval resets its strike count, so 30 s is safe
  with sampling at or below 30 s and finds a dead TCP connection within ~40 s;
* reconnecting is the streams' backoff alone (grpc.aio's channel-level backoff follows the same
  tuning; our client has none), so a switch that is back is seen at the next attempt;
* the channel accepts messages up to ``max_message_bytes``, the decoder's limit, found on the
  length prefix: our client drops a larger one unread (counted as oversize; the stream goes on),
  grpc.aio fails the call; no switch makes the collector buffer more than that per stream.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from functools import partial
from typing import Any, cast

from pygnmi.spec.v080 import gnmi_pb2

from collector.config import CollectorConfig
from collector.gnmi_counters_fec import CountersFec, CountersFecStream
from collector.gnmi_decode import StreamDecoder
from collector.gnmi_optics import OpticsDecoder, OpticsSink, OpticsStream
from collector.gnmi_settings import GnmiStats, GnmiTuning, StreamSettings
from collector.gnmi_stream import GnmiStream, subscribe_request
from collector.gnmi_transport import Channel, build_channel
from collector.gnmi_values import PortState, Resolver
from collector.profile_load import load_profile
from collector.profiles import Profile, Subscription
from collector.records import Sink, TargetState
from collector.targets import SwitchTarget, check_credentials, plaintext_warnings

_SEVERITY = {
    TargetState.CONNECTED: 0,
    TargetState.STALE: 1,
    TargetState.CONNECTING: 2,
    TargetState.UNREACHABLE: 3,
    TargetState.ERROR: 4,
}


_ChannelKey = tuple[str, str, bool, str, str, str, str, str, str]


class _Channels:
    """The channels, built on first use: with our HTTP/2 client one connection per switch (and
    credentials), as a real fabric has, and as gnmic keeps a connection per target even where a
    gateway serves many targets on one address; with grpc.aio one channel per address, which
    C-core multiplexes anyway."""

    def __init__(self, tuning: GnmiTuning, transport: str) -> None:
        self._tuning, self._transport = tuning, transport
        self._open: dict[_ChannelKey, Channel] = {}

    def key(self, t: SwitchTarget) -> _ChannelKey:
        tls = t.tls
        secret = t.password.get_secret_value() if t.password is not None else ""
        ca, cert, key = (str(p or "") for p in (tls.ca_file, tls.cert_file, tls.key_file))
        # A switch's streams share its connection: one socket read then carries one stream's
        # burst of notifications, handed to its reader in one batch (wire/grpc_h2.py).
        switch = t.switch if self._transport == "h2" else ""
        return (switch, t.address, tls.enabled, ca, cert, key, tls.server_name or "", t.username or "", secret)

    def get(self, t: SwitchTarget) -> Channel:
        key = self.key(t)
        channel = self._open.get(key)
        if channel is None:
            channel = self._open[key] = build_channel(self._transport, t.address, t.tls, self._tuning)
        return channel

    async def close(self) -> None:
        channels, self._open = list(self._open.values()), {}
        for channel in channels:
            await channel.close()


class _Switch:
    """A switch's streams; its state is the worst of theirs."""

    def __init__(self, name: str, sink: Sink) -> None:
        self.name = name
        self.streams: list[GnmiStream] = []
        #: Link-health streams (collector.gnmi_optics): not in the switch's state, not watched.
        self.optics: list[OpticsStream] = []
        self._sink = sink
        self._reported: tuple[TargetState, str | None] | None = None

    def update(self) -> None:
        worst = max(self.streams, key=lambda s: _SEVERITY[s.state])
        now = (worst.state, worst.detail)
        if now != self._reported:
            self._reported = now
            self._sink.set_state(self.name, *now)


class GnmiCollector:
    """Streams every gNMI target into ``sink`` until cancelled (see the module docstring)."""

    def __init__(
        self,
        targets: Sequence[SwitchTarget],
        sink: Sink,
        config: CollectorConfig,
        *,
        tuning: GnmiTuning | None = None,
    ) -> None:
        self.stats = GnmiStats()
        #: The link-health streams' own (collector.gnmi_optics), apart from the counters'.
        self.optics_stats = GnmiStats()
        self._sink = sink
        self._config = config
        self._tuning = tuning = tuning or GnmiTuning()
        self._channels = _Channels(tuning, config.gnmi_transport)
        self._limit = asyncio.Semaphore(config.gnmi_concurrency)
        self._switches: list[_Switch] = []
        resolvers: dict[str, Resolver] = {}
        gnmi = [t for t in targets if t.protocol == "gnmi"]
        for t in gnmi:
            check_credentials(t)  # credentials never reach plaintext metadata unless allowed
        #: One warning per plaintext entry, logged now (SPEC §10.6).
        self.plaintext_warnings = plaintext_warnings(gnmi)
        for t in gnmi:
            profile = load_profile(t.profile)  # a bad profile is a config error: raise now
            resolver = resolvers.get(t.profile) or resolvers.setdefault(t.profile, Resolver(profile))
            sw = _Switch(t.switch, sink)
            ports: dict[str, PortState] = {}
            for target, subs in profile.streams(t.gnmi_target, t.switch).items():
                sw.streams.append(self._stream(t, sw, resolver, ports, target, subs))
            if profile.optics_schema is not None and isinstance(sink, OpticsSink):
                for target, subs in profile.optics_streams(t.gnmi_target, t.switch).items():
                    sw.optics.append(self._optics_stream(t, profile, target, subs, sink))
            self._switches.append(sw)

    def _stream(
        self,
        t: SwitchTarget,
        sw: _Switch,
        resolver: Resolver,
        ports: dict[str, PortState],
        target: str,
        subs: tuple[Subscription, ...],
    ) -> GnmiStream:
        profile, tune, config = resolver.profile, self._tuning, self._config
        interval, poll, sink = config.gnmi_interval_s, config.gnmi_mode == "poll", self._sink
        invalid = partial(sink.count_invalid, t.switch)  # skipped values: counted by the sink alone
        fec = None
        if profile.fec_in_counters and isinstance(sink, OpticsSink):  # SONiC: FEC is in the COUNTERS hash
            fec = CountersFec(
                t.switch,
                invalid,
                every_s=config.fec_interval_s,
                counters_s=interval,
                max_skew_s=config.max_clock_skew_s,
            )
        decoder = StreamDecoder(
            t.switch,
            resolver,
            ports,
            invalid,
            max_message_bytes=tune.max_message_bytes,
            owns_lldp=profile.covers_lldp(subs),
            tap=fec,
        )
        request = subscribe_request(profile, target, subs, interval, poll)
        common: dict[str, Any] = {
            "decoder": decoder,
            "channel": lambda: self._channels.get(t),
            "sink": sink,
            "stats": self.stats,
            "limit": self._limit,
            "on_state": sw.update,
        }
        settings = self._settings(t, target, subs, request, interval)
        if fec is not None:
            return CountersFecStream(settings, fec=fec, optics=cast(OpticsSink, sink), **common)
        return GnmiStream(settings, **common)

    def _settings(
        self,
        t: SwitchTarget,
        target: str,
        subs: tuple[Subscription, ...],
        request: gnmi_pb2.SubscribeRequest,
        interval: float,
    ) -> StreamSettings:
        """One Subscribe stream's settings: the request, the credentials, the timing and tuning."""
        poll, tune = self._config.gnmi_mode == "poll", self._tuning
        metadata: tuple[tuple[str, str], ...] = ()
        if t.username is not None:
            metadata = (("username", t.username), ("password", t.password.get_secret_value() if t.password else ""))
        return StreamSettings(
            switch=t.switch,
            target=target,
            request=request,
            metadata=metadata,
            interval_s=interval,
            sampled=poll or any(s.mode == "sample" for s in subs),
            poll=poll,
            first_timeout_s=tune.first_response_timeout_s or max(t.timeout_s, 10.0),
            tls=t.tls.enabled,
            tuning=tune,
        )

    def _optics_stream(
        self, t: SwitchTarget, profile: Profile, target: str, subs: tuple[Subscription, ...], sink: OpticsSink
    ) -> OpticsStream:
        """A link-health stream (collector.gnmi_optics): FEC and DOM each at their own interval."""
        tune, config = self._tuning, self._config
        poll = config.gnmi_mode == "poll"
        assert profile.optics_schema is not None
        decoder = OpticsDecoder(
            t.switch,
            profile.optics_schema,
            partial(self._sink.count_invalid, t.switch),
            max_message_bytes=tune.max_message_bytes,
            max_skew_s=config.max_clock_skew_s,
        )
        every = {"counters": config.gnmi_interval_s, "dom": config.dom_interval_s, "fec": config.fec_interval_s,
                 "thresholds": config.thresholds_interval_s}  # fmt: skip
        sampled = [every[s.interval] for s in subs if s.mode == "sample"]
        interval = config.gnmi_interval_s if poll or not sampled else min(sampled)  # the stream's fastest
        request = subscribe_request(
            profile, target, subs, config.gnmi_interval_s, poll, config.dom_interval_s, config.fec_interval_s,
            config.thresholds_interval_s,
        )  # fmt: skip
        return OpticsStream(
            self._settings(t, target, subs, request, interval),
            decoder=decoder,
            optics=sink,
            channel=lambda: self._channels.get(t),
            sink=self._sink,
            stats=self.optics_stats,
            limit=self._limit,
            on_state=lambda: None,  # its state is its own (logged), not the switch's reachability
        )

    async def run(self) -> None:
        """Collect until cancelled; every task started here has ended when this returns."""
        for sw in self._switches:
            sw.update()  # CONNECTING
        try:
            async with asyncio.TaskGroup() as tg:
                for sw in self._switches:
                    for stream in sw.streams:
                        tg.create_task(stream.run(), name=f"gnmi-{sw.name}-{stream.target}")
                    for optics in sw.optics:
                        tg.create_task(optics.run(), name=f"gnmi-optics-{sw.name}-{optics.target}")
                tg.create_task(self._watchdog(), name="gnmi-watchdog")
        finally:
            await self._channels.close()

    async def _watchdog(self) -> None:
        """Mark SAMPLE streams that went quiet as STALE (they never read as zero traffic)."""
        interval = self._config.gnmi_interval_s
        stale_after = self._tuning.stale_intervals * interval
        streams = [s for sw in self._switches for s in sw.streams if s.sampled]
        if not streams:  # nothing to watch (no gNMI targets): still run until cancelled
            await asyncio.Event().wait()
        while True:
            await asyncio.sleep(min(interval / 4, 1.0))
            now = time.monotonic()
            for s in streams:
                quiet = now - s.last_data
                if s.state is TargetState.CONNECTED and quiet > stale_after:
                    s.set_state(TargetState.STALE, f"no update for {quiet:.0f} s (expected every {interval:g} s)")


__all__ = ["GnmiCollector", "GnmiStats", "GnmiTuning"]

"""The gNMI collector's settings and counters, shared by :mod:`collector.gnmi` and its streams.

:class:`GnmiTuning` holds the collector-wide knobs, :class:`StreamSettings` what one Subscribe
stream (:class:`collector.gnmi_stream.GnmiStream`) is told, :class:`GnmiStats` what every
stream counts. They live here, below both modules, so that :mod:`collector.gnmi` (which builds
the streams) and :mod:`collector.gnmi_stream` (which runs one) import them without importing
each other.
"""

from __future__ import annotations

from dataclasses import dataclass

from pygnmi.spec.v080 import gnmi_pb2


@dataclass(frozen=True, slots=True)
class GnmiTuning:
    """Knobs with sensible defaults; tests shorten the backoff."""

    backoff_initial_s: float = 1.0
    backoff_multiplier: float = 1.6
    backoff_jitter: float = 0.2
    backoff_max_s: float = 120.0
    #: A SAMPLE stream silent this many intervals is STALE ...
    stale_intervals: float = 3.0
    #: ... and this many, resubscribed (0: never).
    idle_resubscribe_intervals: float = 10.0
    #: The first response must come within this (None: the target's ``timeout_s``, at least 10 s).
    first_response_timeout_s: float | None = None
    #: Quiet time after which completed readings are handed over (a full batch goes at once).
    flush_idle_s: float = 0.02
    batch_readings: int = 512
    #: On cancellation, how long a stream may spend handing over its last readings.
    drain_timeout_s: float = 2.0
    #: The largest SubscribeResponse: the decoder's limit and the channel's (a larger one fails its
    #: stream, counted as oversize, before the channel buffers it).
    max_message_bytes: int = 64 << 20
    keepalive_time_s: float = 30.0
    keepalive_timeout_s: float = 10.0
    #: Our HTTP/2 client waits this long after a small socket read before the next (wire/grpc_h2.py
    #: COALESCE_S): messages read together, not one wake-up each. 0: read as they come.
    read_coalesce_s: float = 0.02
    #: A link-health stream (collector/gnmi_optics.py) reads its messages at most this often (0:
    #: as they come). Its FEC and DOM come once a minute and are judged over hours, but a switch
    #: writes a minute's burst a message at a time: read as it trickled in, every 20 ms of it was
    #: a wake-up of the stream, its flusher and the writer's hand-off. Held, what came meanwhile
    #: waits in the stream's buffer (bounded by its flow-control window) and is read in one batch.
    optics_read_every_s: float = 0.5


@dataclass(frozen=True, slots=True)
class StreamSettings:
    """What one Subscribe stream for one (switch, gNMI target) is told."""

    switch: str
    target: str
    request: gnmi_pb2.SubscribeRequest  # the SubscriptionList, written once per RPC
    metadata: tuple[tuple[str, str], ...]  # gRPC call metadata (username/password)
    interval_s: float  # the sampling interval
    sampled: bool  # has SAMPLE subscriptions (or polls): silence means STALE
    poll: bool  # POLL mode: send a Poll every interval
    first_timeout_s: float  # the first response must come within this
    tls: bool  # the channel uses TLS (for the failure detail)
    tuning: GnmiTuning


@dataclass(slots=True)
class GnmiStats:
    """Monotonic counters over every stream (rates are their differences over time).

    Skipped (invalid) values are not counted here: they go to the sink's ``count_invalid``.
    """

    values: int = 0  # leaf values decoded into readings
    notifications: int = 0
    responses: int = 0
    readings: int = 0  # PortReadings handed to the sink
    ignored: int = 0  # values of leaves the profile does not want
    reconnects: int = 0

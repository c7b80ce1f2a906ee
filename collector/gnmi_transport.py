"""How a gNMI stream reaches its switch: grpc.aio, or fabricmon's own HTTP/2 client.

Both give a stream the same three things: ``await channel.subscribe(metadata)`` opens a
Subscribe call, ``await call.read_batch()`` returns every response that has arrived (``[]``
at a clean end), ``await call.write(bytes)`` sends a request; failures raise an error with
``code()`` and ``details()`` (:class:`grpc.aio.AioRpcError` or :class:`RpcError`), which
:func:`collector.gnmi_stream.classify` reads the same way. :mod:`wire` imports nothing from grpc:
its errors carry :class:`wire.grpc_status.StatusCode`, mapped to ``grpc.StatusCode`` here
(:class:`RpcError`), the one place the collector meets our client.

Both transports accept messages up to the decoder's limit (``GnmiTuning.max_message_bytes``),
so neither buffers what the decoder would drop. Ours finds a larger one on its length prefix and
drops its bytes as they arrive (``on_skipped`` is told; the stream goes on); grpc.aio fails
the call with RESOURCE_EXHAUSTED (counted as oversize; the stream retries).

``collector.gnmi_transport: h2`` (the default) is :mod:`wire.grpc_h2`: one wake-up per socket
read, however many responses it carries, ~3x cheaper per message than grpc.aio
(docs/benchmarks.md). ``grpc`` is grpc.aio, kept for a device our client cannot talk to.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from collections.abc import Callable, Sequence
from typing import Protocol

import grpc

from collector.config import TlsConfig
from collector.gnmi_settings import GnmiTuning
from wire import grpc_h2

SUBSCRIBE = "/gnmi.gNMI/Subscribe"
#: Keepalive doubles after each GOAWAY "too_many_pings", up to this (C-core's client does the same).
MAX_KEEPALIVE_S = 3600.0
log = logging.getLogger(__name__)
Metadata = Sequence[tuple[str, str]]


class ChannelError(Exception):
    """A channel that cannot be built (unreadable TLS files): the stream's state becomes ERROR."""


_GRPC_CODES = {code.value[0]: code for code in grpc.StatusCode}


def grpc_code(code: grpc_h2.StatusCode) -> grpc.StatusCode:
    """Our client's status code as grpc's (the numbers are gRPC's, the same on both sides)."""
    return _GRPC_CODES.get(int(code), grpc.StatusCode.UNKNOWN)


class RpcError(Exception):
    """A call on our HTTP/2 client that ended without OK, read as grpc.aio's errors: ``code()`` is grpc's."""

    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        super().__init__(f"{code.name}: {details}")
        self._code, self._details = code, details

    @classmethod
    def of(cls, exc: grpc_h2.RpcError) -> RpcError:
        return cls(grpc_code(exc.code()), exc.details())

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return self._details


class Call(Protocol):
    #: ``read_batch`` gives every message that has arrived (ours), not one at a time (grpc.aio):
    #: only such a call is read with a hold between reads (GnmiTuning.optics_read_every_s).
    batches: bool

    async def write(self, message: bytes) -> None: ...
    async def read_batch(self) -> list[bytes]: ...
    def ready(self) -> list[bytes]:
        """The messages that have arrived, taken without waiting (what a cancelled hold left)."""
        ...

    def cancel(self) -> None: ...


#: Told how many messages above ``max_message_bytes`` our client dropped unread (grpc.aio fails the call instead).
OnSkipped = Callable[[int], None]


class Channel(Protocol):
    async def subscribe(self, metadata: Metadata, on_skipped: OnSkipped | None = None) -> Call: ...
    async def close(self) -> None: ...


def split_address(address: str) -> tuple[str, int]:
    """``host:port`` or ``[v6]:port`` as (host, port)."""
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        raise ChannelError(f"gNMI address {address!r} is not host:port")
    return host.strip("[]"), int(port)


class _GrpcCall:
    __slots__ = ("_call",)

    def __init__(self, call: grpc.aio.StreamStreamCall) -> None:
        self._call = call

    async def write(self, message: bytes) -> None:
        await self._call.write(message)

    batches = False

    async def read_batch(self) -> list[bytes]:
        raw = await self._call.read()
        return [] if raw is grpc.aio.EOF else [raw]

    def ready(self) -> list[bytes]:
        return []  # grpc.aio keeps what arrived to itself

    def cancel(self) -> None:
        self._call.cancel()


class GrpcChannel:
    """grpc.aio: one channel (its own reconnects and keepalive) per address and credentials."""

    def __init__(self, address: str, tls: TlsConfig, tuning: GnmiTuning) -> None:
        options: list[tuple[str, int | str]] = [
            ("grpc.keepalive_time_ms", int(tuning.keepalive_time_s * 1000)),
            ("grpc.keepalive_timeout_ms", int(tuning.keepalive_timeout_s * 1000)),
            ("grpc.keepalive_permit_without_calls", 0),
            ("grpc.http2.max_pings_without_data", 0),
            ("grpc.max_receive_message_length", tuning.max_message_bytes),
            ("grpc.initial_reconnect_backoff_ms", max(int(tuning.backoff_initial_s * 1000), 100)),
            ("grpc.max_reconnect_backoff_ms", max(int(tuning.backoff_max_s * 1000), 100)),
            ("grpc.enable_retries", 0),
        ]
        if not tls.enabled:
            self._channel = grpc.aio.insecure_channel(address, options=options)
            return
        if tls.server_name:
            options.append(("grpc.ssl_target_name_override", tls.server_name))
        self._channel = grpc.aio.secure_channel(address, _grpc_credentials(tls), options=options)

    async def subscribe(self, metadata: Metadata, on_skipped: OnSkipped | None = None) -> Call:
        method = self._channel.stream_stream(SUBSCRIBE, request_serializer=None, response_deserializer=None)
        return _GrpcCall(method(metadata=tuple(metadata) or None))

    async def close(self) -> None:
        await self._channel.close(grace=None)


def _read(path: object) -> bytes | None:
    if path is None:
        return None
    try:
        with open(str(path), "rb") as f:
            return f.read()
    except OSError as exc:
        raise ChannelError(f"TLS file {path} unreadable: {exc.strerror or exc}") from exc


def _grpc_credentials(tls: TlsConfig) -> grpc.ChannelCredentials:
    return grpc.ssl_channel_credentials(
        root_certificates=_read(tls.ca_file), private_key=_read(tls.key_file), certificate_chain=_read(tls.cert_file)
    )


class _H2Call:
    """A :class:`wire.grpc_h2.Stream` whose errors are :class:`RpcError`, its skipped messages told."""

    __slots__ = ("_on_skipped", "_skipped", "_stream")

    batches = True

    def __init__(self, stream: grpc_h2.Stream, on_skipped: OnSkipped | None) -> None:
        self._stream, self._on_skipped, self._skipped = stream, on_skipped, 0

    def ready(self) -> list[bytes]:
        return self._stream.take_ready()

    async def write(self, message: bytes) -> None:
        try:
            await self._stream.write(message)
        except grpc_h2.RpcError as exc:
            raise RpcError.of(exc) from exc

    async def read_batch(self) -> list[bytes]:
        try:
            return await self._stream.read_batch()
        except grpc_h2.RpcError as exc:
            raise RpcError.of(exc) from exc
        finally:
            if self._stream.skipped != self._skipped:
                n, self._skipped = self._stream.skipped - self._skipped, self._stream.skipped
                if self._on_skipped is not None:
                    self._on_skipped(n)

    def cancel(self) -> None:
        self._stream.cancel()


class H2Channel:
    """:mod:`wire.grpc_h2`: HTTP/2 connections per address and credentials, opened on demand.

    Streams share one connection while the switch's SETTINGS_MAX_CONCURRENT_STREAMS allows;
    a stream beyond it gets a connection of its own. A connection that failed (or got GOAWAY)
    is replaced by the next ``subscribe``; its streams have failed with UNAVAILABLE and retry
    on their own backoff.
    """

    def __init__(self, address: str, tls: TlsConfig, tuning: GnmiTuning) -> None:
        self._host, self._port = split_address(address)
        self._tuning = tuning
        self._server_name = tls.server_name or None
        self._ssl: ssl.SSLContext | None = None
        if tls.enabled:
            for path in (tls.ca_file, tls.cert_file, tls.key_file):
                _read(path)  # an unreadable file is named here, before ssl's terser errors
            try:
                self._ssl = grpc_h2.client_ssl_context(
                    str(tls.ca_file) if tls.ca_file else None,
                    str(tls.cert_file) if tls.cert_file else None,
                    str(tls.key_file) if tls.key_file else None,
                )
            except (ssl.SSLError, ValueError, OSError) as exc:
                raise ChannelError(f"TLS files unusable (CA, certificate or key): {exc}") from exc
        self._conns: list[grpc_h2.Connection] = []
        self._connecting: asyncio.Lock = asyncio.Lock()
        self._keepalive_s = tuning.keepalive_time_s

    async def _connection(self) -> grpc_h2.Connection:
        async with self._connecting:  # streams of one switch share one connection
            for conn in [c for c in self._conns if not c.usable]:
                self._conns.remove(conn)
                if conn.too_many_pings:  # the server's ping policy: halve our pings
                    self._keepalive_s = min(self._keepalive_s * 2, MAX_KEEPALIVE_S)
                    log.warning("gNMI %s:%d said too_many_pings; keepalive now every %g s",
                                self._host, self._port, self._keepalive_s)  # fmt: skip
            for conn in self._conns:
                if conn.has_room:
                    return conn
            try:
                conn = await grpc_h2.connect(
                    self._host,
                    self._port,
                    ssl_context=self._ssl,
                    server_name=self._server_name,
                    keepalive_s=self._keepalive_s,
                    keepalive_timeout_s=self._tuning.keepalive_timeout_s,
                    coalesce_s=self._tuning.read_coalesce_s,
                )
            except grpc_h2.RpcError as exc:
                raise RpcError.of(exc) from exc
            self._conns.append(conn)
            return conn

    @property
    def keepalive_s(self) -> float:
        """The keepalive interval of the next connection (doubled after each "too_many_pings")."""
        return self._keepalive_s

    @property
    def connections(self) -> int:
        """Connections open (one, unless the switch limits streams per connection)."""
        return len(self._conns)

    async def subscribe(self, metadata: Metadata, on_skipped: OnSkipped | None = None) -> Call:
        conn = await self._connection()
        try:
            stream = conn.open(SUBSCRIBE, metadata, self._tuning.max_message_bytes, skip_oversize=True)
            return _H2Call(stream, on_skipped)
        except grpc_h2.RpcError as exc:
            raise RpcError.of(exc) from exc

    async def close(self) -> None:
        for conn in self._conns:
            conn.close()
        self._conns = []


def build_channel(kind: str, address: str, tls: TlsConfig, tuning: GnmiTuning) -> Channel:
    """The channel ``collector.gnmi_transport`` names."""
    if kind == "grpc":
        return GrpcChannel(address, tls, tuning)
    return H2Channel(address, tls, tuning)

"""A small gRPC client over HTTP/2 on asyncio, for many long-lived streams of small messages.

grpc.aio costs ~30 µs of CPU per received message (a C-core batch per message, its poller
thread, an eventfd wake-up and a future per read); a gNMI collector receiving one
Notification per interface spends more there than on everything else it does. This client
parses HTTP/2 frames itself in :meth:`Connection.data_received`, so one socket read that
carries fifty messages costs one wake-up, and a reader takes every message that has arrived
in one call (:meth:`Stream.read_batch`).

It speaks what a gRPC client needs and no more (RFC 9113, gRPC's PROTOCOL-HTTP2.md):

* the preface and SETTINGS (push off, a large stream window), SETTINGS and PING acks;
* streams multiplexed on one connection (odd ids), HEADERS + CONTINUATION decoded with
  ``hpack`` (its dynamic table per connection), ours sent as literals that are never indexed;
* flow control both ways: a stream's and the connection's window are given back only as the
  reader takes messages, so a slow reader stops the sender (back-pressure), and our own DATA
  waits for the peer's window;
* gRPC's length-prefixed messages across DATA frames, a size limit (RESOURCE_EXHAUSTED), the
  status from trailers (``grpc-status``, percent-encoded ``grpc-message``), a Trailers-Only
  answer, HTTP statuses and RST_STREAM codes mapped as gRPC's spec maps them, GOAWAY;
* keepalive PINGs while streams are open, the connection failed when one goes unanswered;
* TLS with ALPN ``h2`` (an :class:`ssl.SSLContext` from the caller), by :mod:`wire.tls_layer`
  over a plain socket transport, so read coalescing pauses the socket over TLS too.

A switch is an untrusted peer, so nothing it sends grows our memory past a bound, and its
faults end what RFC 9113 says they end:

* control replies (PING and SETTINGS ACKs) wait in a queue of at most :data:`MAX_CONTROL_REPLIES`
  while the peer does not read ours; past it, GOAWAY ENHANCE_YOUR_CALM;
* windows: the connection's and each stream's (:mod:`wire.grpc_h2_stream`) are enforced;
* connection errors (GOAWAY, every stream fails INTERNAL) for frames that break the connection:
  DATA or HEADERS on stream 0 or on a stream we never opened, SETTINGS or PING off stream 0, a
  SETTINGS ACK with a payload, a PING not of 8 bytes, a window past 2^31-1 (FLOW_CONTROL_ERROR),
  more than :data:`MAX_CONTINUATIONS` CONTINUATION frames in a header block;
* stream errors (RST_STREAM, that call fails, the others go on) for a response at fault: DATA
  before its HEADERS, a malformed ``:status`` or ``grpc-status``, trailers without END_STREAM;
* the peer's SETTINGS_MAX_CONCURRENT_STREAMS: :meth:`Connection.open` beyond it fails with
  UNAVAILABLE (:attr:`Connection.has_room` says whether one more fits);
* keepalive: a PING goes out after ``keepalive_s`` without a stream's progress, and only the ACK
  that carries its own 8 bytes answers it.

Errors are :class:`RpcError` with :class:`wire.grpc_status.StatusCode` (gRPC's codes and names;
no grpc import here): the collector maps them at its boundary (:mod:`collector.gnmi_transport`).
"""

from __future__ import annotations

import asyncio
import os
import socket
import ssl
import time
from collections.abc import Callable
from typing import cast

from wire.grpc_h2_stream import MAX_QUEUED_MESSAGES, STREAM_WINDOW, Stream
from wire.grpc_status import HTTP_STATUS, RpcError, StatusCode
from wire.h2_connection import (
    BUG,
    COALESCE_S,
    CONNECTION_WINDOW,
    MAX_CONTINUATIONS,
    MAX_CONTROL_REPLIES,
    MAX_FRAME,
    MAX_HEADER_BYTES,
    MAX_MESSAGE,
    ConnectionCore,
)
from wire.h2_frames import (
    CANCEL,
    COMPRESSION_ERROR,
    CONTINUATION,
    DATA,
    END_HEADERS,
    END_STREAM,
    ENHANCE_YOUR_CALM,
    FLOW_CONTROL_ERROR,
    FRAME_SIZE_ERROR,
    GOAWAY,
    HEADERS,
    INTERNAL_ERROR,
    MAX_WINDOW,
    PADDED,
    PING,
    PRIORITY,
    PRIORITY_FLAG,
    PROTOCOL_ERROR,
    PUSH_PROMISE,
    RST_STREAM,
    SETTINGS,
    UINT32,
    WINDOW_UPDATE,
    ProtocolError,
    encode_headers,
    frame,
    grpc_message,
)
from wire.tls_layer import HANDSHAKE_TIMEOUT_S, TlsLayer

__all__ = [
    "BUG", "COALESCE_S", "CONNECTION_WINDOW", "MAX_CONTINUATIONS", "MAX_CONTROL_REPLIES", "MAX_FRAME",
    "MAX_HEADER_BYTES", "MAX_MESSAGE", "MAX_QUEUED_MESSAGES", "STREAM_WINDOW", "Connection", "ProtocolError",
    "RpcError", "StatusCode", "Stream", "client_ssl_context", "connect", "encode_headers", "frame", "grpc_message",
]  # fmt: skip


class Connection(ConnectionCore):
    """One HTTP/2 connection carrying any number of gRPC streams."""

    # --- reading ---------------------------------------------------------------------------

    def data_received(self, data: bytes) -> None:
        self._read_at = time.monotonic()
        self.reads += 1
        if self._coalesce_s > 0 and len(data) < self._coalesce_below and self._resume_timer is None:
            self._pause_reading()
        if self._rest:
            self._rest += data
            if len(self._rest) < self._rest_need:  # a frame trickling in is kept, not re-parsed per read
                return
            data, self._rest = bytes(self._rest), bytearray()
        view = memoryview(data)  # of immutable bytes: payload slices may outlive this call
        pos, end = 0, len(view)
        try:
            while end - pos >= 9:
                length = (view[pos] << 16) | (view[pos + 1] << 8) | view[pos + 2]
                if length > MAX_FRAME:
                    raise ProtocolError(f"a {length}-byte frame, above our SETTINGS_MAX_FRAME_SIZE", FRAME_SIZE_ERROR)
                if pos + 9 + length > end:
                    break
                kind, flags = view[pos + 3], view[pos + 4]
                sid = UINT32.unpack_from(view, pos + 5)[0] & MAX_WINDOW
                payload = view[pos + 9 : pos + 9 + length]
                pos += 9 + length
                if self._header_block is not None and kind != CONTINUATION:
                    raise ProtocolError("a frame inside a header block")
                if kind == DATA:
                    self._on_data(sid, flags, payload, length)
                else:
                    self._on_frame(kind, flags, sid, payload)
        except ProtocolError as exc:
            self.abort(exc.code, str(exc), hard=True)
            return
        except Exception as exc:  # a bug of ours ends this connection, not the worker's loop
            self.abort(INTERNAL_ERROR, f"{BUG}: {type(exc).__name__}: {exc}", hard=True)
            return
        if pos < end:
            self._rest = bytearray(view[pos:])
            self._rest_need = 9 + ((view[pos] << 16) | (view[pos + 1] << 8) | view[pos + 2]) if end - pos >= 9 else 9

    def _pause_reading(self) -> None:
        transport = self._transport
        if transport is None or transport.is_closing():
            return
        transport.pause_reading()
        self._resume_timer = asyncio.get_running_loop().call_later(self._coalesce_s, self._resume_reading)

    def _resume_reading(self) -> None:
        self._resume_timer = None
        transport = self._transport
        if transport is not None and not transport.is_closing():
            transport.resume_reading()

    # --- frames ------------------------------------------------------------------------------

    def _on_data(self, sid: int, flags: int, payload: memoryview, length: int) -> None:
        self._recv_unacked += length
        if self._recv_unacked > CONNECTION_WINDOW:
            raise ProtocolError("the peer overran the connection window", FLOW_CONTROL_ERROR)
        if flags & PADDED:
            pad = payload[0] if length else 0
            if pad >= length:
                raise ProtocolError("padding longer than the frame")
            payload = payload[1 : length - pad]
        stream = self._streams.get(sid)
        if stream is None:
            if not self._opened(sid):  # stream 0, or idle: RFC 9113 §6.1, §5.1
                raise ProtocolError(f"DATA on stream {sid}, which we never opened")
            self.give_back(None, length)  # a stream we have reset or finished: just give the window back
            return
        if stream.headers is None:  # a response is HEADERS first (RFC 9113 §8.1): malformed, a stream error
            self.give_back(None, length)
            stream.abort(PROTOCOL_ERROR, StatusCode.INTERNAL, "DATA before the response's HEADERS")
            return
        self._progress_at = self._read_at
        stream.data(payload, length)
        if flags & END_STREAM:
            stream.abort(PROTOCOL_ERROR, StatusCode.INTERNAL, "the stream ended without trailers")

    def _on_frame(self, kind: int, flags: int, sid: int, payload: memoryview) -> None:
        handler = _HANDLERS.get(kind)
        if handler is not None:  # unknown frame types are ignored, as RFC 9113 says
            handler(self, flags, sid, payload)

    def _on_headers(self, flags: int, sid: int, payload: memoryview) -> None:
        if sid == 0:
            raise ProtocolError("HEADERS on stream 0")
        if flags & PADDED:
            if not payload:
                raise ProtocolError("a padded HEADERS frame without its pad length", FRAME_SIZE_ERROR)
            pad = payload[0]
            if pad >= len(payload):
                raise ProtocolError("HEADERS padding longer than the frame")
            payload = payload[1 : len(payload) - pad]
        if flags & PRIORITY_FLAG:
            if len(payload) < 5:
                raise ProtocolError("a HEADERS frame shorter than its priority fields", FRAME_SIZE_ERROR)
            payload = payload[5:]
        self._header_block = (sid, flags, bytearray(payload))
        self._continuations = 0
        if flags & END_HEADERS:
            self._headers_done()

    def _on_continuation(self, flags: int, sid: int, payload: memoryview) -> None:
        if self._header_block is None or self._header_block[0] != sid:
            raise ProtocolError("CONTINUATION without HEADERS")
        self._continuations += 1
        if self._continuations > MAX_CONTINUATIONS:
            why = f"more than {MAX_CONTINUATIONS} CONTINUATION frames in a header block"
            raise ProtocolError(why, ENHANCE_YOUR_CALM)
        block = self._header_block[2]
        block += payload
        if len(block) > MAX_HEADER_BYTES:
            raise ProtocolError("a header block above our limit", ENHANCE_YOUR_CALM)
        if flags & END_HEADERS:
            self._headers_done()

    def _headers_done(self) -> None:
        assert self._header_block is not None
        sid, flags, block = self._header_block
        self._header_block = None
        try:  # decoded whatever the stream: HPACK's dynamic table is the connection's
            raw = cast(list[tuple[bytes, bytes]], self._decoder.decode(bytes(block), raw=True))
        except Exception as exc:  # hpack's errors (HPACKError, OversizedHeaderListError, ...)
            raise ProtocolError(f"undecodable headers: {exc}", COMPRESSION_ERROR) from exc
        stream = self._streams.get(sid)
        if stream is None:
            if not self._opened(sid):
                raise ProtocolError(f"HEADERS on stream {sid}, which we never opened")
            return
        self._progress_at = self._read_at
        headers = {k.decode("utf-8", "replace"): v.decode("utf-8", "replace") for k, v in raw}
        if stream.headers is None:
            self._response_headers(stream, headers, flags)
        elif not flags & END_STREAM:
            stream.abort(PROTOCOL_ERROR, StatusCode.INTERNAL, "trailers without END_STREAM")
        else:
            stream.finish(headers)

    def _response_headers(self, stream: Stream, headers: dict[str, str], flags: int) -> None:
        status = headers.get(":status", "")
        if len(status) != 3 or not status.isascii() or not status.isdigit():
            stream.abort(PROTOCOL_ERROR, StatusCode.INTERNAL, f"a malformed :status {status[:20]!r}")
            return
        if status[0] == "1" and not flags & END_STREAM:
            return  # informational (RFC 9113 §8.1): the response's HEADERS follow
        stream.headers = headers
        if status != "200":
            stream.abort(CANCEL, HTTP_STATUS.get(int(status), StatusCode.UNKNOWN), f"HTTP status {status}")
            return
        if not headers.get("content-type", "").startswith("application/grpc"):
            stream.abort(CANCEL, StatusCode.UNKNOWN, f"not gRPC (content-type {headers.get('content-type')!r})")
            return
        if flags & END_STREAM:  # Trailers-Only
            stream.finish(headers)


#: What each frame type (but DATA, handled inline) does; unknown types are ignored.
_HANDLERS: dict[int, Callable[[Connection, int, int, memoryview], None]] = {
    HEADERS: Connection._on_headers,
    PRIORITY: Connection._on_priority,
    CONTINUATION: Connection._on_continuation,
    SETTINGS: Connection._on_settings_frame,
    PING: Connection._on_ping,
    WINDOW_UPDATE: Connection._on_window_update,
    RST_STREAM: Connection._on_rst_stream,
    GOAWAY: Connection._on_goaway,
    PUSH_PROMISE: Connection._on_push_promise,
}


async def connect(
    host: str,
    port: int,
    *,
    ssl_context: ssl.SSLContext | None = None,
    server_name: str | None = None,
    keepalive_s: float = 30.0,
    keepalive_timeout_s: float = 20.0,
    coalesce_s: float = COALESCE_S,
    handshake_timeout_s: float = HANDSHAKE_TIMEOUT_S,
) -> Connection:
    """A connected :class:`Connection` (TLS with ALPN ``h2`` when ``ssl_context`` is given, the
    certificate verified for ``server_name``, else ``host``); ``coalesce_s``: see :data:`COALESCE_S`
    (0: every read as it comes)."""
    authority = f"{server_name or host}:{port}" if ":" not in host else f"[{host}]:{port}"
    loop = asyncio.get_running_loop()

    def protocol() -> Connection:
        return Connection(authority, tls=ssl_context is not None, keepalive_s=keepalive_s,
                          keepalive_timeout_s=keepalive_timeout_s, coalesce_s=coalesce_s)  # fmt: skip

    try:
        if ssl_context is None:
            _, conn = await loop.create_connection(protocol, host, port)
            return conn
        # Our own TLS layer, not create_connection(ssl=...): asyncio's keeps reading the socket
        # while the protocol is paused, which undid read coalescing (wire/tls_layer.py).
        name = server_name or host
        _, layer = await loop.create_connection(
            lambda: TlsLayer(protocol(), ssl_context, name, handshake_timeout_s), host, port
        )
    except OSError as exc:
        reason = os.strerror(exc.errno) if exc.errno and not isinstance(exc, socket.gaierror) else str(exc)
        why = f"failed to connect to {host}:{port}: {reason}"
        raise RpcError(StatusCode.UNAVAILABLE, why) from exc
    try:
        await layer.handshake
    except OSError as exc:  # ssl.SSLError (a refused certificate or name), a reset, the timeout
        layer.transport.abort()
        raise RpcError(StatusCode.UNAVAILABLE, f"TLS handshake failed: {exc}") from exc
    except asyncio.CancelledError:
        layer.transport.abort()
        raise
    conn = cast(Connection, layer.app)
    if layer.ssl.selected_alpn_protocol() != "h2":
        conn.close()
        raise RpcError(StatusCode.UNAVAILABLE, "TLS handshake: the server refused HTTP/2 (ALPN h2)")
    return conn


def client_ssl_context(ca_file: str | None, cert_file: str | None, key_file: str | None) -> ssl.SSLContext:
    """A client TLS context for gRPC: ALPN h2, TLS 1.2+, the CA given (else the system's), an optional client cert."""
    ctx = ssl.create_default_context(cafile=ca_file)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.verify_flags &= ~ssl.VERIFY_X509_STRICT  # as strict as grpc's own TLS, no more (Python 3.13 sets it)
    ctx.set_alpn_protocols(["h2"])
    ctx.options |= ssl.OP_NO_RENEGOTIATION  # TLS 1.2 renegotiation: gRPC peers never ask, and wire.tls_layer refuses it
    if cert_file:
        ctx.load_cert_chain(cert_file, key_file or None, password=_no_passphrase)
    return ctx


def _no_passphrase() -> str:
    # without this, OpenSSL would ask for an encrypted key's passphrase on the terminal, blocking the loop
    raise ValueError("the private key is encrypted; fabricmon needs an unencrypted key file")

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
import contextlib
import os
import socket
import ssl
import struct
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import cast

import hpack  # type: ignore[import-untyped, unused-ignore]

from wire.grpc_h2_stream import MAX_QUEUED_MESSAGES, STREAM_WINDOW, Stream
from wire.grpc_status import HTTP_STATUS, RST_STATUS, RpcError, StatusCode
from wire.h2_frames import (
    ACK,
    CANCEL,
    COMPRESSION_ERROR,
    CONTINUATION,
    DATA,
    DEFAULT_WINDOW,
    END_HEADERS,
    END_STREAM,
    ENHANCE_YOUR_CALM,
    FLOW_CONTROL_ERROR,
    FRAME_SIZE_ERROR,
    GOAWAY,
    HEADERS,
    INTERNAL_ERROR,
    MAX_WINDOW,
    NO_ERROR,
    PADDED,
    PING,
    PREFACE,
    PRIORITY,
    PRIORITY_FLAG,
    PROTOCOL_ERROR,
    PUSH_PROMISE,
    RST_STREAM,
    S_ENABLE_PUSH,
    S_INITIAL_WINDOW,
    S_MAX_CONCURRENT,
    S_MAX_FRAME,
    S_MAX_HEADER_LIST,
    SETTINGS,
    UINT32,
    WINDOW_UPDATE,
    ProtocolError,
    encode_headers,
    error_name,
    frame,
    grpc_message,
)
from wire.tls_layer import HANDSHAKE_TIMEOUT_S, TlsLayer

__all__ = [
    "CONNECTION_WINDOW", "MAX_CONTINUATIONS", "MAX_CONTROL_REPLIES", "MAX_FRAME", "MAX_HEADER_BYTES", "MAX_MESSAGE",
    "MAX_QUEUED_MESSAGES", "STREAM_WINDOW", "Connection", "ProtocolError", "RpcError", "StatusCode", "Stream",
    "client_ssl_context", "connect", "encode_headers", "frame", "grpc_message",
]  # fmt: skip

CONNECTION_WINDOW = 64 << 20
GIVE_BACK_STREAM = STREAM_WINDOW // 8  # outstanding < window, so a reader that keeps reading never stalls
GIVE_BACK_CONNECTION = CONNECTION_WINDOW // 8
MAX_FRAME = 16_384  # the largest frame we accept: the default, what every peer writes by (a larger one saved nothing)
MAX_HEADER_BYTES = 1 << 20
#: The largest gRPC message a stream accepts unless told otherwise: the gNMI decoder's limit
#: (``GnmiTuning.max_message_bytes``), so the channel never buffers what the decoder would drop.
MAX_MESSAGE = 64 << 20
#: PING and SETTINGS ACKs we hold while the transport's buffer is full (the peer does not read
#: ours); one more is GOAWAY ENHANCE_YOUR_CALM.
MAX_CONTROL_REPLIES = 1000
#: CONTINUATION frames in one header block, at most: a full block (MAX_HEADER_BYTES) is 64
#: frames of MAX_FRAME; empty ones would otherwise cost CPU forever.
MAX_CONTINUATIONS = 256
#: Read coalescing: after a read smaller than COALESCE_BELOW (or than half the socket's receive
#: buffer, if that is smaller) the socket is not read again for ``coalesce_s`` (default
#: COALESCE_S), so what the peer writes meanwhile arrives in one read. A gNMI server writes a
#: message at a time (~1.5 KB): read as it comes, every message cost a wake-up, a syscall and a
#: task switch of its own, the larger part of the collector's CPU. A few milliseconds late is
#: nothing to 10 s samples; a peer with more to send than a pause's worth fills the socket's
#: buffer and is read at once (a large read never pauses). Over TLS the socket is paused too
#: (:mod:`wire.tls_layer`, not asyncio's TLS, which goes on reading it), so TLS saves as much.
COALESCE_BELOW = 64 << 10
COALESCE_S = 0.02
_UNLIMITED = 1 << 32
#: What a connection ended by an exception of our own says (the fuzz tests look for it).
BUG = "a fault in fabricmon's HTTP/2 client"


class Connection(asyncio.Protocol):
    """One HTTP/2 connection carrying any number of gRPC streams."""

    def __init__(
        self, authority: str, *, tls: bool, keepalive_s: float, keepalive_timeout_s: float, coalesce_s: float = 0.0
    ) -> None:
        self.authority, self.scheme = authority, "https" if tls else "http"
        self._keepalive_s, self._keepalive_timeout_s = keepalive_s, keepalive_timeout_s
        self._coalesce_s = coalesce_s
        self._coalesce_below = COALESCE_BELOW
        #: Pending while reading is paused (read coalescing).
        self._resume_timer: asyncio.TimerHandle | None = None
        #: Socket reads.
        self.reads = 0
        self._transport: asyncio.Transport | None = None
        self._rest = bytearray()  # a frame's start, waiting for the rest of it
        self._rest_need = 0  # the bytes that frame needs (header and payload)
        self._streams: dict[int, Stream] = {}
        self._next_id = 1
        self._decoder = hpack.Decoder()
        self._decoder.max_allowed_table_size = 4096
        self._decoder.max_header_list_size = MAX_HEADER_BYTES
        self._header_block: tuple[int, int, bytearray] | None = None  # (stream, flags, fragments) until END_HEADERS
        self._continuations = 0  # CONTINUATION frames in the header block being read
        self.peer_initial_window = DEFAULT_WINDOW
        self.peer_max_streams = _UNLIMITED  # SETTINGS_MAX_CONCURRENT_STREAMS: no limit until the peer says one
        self._peer_max_frame = 16_384
        self._send_window = DEFAULT_WINDOW  # the connection-level window the peer gives us
        self._window_opened = asyncio.Event()
        self._recv_unacked = 0  # connection-level bytes received and not yet given back
        self._unreturned = 0  # of those, taken by readers and waiting to be returned in a lump
        self._closed: RpcError | None = None
        self._goaway_last: int | None = None
        self._control: deque[bytes] = deque()  # ACKs held while the transport's buffer is full
        self._ping_data: bytes | None = None  # our PING's opaque data, until its ACK
        self._keepalive: asyncio.Task[None] | None = None
        self._writable = asyncio.Event()  # cleared while the transport's buffer is full
        self._writable.set()
        self._read_at = time.monotonic()  # the current read's time
        self._progress_at = self._read_at  # the last stream progress (DATA, HEADERS) or answer to our PING
        #: The peer said GOAWAY ENHANCE_YOUR_CALM "too_many_pings".
        self.too_many_pings = False

    @property
    def usable(self) -> bool:
        """Whether new streams may be opened on it."""
        return self._closed is None and self._goaway_last is None and self._next_id < MAX_WINDOW

    @property
    def has_room(self) -> bool:
        """Whether the peer's SETTINGS_MAX_CONCURRENT_STREAMS allows one more stream."""
        return len(self._streams) < self.peer_max_streams

    @property
    def control_queued(self) -> int:
        """PING and SETTINGS ACKs waiting for the transport (at most :data:`MAX_CONTROL_REPLIES`)."""
        return len(self._control)

    @property
    def buffered(self) -> int:
        """Bytes held for a frame that has not arrived whole, and for a header block in progress."""
        return len(self._rest) + (len(self._header_block[2]) if self._header_block is not None else 0)

    @property
    def streams(self) -> list[Stream]:
        """The open streams."""
        return list(self._streams.values())

    # --- asyncio.Protocol --------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport
        sock = transport.get_extra_info("socket")
        if sock is not None:  # a small fixed receive buffer: a full one must not pause
            with contextlib.suppress(OSError):
                self._coalesce_below = min(COALESCE_BELOW, sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF) // 2)
        settings = struct.pack(">HIHIHIHI", S_ENABLE_PUSH, 0, S_INITIAL_WINDOW, STREAM_WINDOW, S_MAX_FRAME, MAX_FRAME,
                               S_MAX_HEADER_LIST, MAX_HEADER_BYTES)  # fmt: skip
        transport.write(
            PREFACE
            + frame(SETTINGS, 0, 0, settings)
            + frame(WINDOW_UPDATE, 0, 0, UINT32.pack(CONNECTION_WINDOW - DEFAULT_WINDOW))
        )
        if self._keepalive_s > 0:
            self._keepalive = asyncio.get_running_loop().create_task(self._pinger())

    def connection_lost(self, exc: Exception | None) -> None:
        why = f"socket closed ({exc})" if exc else "socket closed"
        if self._resume_timer is not None:
            self._resume_timer.cancel()
        self._close(RpcError(StatusCode.UNAVAILABLE, why))

    def pause_writing(self) -> None:
        self._writable.clear()

    def resume_writing(self) -> None:
        if self._control:
            data = b"".join(self._control)
            self._control.clear()
            self._write(data)
        self._writable.set()

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

    def _opened(self, sid: int) -> bool:
        """Whether ``sid`` is a stream we opened (it may have closed since): odd, below the next id."""
        return sid & 1 == 1 and sid < self._next_id

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

    def _on_priority(self, flags: int, sid: int, payload: memoryview) -> None:
        if sid == 0:
            raise ProtocolError("PRIORITY on stream 0")
        if len(payload) != 5 and (stream := self._streams.get(sid)) is not None:  # RFC 9113 §6.3: a stream error
            stream.abort(FRAME_SIZE_ERROR, StatusCode.INTERNAL, f"a PRIORITY frame of {len(payload)} bytes")

    def _on_settings_frame(self, flags: int, sid: int, payload: memoryview) -> None:
        if sid != 0:
            raise ProtocolError(f"SETTINGS on stream {sid}")
        if flags & ACK:
            if payload:
                raise ProtocolError("a SETTINGS ACK with a payload", FRAME_SIZE_ERROR)
            return
        self._on_settings(bytes(payload))

    def _on_ping(self, flags: int, sid: int, payload: memoryview) -> None:
        if sid != 0:
            raise ProtocolError(f"PING on stream {sid}")
        if len(payload) != 8:
            raise ProtocolError(f"a PING of {len(payload)} bytes (not 8)", FRAME_SIZE_ERROR)
        if not flags & ACK:
            self._control_reply(frame(PING, ACK, 0, bytes(payload)))
        elif self._ping_data is not None and payload == self._ping_data:  # ours; any other ACK proves nothing
            self._ping_data = None
            self._progress_at = self._read_at

    def _on_window_update(self, flags: int, sid: int, payload: memoryview) -> None:
        if len(payload) != 4:
            raise ProtocolError(f"a WINDOW_UPDATE of {len(payload)} bytes", FRAME_SIZE_ERROR)
        increment = UINT32.unpack_from(payload, 0)[0] & MAX_WINDOW
        if sid == 0:
            if increment == 0:
                raise ProtocolError("a WINDOW_UPDATE of 0 for the connection")
            self._send_window += increment
            if self._send_window > MAX_WINDOW:
                raise ProtocolError("the connection's send window past 2^31-1", FLOW_CONTROL_ERROR)
        elif (stream := self._streams.get(sid)) is not None:
            stream.send_window += increment
            if increment == 0:
                stream.abort(PROTOCOL_ERROR, StatusCode.INTERNAL, "a WINDOW_UPDATE of 0 for the stream")
            elif stream.send_window > MAX_WINDOW:
                stream.abort(FLOW_CONTROL_ERROR, StatusCode.INTERNAL, "the stream's send window past 2^31-1")
        elif not self._opened(sid):
            raise ProtocolError(f"WINDOW_UPDATE on stream {sid}, which we never opened")
        self._window_opened.set()

    def _on_rst_stream(self, flags: int, sid: int, payload: memoryview) -> None:
        if sid == 0:
            raise ProtocolError("RST_STREAM on stream 0")
        if len(payload) != 4:
            raise ProtocolError(f"a RST_STREAM of {len(payload)} bytes", FRAME_SIZE_ERROR)
        code = UINT32.unpack_from(payload, 0)[0]
        if (stream := self._streams.get(sid)) is not None:
            stream.peer_reset = True
            why = f"stream reset by the peer ({error_name(code)})"
            stream.fail(RpcError(RST_STATUS.get(code, StatusCode.INTERNAL), why))
        elif not self._opened(sid):
            raise ProtocolError(f"RST_STREAM on stream {sid}, which we never opened")

    def _on_goaway(self, flags: int, sid: int, payload: memoryview) -> None:
        if sid != 0:
            raise ProtocolError(f"GOAWAY on stream {sid}")
        if len(payload) < 8:
            raise ProtocolError(f"a GOAWAY of {len(payload)} bytes", FRAME_SIZE_ERROR)
        last, code = struct.unpack_from(">II", payload, 0)
        last &= MAX_WINDOW
        self._goaway_last = last if self._goaway_last is None else min(last, self._goaway_last)
        debug = bytes(payload[8:264]).decode("utf-8", "replace")
        if code == ENHANCE_YOUR_CALM and "too_many_pings" in debug:
            self.too_many_pings = True  # the next connection pings half as often (as C-core does)
        why = f"the peer is going away ({error_name(code)}{': ' + debug if debug else ''})"
        for stream in [s for i, s in self._streams.items() if i > self._goaway_last]:
            stream.fail(RpcError(StatusCode.UNAVAILABLE, why))
        if not self._streams:
            self.abort(NO_ERROR, why)

    def _on_push_promise(self, flags: int, sid: int, payload: memoryview) -> None:
        raise ProtocolError("PUSH_PROMISE after we turned push off")

    def _on_settings(self, payload: bytes) -> None:
        if len(payload) % 6:
            raise ProtocolError(f"a SETTINGS frame of {len(payload)} bytes (not a multiple of 6)", FRAME_SIZE_ERROR)
        for off in range(0, len(payload), 6):
            key, value = struct.unpack_from(">HI", payload, off)
            if key == S_INITIAL_WINDOW:
                if value > MAX_WINDOW:
                    raise ProtocolError("SETTINGS_INITIAL_WINDOW_SIZE above 2^31-1", FLOW_CONTROL_ERROR)
                delta, self.peer_initial_window = value - self.peer_initial_window, value
                for stream in self._streams.values():
                    stream.send_window += delta
                    if stream.send_window > MAX_WINDOW:  # RFC 9113 §6.9.2
                        why = f"SETTINGS_INITIAL_WINDOW_SIZE {value} takes stream {stream.id}'s window past 2^31-1"
                        raise ProtocolError(why, FLOW_CONTROL_ERROR)
                self._window_opened.set()
            elif key == S_MAX_FRAME:
                if not 16_384 <= value <= 16_777_215:
                    raise ProtocolError(f"SETTINGS_MAX_FRAME_SIZE {value} outside 2^14..2^24-1")
                self._peer_max_frame = value
            elif key == S_MAX_CONCURRENT:
                self.peer_max_streams = value
            elif key == S_ENABLE_PUSH and value > 1:
                raise ProtocolError(f"SETTINGS_ENABLE_PUSH {value}")
        self._control_reply(frame(SETTINGS, ACK, 0))

    def _control_reply(self, data: bytes) -> None:
        """A PING or SETTINGS ACK: written now, or held (boundedly) while the peer does not read ours."""
        if self._writable.is_set():
            self._write(data)
            return
        if len(self._control) >= MAX_CONTROL_REPLIES:
            why = f"more than {MAX_CONTROL_REPLIES} PING/SETTINGS replies waiting: the peer sends and does not read"
            raise ProtocolError(why, ENHANCE_YOUR_CALM)
        self._control.append(data)

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

    # --- what streams ask of their connection ------------------------------------------------

    def open(
        self,
        path: str,
        metadata: Sequence[tuple[str, str]],
        max_message: int = MAX_MESSAGE,
        *,
        skip_oversize: bool = False,
    ) -> Stream:
        """A new stream: its HEADERS are sent now (no END_STREAM: the request side stays open).

        A message above ``max_message`` fails it, or is skipped (:class:`Stream`). Beyond the
        peer's SETTINGS_MAX_CONCURRENT_STREAMS it fails with UNAVAILABLE (see :attr:`has_room`).
        """
        if self._closed is not None:
            raise self._closed
        if not self.has_room:
            why = f"the peer allows {self.peer_max_streams} concurrent streams (SETTINGS_MAX_CONCURRENT_STREAMS)"
            raise RpcError(StatusCode.UNAVAILABLE, f"{why}, and {len(self._streams)} are open")
        sid, self._next_id = self._next_id, self._next_id + 2
        stream = self._streams[sid] = Stream(self, sid, max_message, skip_oversize=skip_oversize)
        headers = [
            (":method", "POST"), (":scheme", self.scheme), (":path", path), (":authority", self.authority),
            ("content-type", "application/grpc"), ("te", "trailers"), ("user-agent", "fabricmon-grpc-h2/1"),
            *metadata,
        ]  # fmt: skip
        block = encode_headers(headers)
        limit = self._peer_max_frame
        first, rest = block[:limit], block[limit:]
        out = [frame(HEADERS, END_HEADERS if not rest else 0, sid, first)]
        while rest:
            chunk, rest = rest[:limit], rest[limit:]
            out.append(frame(CONTINUATION, END_HEADERS if not rest else 0, sid, chunk))
        self._write(b"".join(out))
        return stream

    async def send_data(self, stream: Stream, data: bytes) -> None:
        while data:
            if self._closed is not None:
                raise self._closed
            if stream._error is not None:
                raise stream._error
            room = min(self._send_window, stream.send_window, self._peer_max_frame)
            if room <= 0:
                self._window_opened.clear()
                await self._window_opened.wait()
                continue
            chunk, data = data[:room], data[room:]
            self._send_window -= len(chunk)
            stream.send_window -= len(chunk)
            self._write(frame(DATA, 0, stream.id, chunk))
            if not self._writable.is_set():
                await self._writable.wait()

    def give_back(self, stream: Stream | None, n: int) -> None:
        """Return ``n`` bytes of window once a reader took them (sent in lumps: a WINDOW_UPDATE costs a syscall)."""
        out = b""
        if stream is not None:
            stream.unreturned += n
            if stream.unreturned >= GIVE_BACK_STREAM and self._streams.get(stream.id) is stream:
                out = frame(WINDOW_UPDATE, 0, stream.id, UINT32.pack(stream.unreturned))
                stream.recv_used -= stream.unreturned
                stream.unreturned = 0
        self._unreturned += n
        if self._unreturned >= GIVE_BACK_CONNECTION:
            out += frame(WINDOW_UPDATE, 0, 0, UINT32.pack(self._unreturned))
            self._recv_unacked -= self._unreturned
            self._unreturned = 0
        if out:
            self._write(out)

    def reset(self, sid: int, code: int) -> None:
        self._write(frame(RST_STREAM, 0, sid, UINT32.pack(code)))

    def wake_writers(self) -> None:
        """Let writers waiting for window look again (their stream may have ended)."""
        self._window_opened.set()

    def forget(self, sid: int) -> None:
        self._streams.pop(sid, None)
        if not self._streams and self._goaway_last is not None:
            self.abort(NO_ERROR, "drained after GOAWAY")

    def abort(self, code: int, why: str, *, hard: bool = False) -> None:
        """Send GOAWAY ``code`` and close; every open stream fails (INTERNAL when the peer broke
        HTTP/2, else UNAVAILABLE). ``hard``: drop the socket at once (a dead or broken peer)."""
        if self._transport is not None and not self._transport.is_closing():
            self._write(frame(GOAWAY, 0, 0, struct.pack(">II", 0, code)))  # we accept no streams of the peer's
            if hard:
                self._transport.abort()
            else:
                self._transport.close()
        if code == NO_ERROR:
            self._close(RpcError(StatusCode.UNAVAILABLE, why))
        else:
            self._close(RpcError(StatusCode.INTERNAL, f"{why} ({error_name(code)})"))

    def close(self) -> None:
        """Close the connection (open streams fail with UNAVAILABLE)."""
        self.abort(NO_ERROR, "connection closed by the client")

    def _close(self, error: RpcError) -> None:
        if self._closed is None:
            self._closed = error
        if self._keepalive is not None:
            self._keepalive.cancel()
            self._keepalive = None
        for stream in list(self._streams.values()):
            stream.fail(error)
        self._streams.clear()
        self._control.clear()
        self._rest = bytearray()
        self._header_block = None
        self._window_opened.set()
        self._writable.set()

    def _write(self, data: bytes) -> None:
        if self._transport is not None and not self._transport.is_closing():
            self._transport.write(data)

    async def _pinger(self) -> None:
        """A PING after ``keepalive_s`` without a stream's progress; no ACK of its own bytes within the timeout ends it.

        Only our PING's ACK, or DATA and HEADERS on an open stream, show the peer alive: any
        other frame (an unsolicited PING ACK, SETTINGS, a frame of an unknown type) does not.
        """
        while True:
            quiet = time.monotonic() - self._progress_at
            if quiet < self._keepalive_s:
                await asyncio.sleep(self._keepalive_s - quiet)
                continue
            if not self._streams:  # no pings without calls (gRPC servers count those as abuse)
                await asyncio.sleep(self._keepalive_s)
                continue
            data = self._ping_data = os.urandom(8)
            self._write(frame(PING, 0, 0, data))
            await asyncio.sleep(self._keepalive_timeout_s)
            if self._ping_data is data:
                self.abort(NO_ERROR, f"keepalive ping not answered within {self._keepalive_timeout_s:g} s", hard=True)
                return


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

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
* TLS with ALPN ``h2`` (an :class:`ssl.SSLContext` from the caller).

Errors are :class:`RpcError` with a ``grpc.StatusCode``, so callers classify them as they
classify grpc.aio's.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import ssl
import struct
import time
import urllib.parse
from collections import deque
from collections.abc import Callable, Sequence
from typing import cast

import grpc
import hpack  # type: ignore[import-untyped, unused-ignore]

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
DATA, HEADERS, PRIORITY, RST_STREAM, SETTINGS, PUSH_PROMISE, PING, GOAWAY, WINDOW_UPDATE, CONTINUATION = range(10)
END_STREAM, ACK, END_HEADERS, PADDED, PRIORITY_FLAG = 0x1, 0x1, 0x4, 0x8, 0x20
S_HEADER_TABLE_SIZE, S_ENABLE_PUSH, S_MAX_CONCURRENT, S_INITIAL_WINDOW, S_MAX_FRAME, S_MAX_HEADER_LIST = range(1, 7)
DEFAULT_WINDOW = 65_535
MAX_WINDOW = (1 << 31) - 1
STREAM_WINDOW = 16 << 20  # what we let a peer send on one stream before the reader takes it
CONNECTION_WINDOW = 64 << 20
GIVE_BACK_STREAM = STREAM_WINDOW // 8  # outstanding < window, so a reader that keeps reading never stalls
GIVE_BACK_CONNECTION = CONNECTION_WINDOW // 8
MAX_FRAME = 16_384  # the largest frame we accept: the default, what every peer writes by (a larger one saved nothing)
MAX_HEADER_BYTES = 1 << 20
#: Read coalescing: after a read smaller than COALESCE_BELOW (or than half the socket's receive
#: buffer, if that is smaller) the socket is not read again for ``coalesce_s`` (default
#: COALESCE_S), so what the peer writes meanwhile arrives in one read. A gNMI server writes a
#: message at a time (~1.5 KB): read as it comes, every message cost a wake-up, a syscall and a
#: task switch of its own, the larger part of the collector's CPU. A few milliseconds late is
#: nothing to 10 s samples; a peer with more to send than a pause's worth fills the socket's
#: buffer and is read at once (a large read never pauses). Over TLS, asyncio's SSL layer goes on
#: reading the socket while the protocol is paused, so only the protocol's side is saved there.
COALESCE_BELOW = 64 << 10
COALESCE_S = 0.02
_HDR = struct.Struct(">I")

# gRPC's PROTOCOL-HTTP2.md / http-grpc-status-mapping.md
_HTTP_STATUS = {
    400: grpc.StatusCode.INTERNAL,
    401: grpc.StatusCode.UNAUTHENTICATED,
    403: grpc.StatusCode.PERMISSION_DENIED,
    404: grpc.StatusCode.UNIMPLEMENTED,
    429: grpc.StatusCode.UNAVAILABLE,
    502: grpc.StatusCode.UNAVAILABLE,
    503: grpc.StatusCode.UNAVAILABLE,
    504: grpc.StatusCode.UNAVAILABLE,
}
_RST_CODE = {
    0x7: grpc.StatusCode.UNAVAILABLE,
    0x8: grpc.StatusCode.CANCELLED,
    0xB: grpc.StatusCode.RESOURCE_EXHAUSTED,
    0xC: grpc.StatusCode.PERMISSION_DENIED,
}
_RST_NAME = {
    0x0: "NO_ERROR", 0x1: "PROTOCOL_ERROR", 0x2: "INTERNAL_ERROR", 0x3: "FLOW_CONTROL_ERROR",
    0x5: "STREAM_CLOSED", 0x6: "FRAME_SIZE_ERROR", 0x7: "REFUSED_STREAM", 0x8: "CANCEL",
    0x9: "COMPRESSION_ERROR", 0xB: "ENHANCE_YOUR_CALM", 0xC: "INADEQUATE_SECURITY",
}  # fmt: skip
_CODES = {c.value[0]: c for c in grpc.StatusCode}


class RpcError(Exception):
    """A call that ended without OK: ``code()`` and ``details()`` as grpc.aio's errors have them."""

    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        super().__init__(f"{code.name}: {details}")
        self._code, self._details = code, details

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return self._details


class ProtocolError(Exception):
    """The peer broke HTTP/2: the connection ends (every stream INTERNAL) with GOAWAY ``code``."""

    def __init__(self, why: str, code: int = 0x1) -> None:  # PROTOCOL_ERROR; 0x3 FLOW_CONTROL_ERROR
        super().__init__(why)
        self.code = code


def _hpack_int(value: int, prefix_bits: int, first: int) -> bytes:
    limit = (1 << prefix_bits) - 1
    if value < limit:
        return bytes((first | value,))
    out = bytearray((first | limit,))
    value -= limit
    while value >= 128:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def encode_headers(headers: Sequence[tuple[str, str]]) -> bytes:
    """HPACK literals never indexed (no dynamic-table state to keep in step with the peer)."""
    out = bytearray()
    for name, value in headers:
        n, v = name.encode("ascii"), value.encode("utf-8")
        out += b"\x10" + _hpack_int(len(n), 7, 0) + n + _hpack_int(len(v), 7, 0) + v
    return bytes(out)


def frame(kind: int, flags: int, stream_id: int, payload: bytes = b"") -> bytes:
    """One HTTP/2 frame."""
    n = len(payload)
    return bytes((n >> 16, (n >> 8) & 0xFF, n & 0xFF, kind, flags)) + _HDR.pack(stream_id & MAX_WINDOW) + payload


def grpc_message(payload: bytes) -> bytes:
    """gRPC's length-prefixed message (uncompressed)."""
    return b"\x00" + _HDR.pack(len(payload)) + payload


class Stream:
    """One call: write messages, read them in batches, cancel. Not created directly (:meth:`Connection.open`)."""

    __slots__ = (
        "_buffer", "_closed_local", "_conn", "_ended", "_error", "_messages", "_need", "_pending_bytes", "_waiter",
        "headers", "id", "max_message", "peer_reset", "send_window", "taken", "unreturned",
    )  # fmt: skip

    def __init__(self, conn: Connection, stream_id: int, max_message: int) -> None:
        self._conn, self.id, self.max_message = conn, stream_id, max_message
        self.headers: dict[str, str] | None = None
        self._buffer = bytearray()  # a message split across DATA frames
        self._need = -1  # bytes the message in _buffer still needs (-1: reading a prefix)
        self._messages: deque[bytes] = deque()
        self._pending_bytes = 0  # flow-control bytes received but not yet given back
        self._ended = False  # the peer's half is closed (trailers or END_STREAM seen)
        self._error: RpcError | None = None
        self._waiter: asyncio.Future[None] | None = None
        self.send_window = conn.peer_initial_window
        self.taken = 0
        self.unreturned = 0  # taken by the reader, not yet returned to the peer
        self._closed_local = False  # we sent RST_STREAM (our half never ends otherwise: requests stay open)
        self.peer_reset = False  # the peer reset it (and must not get a RST_STREAM back)

    async def write(self, message: bytes) -> None:
        """Send one message (waits for the peer's flow-control window)."""
        if self._error is not None:
            raise self._error
        await self._conn.send_data(self, grpc_message(message))

    async def read_batch(self) -> list[bytes]:
        """Every message that has arrived (waiting for at least one); ``[]`` at a clean end (OK)."""
        while not self._messages:
            if self._error is not None:
                raise self._error
            if self._ended:
                return []
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        batch = list(self._messages)
        self._messages.clear()
        self.taken += len(batch)
        if self._pending_bytes:
            self._conn.give_back(self, self._pending_bytes)
            self._pending_bytes = 0
        return batch

    def cancel(self) -> None:
        """End the call from our side: RST_STREAM, CANCEL while the peer's half is open, else NO_ERROR."""
        self.reset(0x8 if not self._ended and self._error is None else 0x0)
        self.fail(RpcError(grpc.StatusCode.CANCELLED, "cancelled by the client"))
        self._messages.clear()
        if self._pending_bytes:  # what nobody will read still counts against the connection's window
            self._conn.give_back(self, self._pending_bytes)
            self._pending_bytes = 0

    # --- called by the connection -----------------------------------------------------------

    def _wake(self) -> None:
        w = self._waiter
        if w is not None and not w.done():
            w.set_result(None)

    def reset(self, code: int) -> None:
        """Send RST_STREAM once, unless the peer reset the stream itself."""
        if not self._closed_local and not self.peer_reset:
            self._conn.reset(self.id, code)
        self._closed_local = True

    def fail(self, error: RpcError) -> None:
        if self._error is None and not self._ended:
            self._error = error
        self._conn.forget(self.id)
        self._conn.wake_writers()  # a write waiting for this stream's window must see the end
        self._wake()

    def finish(self, trailers: dict[str, str]) -> None:
        """The peer's trailers (or a Trailers-Only answer): OK ends cleanly, anything else fails."""
        status = trailers.get("grpc-status")
        if status is None:
            self.fail(RpcError(grpc.StatusCode.INTERNAL, "the stream ended without a grpc-status"))
            return
        code = _CODES.get(int(status) if status.isdigit() else -1, grpc.StatusCode.UNKNOWN)
        if code is not grpc.StatusCode.OK:
            message = urllib.parse.unquote(trailers.get("grpc-message", ""))
            self.fail(RpcError(code, message))
            return
        if self._need != -1 or self._buffer:
            self.fail(RpcError(grpc.StatusCode.INTERNAL, "the stream ended inside a message"))
            return
        self._ended = True
        self._conn.forget(self.id)
        self._wake()

    def data(self, payload: memoryview, flow: int) -> None:
        """A DATA frame's payload (padding already stripped; ``flow`` is what it cost the window)."""
        self._pending_bytes += flow
        if self._error is not None:
            self._conn.give_back(self, self._pending_bytes)
            self._pending_bytes = 0
            return
        buf, pos, end = self._buffer, 0, len(payload)
        got = False
        while pos < end:
            if self._need < 0:  # collecting a 5-byte prefix (possibly split)
                take = min(5 - len(buf), end - pos)
                buf += payload[pos : pos + take]
                pos += take
                if len(buf) < 5:
                    break
                if buf[0] != 0:
                    self._protocol_fail("a compressed message, but we asked for none")
                    return
                self._need = _HDR.unpack_from(buf, 1)[0]
                if self._need > self.max_message:
                    self.reset(0x8)
                    self.fail(
                        RpcError(
                            grpc.StatusCode.RESOURCE_EXHAUSTED,
                            f"received message larger than max ({self._need} vs. {self.max_message})",
                        )
                    )
                    return
                buf.clear()
                if self._need == 0:
                    self._messages.append(b"")
                    self._need, got = -1, True
                continue
            if not buf and end - pos >= self._need:  # the whole message in this frame: one copy
                self._messages.append(bytes(payload[pos : pos + self._need]))
                pos += self._need
                self._need, got = -1, True
                continue
            take = min(self._need - len(buf), end - pos)
            buf += payload[pos : pos + take]
            pos += take
            if len(buf) == self._need:
                self._messages.append(bytes(buf))
                buf.clear()
                self._need, got = -1, True
        if got:
            self._wake()
        elif self._need >= 0 and not self._messages and self._pending_bytes:
            # A message larger than the window would never complete (and no reader would ever
            # take anything to give window back): its bytes so far are returned now; what this
            # keeps in memory is bounded by max_message.
            self._conn.give_back(self, self._pending_bytes)
            self._pending_bytes = 0

    def _protocol_fail(self, why: str) -> None:
        self.reset(0x1)
        self.fail(RpcError(grpc.StatusCode.INTERNAL, why))


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
        self._rest = b""  # a frame's start, waiting for the rest of it
        self._streams: dict[int, Stream] = {}
        self._next_id = 1
        self._decoder = hpack.Decoder()
        self._decoder.max_allowed_table_size = 4096
        self._decoder.max_header_list_size = MAX_HEADER_BYTES
        self._header_block: tuple[int, int, bytearray] | None = None  # (stream, flags, fragments) until END_HEADERS
        self.peer_initial_window = DEFAULT_WINDOW
        self._peer_max_frame = 16_384
        self._send_window = DEFAULT_WINDOW  # the connection-level window the peer gives us
        self._window_opened = asyncio.Event()
        self._recv_unacked = 0  # connection-level bytes received and not yet given back
        self._unreturned = 0  # of those, taken by readers and waiting to be returned in a lump
        self._closed: RpcError | None = None
        self._goaway_last: int | None = None
        self._ping_sent: float | None = None
        self._keepalive: asyncio.Task[None] | None = None
        self._writable = asyncio.Event()  # cleared while the transport's buffer is full
        self._writable.set()
        self._last_received = time.monotonic()
        #: The peer said GOAWAY ENHANCE_YOUR_CALM "too_many_pings".
        self.too_many_pings = False

    @property
    def usable(self) -> bool:
        """Whether new streams may be opened on it."""
        return self._closed is None and self._goaway_last is None and self._next_id < MAX_WINDOW

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
            + frame(WINDOW_UPDATE, 0, 0, _HDR.pack(CONNECTION_WINDOW - DEFAULT_WINDOW))
        )
        if self._keepalive_s > 0:
            self._keepalive = asyncio.get_running_loop().create_task(self._pinger())

    def connection_lost(self, exc: Exception | None) -> None:
        why = f"socket closed ({exc})" if exc else "socket closed"
        if self._resume_timer is not None:
            self._resume_timer.cancel()
        self._close(RpcError(grpc.StatusCode.UNAVAILABLE, why))

    def pause_writing(self) -> None:
        self._writable.clear()

    def resume_writing(self) -> None:
        self._writable.set()

    def data_received(self, data: bytes) -> None:
        self._last_received = time.monotonic()
        self.reads += 1
        if self._coalesce_s > 0 and len(data) < self._coalesce_below and self._resume_timer is None:
            self._pause_reading()
        if self._rest:
            data, self._rest = self._rest + data, b""
        view = memoryview(data)  # of immutable bytes: payload slices may outlive this call
        pos, end = 0, len(view)
        try:
            while end - pos >= 9:
                length = (view[pos] << 16) | (view[pos + 1] << 8) | view[pos + 2]
                if length > MAX_FRAME:
                    raise ProtocolError(f"a {length}-byte frame, above our SETTINGS_MAX_FRAME_SIZE")
                if pos + 9 + length > end:
                    break
                kind, flags = view[pos + 3], view[pos + 4]
                sid = _HDR.unpack_from(view, pos + 5)[0] & MAX_WINDOW
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
        except (struct.error, IndexError, ValueError) as exc:  # a frame shorter than its type needs
            self.abort(0x1, f"a malformed frame ({exc})", hard=True)
            return
        if pos < end:
            self._rest = data[pos:]

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
            raise ProtocolError("the peer overran the connection window", 0x3)
        if flags & PADDED:
            pad = payload[0] if length else 0
            if pad >= length:
                raise ProtocolError("padding longer than the frame")
            payload = payload[1 : length - pad]
        stream = self._streams.get(sid)
        if stream is None:  # a stream we have reset or finished: just give the window back
            self.give_back(None, length)
            return
        stream.data(payload, length)
        if flags & END_STREAM:
            stream.fail(RpcError(grpc.StatusCode.INTERNAL, "the stream ended without trailers"))

    def _on_frame(self, kind: int, flags: int, sid: int, payload: memoryview) -> None:
        handler = _HANDLERS.get(kind)
        if handler is not None:  # PRIORITY and unknown frame types are ignored, as RFC 9113 says
            handler(self, flags, sid, payload)

    def _on_headers(self, flags: int, sid: int, payload: memoryview) -> None:
        if flags & PADDED:
            pad = payload[0]
            if pad >= len(payload):
                raise ProtocolError("HEADERS padding longer than the frame")
            payload = payload[1 : len(payload) - pad]
        if flags & PRIORITY_FLAG:
            payload = payload[5:]
        self._header_block = (sid, flags, bytearray(payload))
        if flags & END_HEADERS:
            self._headers_done()

    def _on_continuation(self, flags: int, sid: int, payload: memoryview) -> None:
        if self._header_block is None or self._header_block[0] != sid:
            raise ProtocolError("CONTINUATION without HEADERS")
        block = self._header_block[2]
        block += payload
        if len(block) > MAX_HEADER_BYTES:
            raise ProtocolError("a header block above our limit")
        if flags & END_HEADERS:
            self._headers_done()

    def _on_settings_frame(self, flags: int, sid: int, payload: memoryview) -> None:
        if not flags & ACK:
            self._on_settings(bytes(payload))

    def _on_ping(self, flags: int, sid: int, payload: memoryview) -> None:
        if not flags & ACK:
            self._write(frame(PING, ACK, 0, bytes(payload)))
        else:
            self._ping_sent = None

    def _on_window_update(self, flags: int, sid: int, payload: memoryview) -> None:
        increment = _HDR.unpack_from(payload, 0)[0] & MAX_WINDOW
        if sid == 0:
            if increment == 0:
                raise ProtocolError("a WINDOW_UPDATE of 0 for the connection")
            self._send_window += increment
            if self._send_window > MAX_WINDOW:
                raise ProtocolError("the connection's send window past 2^31-1", 0x3)
        elif (stream := self._streams.get(sid)) is not None:
            stream.send_window += increment
            if increment == 0 or stream.send_window > MAX_WINDOW:
                stream.reset(0x1 if increment == 0 else 0x3)
                stream.fail(RpcError(grpc.StatusCode.INTERNAL, "a bad WINDOW_UPDATE for the stream"))
        self._window_opened.set()

    def _on_rst_stream(self, flags: int, sid: int, payload: memoryview) -> None:
        code = _HDR.unpack_from(payload, 0)[0]
        if (stream := self._streams.get(sid)) is not None:
            stream.peer_reset = True
            why = f"stream reset by the peer ({_RST_NAME.get(code, f'error {code}')})"
            stream.fail(RpcError(_RST_CODE.get(code, grpc.StatusCode.INTERNAL), why))

    def _on_goaway(self, flags: int, sid: int, payload: memoryview) -> None:
        last, code = struct.unpack_from(">II", payload, 0)
        last &= MAX_WINDOW
        self._goaway_last = last
        debug = bytes(payload[8:]).decode("utf-8", "replace")
        if code == 0xB and "too_many_pings" in debug:
            self.too_many_pings = True  # the next connection pings half as often (as C-core does)
        why = f"the peer is going away ({_RST_NAME.get(code, code)}{': ' + debug if debug else ''})"
        for stream in [s for i, s in self._streams.items() if i > last]:
            stream.fail(RpcError(grpc.StatusCode.UNAVAILABLE, why))
        if not self._streams:
            self.abort(0x0, why)

    def _on_push_promise(self, flags: int, sid: int, payload: memoryview) -> None:
        raise ProtocolError("PUSH_PROMISE after we turned push off")

    def _on_settings(self, payload: bytes) -> None:
        if len(payload) % 6:
            raise ProtocolError("a SETTINGS frame of the wrong size")
        for off in range(0, len(payload), 6):
            key, value = struct.unpack_from(">HI", payload, off)
            if key == S_INITIAL_WINDOW:
                if value > MAX_WINDOW:
                    raise ProtocolError("SETTINGS_INITIAL_WINDOW_SIZE above 2^31-1")
                delta, self.peer_initial_window = value - self.peer_initial_window, value
                for stream in self._streams.values():
                    stream.send_window += delta
                self._window_opened.set()
            elif key == S_MAX_FRAME:
                if not 16_384 <= value <= 16_777_215:
                    raise ProtocolError(f"SETTINGS_MAX_FRAME_SIZE {value} outside 2^14..2^24-1")
                self._peer_max_frame = value
        self._write(frame(SETTINGS, ACK, 0))

    def _headers_done(self) -> None:
        assert self._header_block is not None
        sid, flags, block = self._header_block
        self._header_block = None
        try:
            headers = dict(cast(list[tuple[str, str]], self._decoder.decode(bytes(block), raw=False)))
        except Exception as exc:  # hpack's errors (HPACKError, OversizedHeaderListError, ...)
            raise ProtocolError(f"undecodable headers: {exc}") from exc
        stream = self._streams.get(sid)
        if stream is None:
            return
        if stream.headers is None:
            stream.headers = headers
            status = headers.get(":status", "")
            if status != "200":
                code = _HTTP_STATUS.get(int(status) if status.isdigit() else 0, grpc.StatusCode.UNKNOWN)
                stream.reset(0x8)
                stream.fail(RpcError(code, f"HTTP status {status or 'missing'}"))
                return
            if not headers.get("content-type", "").startswith("application/grpc"):
                stream.reset(0x8)
                why = f"not gRPC (content-type {headers.get('content-type')!r})"
                stream.fail(RpcError(grpc.StatusCode.UNKNOWN, why))
                return
            if flags & END_STREAM:  # Trailers-Only
                stream.finish(headers)
            return
        stream.finish(headers)  # trailers

    # --- what streams ask of their connection ------------------------------------------------

    def open(self, path: str, metadata: Sequence[tuple[str, str]], max_message: int) -> Stream:
        """A new stream: its HEADERS are sent now (no END_STREAM: the request side stays open)."""
        if self._closed is not None:
            raise self._closed
        sid, self._next_id = self._next_id, self._next_id + 2
        stream = self._streams[sid] = Stream(self, sid, max_message)
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
                out = frame(WINDOW_UPDATE, 0, stream.id, _HDR.pack(stream.unreturned))
                stream.unreturned = 0
        self._unreturned += n
        if self._unreturned >= GIVE_BACK_CONNECTION:
            out += frame(WINDOW_UPDATE, 0, 0, _HDR.pack(self._unreturned))
            self._recv_unacked -= self._unreturned
            self._unreturned = 0
        if out:
            self._write(out)

    def reset(self, sid: int, code: int) -> None:
        self._write(frame(RST_STREAM, 0, sid, _HDR.pack(code)))

    def wake_writers(self) -> None:
        """Let writers waiting for window look again (their stream may have ended)."""
        self._window_opened.set()

    def forget(self, sid: int) -> None:
        self._streams.pop(sid, None)
        if not self._streams and self._goaway_last is not None:
            self.abort(0x0, "drained after GOAWAY")

    def abort(self, code: int, why: str, *, hard: bool = False) -> None:
        """Send GOAWAY and close; every open stream fails. ``hard``: drop the socket at once (a dead or broken peer)."""
        if self._transport is not None and not self._transport.is_closing():
            self._write(frame(GOAWAY, 0, 0, struct.pack(">II", 0, code)))  # we accept no streams of the peer's
            if hard:
                self._transport.abort()
            else:
                self._transport.close()
        status = grpc.StatusCode.INTERNAL if code in (0x1, 0x3) else grpc.StatusCode.UNAVAILABLE
        self._close(RpcError(status, why))

    def close(self) -> None:
        """Close the connection (open streams fail with UNAVAILABLE)."""
        self.abort(0x0, "connection closed by the client")

    def _close(self, error: RpcError) -> None:
        if self._closed is None:
            self._closed = error
        if self._keepalive is not None:
            self._keepalive.cancel()
            self._keepalive = None
        for stream in list(self._streams.values()):
            stream.fail(error)
        self._streams.clear()
        self._window_opened.set()
        self._writable.set()

    def _write(self, data: bytes) -> None:
        if self._transport is not None and not self._transport.is_closing():
            self._transport.write(data)

    async def _pinger(self) -> None:
        """A PING after ``keepalive_s`` without a byte from the peer; no ACK within the timeout ends it."""
        while True:
            quiet = time.monotonic() - self._last_received
            if quiet < self._keepalive_s:
                await asyncio.sleep(self._keepalive_s - quiet)
                continue
            if not self._streams:  # no pings without calls (gRPC servers count those as abuse)
                await asyncio.sleep(self._keepalive_s)
                continue
            self._ping_sent = time.monotonic()
            self._write(frame(PING, 0, 0, b"fabricmn"))
            await asyncio.sleep(self._keepalive_timeout_s)
            if self._ping_sent is not None:
                self.abort(0x0, f"keepalive ping not answered within {self._keepalive_timeout_s:g} s", hard=True)
                return


#: What each frame type (but DATA, handled inline) does; PRIORITY and unknown types are ignored.
_HANDLERS: dict[int, Callable[[Connection, int, int, memoryview], None]] = {
    HEADERS: Connection._on_headers,
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
) -> Connection:
    """A connected :class:`Connection` (TLS with ALPN ``h2`` when ``ssl_context`` is given);
    ``coalesce_s``: see :data:`COALESCE_S` (0: every read as it comes)."""
    authority = f"{server_name or host}:{port}" if ":" not in host else f"[{host}]:{port}"
    loop = asyncio.get_running_loop()

    def protocol() -> Connection:
        return Connection(authority, tls=ssl_context is not None, keepalive_s=keepalive_s,
                          keepalive_timeout_s=keepalive_timeout_s, coalesce_s=coalesce_s)  # fmt: skip

    try:
        if ssl_context is None:
            _, conn = await loop.create_connection(protocol, host, port)
        else:
            transport, conn = await loop.create_connection(
                protocol, host, port, ssl=ssl_context, server_hostname=server_name or host
            )
            if transport.get_extra_info("ssl_object").selected_alpn_protocol() != "h2":
                transport.close()
                raise RpcError(grpc.StatusCode.UNAVAILABLE, "TLS handshake: the server refused HTTP/2 (ALPN h2)")
    except ssl.SSLError as exc:
        raise RpcError(grpc.StatusCode.UNAVAILABLE, f"TLS handshake failed: {exc}") from exc
    except OSError as exc:
        reason = os.strerror(exc.errno) if exc.errno and not isinstance(exc, socket.gaierror) else str(exc)
        why = f"failed to connect to {host}:{port}: {reason}"
        raise RpcError(grpc.StatusCode.UNAVAILABLE, why) from exc
    return conn


def client_ssl_context(ca_file: str | None, cert_file: str | None, key_file: str | None) -> ssl.SSLContext:
    """A client TLS context for gRPC: ALPN h2, TLS 1.2+, the CA given (else the system's), an optional client cert."""
    ctx = ssl.create_default_context(cafile=ca_file)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.verify_flags &= ~ssl.VERIFY_X509_STRICT  # as strict as grpc's own TLS, no more (Python 3.13 sets it)
    ctx.set_alpn_protocols(["h2"])
    if cert_file:
        ctx.load_cert_chain(cert_file, key_file or None, password=_no_passphrase)
    return ctx


def _no_passphrase() -> str:
    # without this, OpenSSL would ask for an encrypted key's passphrase on the terminal, blocking the loop
    raise ValueError("the private key is encrypted; fabricmon needs an unencrypted key file")

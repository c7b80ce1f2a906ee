"""The connection half of :mod:`wire.grpc_h2`: its state, its control frames, what it sends, how it ends.

:class:`ConnectionCore` holds one HTTP/2 connection's state and answers the frames that are the
connection's own (SETTINGS, PING, WINDOW_UPDATE, RST_STREAM, GOAWAY, PRIORITY, PUSH_PROMISE);
it opens streams, sends their DATA within the peer's windows, gives our window back, keeps the
connection alive with PINGs and closes it. :class:`wire.grpc_h2.Connection` adds the read side:
frames parsed out of the socket's bytes, DATA and HEADERS handed to their streams. The bounds
against a hostile peer are described in :mod:`wire.grpc_h2`.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import struct
import time
from collections import deque
from collections.abc import Sequence

import hpack  # type: ignore[import-untyped, unused-ignore]

from wire.grpc_h2_stream import STREAM_WINDOW, Stream
from wire.grpc_status import RST_STATUS, RpcError, StatusCode
from wire.h2_frames import (
    ACK,
    CONTINUATION,
    DATA,
    DEFAULT_WINDOW,
    END_HEADERS,
    ENHANCE_YOUR_CALM,
    FLOW_CONTROL_ERROR,
    FRAME_SIZE_ERROR,
    GOAWAY,
    HEADERS,
    MAX_WINDOW,
    NO_ERROR,
    PING,
    PREFACE,
    PROTOCOL_ERROR,
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
)

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


class ConnectionCore(asyncio.Protocol):
    """One HTTP/2 connection carrying any number of gRPC streams: all but the read side (:mod:`wire.grpc_h2`)."""

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

    # --- control frames: the connection's own ----------------------------------------------

    def _opened(self, sid: int) -> bool:
        """Whether ``sid`` is a stream we opened (it may have closed since): odd, below the next id."""
        return sid & 1 == 1 and sid < self._next_id

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

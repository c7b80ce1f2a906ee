"""One gRPC call on a :class:`wire.grpc_h2.Connection`: gRPC's messages out of DATA frames, the
stream's flow-control window, its status from trailers.

What a peer can make a stream hold is bounded, whatever it sends:

* bytes: the stream window we advertise (:data:`STREAM_WINDOW`) is enforced: a peer that sends
  past it gets RST_STREAM FLOW_CONTROL_ERROR (RFC 9113 §6.9.1); the connection's window bounds
  every stream together;
* one message: ``max_message`` (the decoder's limit), checked on the 5-byte length prefix before
  a byte of the message is kept: a larger one fails the stream (RESOURCE_EXHAUSTED), or with
  ``skip_oversize`` is dropped as it arrives and counted (:attr:`Stream.skipped`);
* messages: at most :data:`MAX_QUEUED_MESSAGES` waiting for the reader (a window full of empty
  messages is millions of objects), else RST_STREAM ENHANCE_YOUR_CALM.
"""

from __future__ import annotations

import asyncio
import urllib.parse
from collections import deque
from typing import TYPE_CHECKING

from wire.grpc_status import RpcError, StatusCode, parse_grpc_status
from wire.h2_frames import CANCEL, ENHANCE_YOUR_CALM, FLOW_CONTROL_ERROR, NO_ERROR, PROTOCOL_ERROR, UINT32, grpc_message

if TYPE_CHECKING:
    from wire.h2_connection import ConnectionCore as Connection

STREAM_WINDOW = 16 << 20  # what we let a peer send on one stream before the reader takes it
#: Messages waiting for the reader, at most: a full stream window of messages averaging 64 bytes
#: (a gNMI notification is ~100 B to ~2 KB). Each costs ~60 bytes of Python objects beyond its bytes.
MAX_QUEUED_MESSAGES = STREAM_WINDOW // 64


class Stream:
    """One call: write messages, read them in batches, cancel. Not created directly (:meth:`Connection.open`)."""

    __slots__ = (
        "_buffer", "_closed_local", "_conn", "_discard", "_ended", "_error", "_messages", "_need", "_pending_bytes",
        "_waiter", "headers", "id", "max_message", "peer_reset", "recv_used", "send_window", "skip_oversize", "skipped",
        "taken", "unreturned",
    )  # fmt: skip

    def __init__(self, conn: Connection, stream_id: int, max_message: int, *, skip_oversize: bool = False) -> None:
        self._conn, self.id, self.max_message = conn, stream_id, max_message
        #: A message above ``max_message``: dropped as it arrives and counted in ``skipped`` (True),
        #: or the stream fails with RESOURCE_EXHAUSTED (False, as gRPC does).
        self.skip_oversize = skip_oversize
        self.skipped = 0
        self._discard = 0  # bytes of a skipped message still to drop
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
        self.recv_used = 0  # of the window we advertised: received and not returned by WINDOW_UPDATE
        self._closed_local = False  # we sent RST_STREAM (our half never ends otherwise: requests stay open)
        self.peer_reset = False  # the peer reset it (and must not get a RST_STREAM back)

    @property
    def queued(self) -> int:
        """Messages waiting for the reader."""
        return len(self._messages)

    @property
    def buffered(self) -> int:
        """Bytes of a message in assembly."""
        return len(self._buffer)

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
        batch = self.take_ready()
        if self._pending_bytes:
            self._conn.give_back(self, self._pending_bytes)
            self._pending_bytes = 0
        return batch

    def take_ready(self) -> list[bytes]:
        """Every message that has arrived, without waiting (possibly none)."""
        batch = list(self._messages)
        self._messages.clear()
        self.taken += len(batch)
        return batch

    def cancel(self) -> None:
        """End the call from our side: RST_STREAM, CANCEL while the peer's half is open, else NO_ERROR."""
        self.reset(CANCEL if not self._ended and self._error is None else NO_ERROR)
        self.fail(RpcError(StatusCode.CANCELLED, "cancelled by the client"))
        self._messages.clear()

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
        self._buffer = bytearray()
        if self._pending_bytes:  # a closed stream's window is moot; the connection's is given back
            self._conn.give_back(None, self._pending_bytes)
            self._pending_bytes = 0
        self._conn.forget(self.id)
        self._conn.wake_writers()  # a write waiting for this stream's window must see the end
        self._wake()

    def abort(self, code: int, status: StatusCode, why: str) -> None:
        """A stream error (RFC 9113 §5.4.2): RST_STREAM ``code``, the call fails; the connection lives on."""
        self.reset(code)
        self.fail(RpcError(status, why))

    def finish(self, trailers: dict[str, str]) -> None:
        """The peer's trailers (or a Trailers-Only answer): OK ends cleanly, anything else fails."""
        status = trailers.get("grpc-status")
        if status is None:
            self.abort(PROTOCOL_ERROR, StatusCode.INTERNAL, "the stream ended without a grpc-status")
            return
        code = parse_grpc_status(status)
        if code is None:
            self.abort(PROTOCOL_ERROR, StatusCode.INTERNAL, f"a malformed grpc-status {status[:20]!r}")
            return
        if code is not StatusCode.OK:
            message = urllib.parse.unquote(trailers.get("grpc-message", ""))
            self.fail(RpcError(code, message))
            return
        if self._need != -1 or self._buffer or self._discard:
            self.fail(RpcError(StatusCode.INTERNAL, "the stream ended inside a message"))
            return
        self._ended = True
        self._conn.forget(self.id)
        self._wake()

    def data(self, payload: memoryview, flow: int) -> None:
        """A DATA frame's payload (padding already stripped; ``flow`` is what it cost the window)."""
        if not self._admit(flow):
            return
        buf, pos, end = self._buffer, 0, len(payload)
        if self._discard:
            pos = self._skip(pos, end)
        got = False
        while pos < end:
            if self._need < 0:  # collecting a 5-byte prefix (possibly split)
                take = min(5 - len(buf), end - pos)
                buf += payload[pos : pos + take]
                pos += take
                if len(buf) < 5:
                    break
                self._need = UINT32.unpack_from(buf, 1)[0]
                if buf[0] != 0 or self._need > self.max_message:  # before a byte of the message is kept
                    if not self._refuse(buf[0]):
                        return
                    buf.clear()
                    pos = self._skip(pos, end)
                    continue
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
        self._settle(got)

    def _refuse(self, compressed: int) -> bool:
        """A prefix we will not read the message of: True to skip it (``skip_oversize``), False if the stream ended."""
        if compressed:
            self.abort(PROTOCOL_ERROR, StatusCode.INTERNAL, "a compressed message, but we asked for none")
            return False
        if not self.skip_oversize:
            why = f"received message larger than max ({self._need} vs. {self.max_message})"
            self.abort(CANCEL, StatusCode.RESOURCE_EXHAUSTED, why)
            return False
        self._discard, self._need = self._need, -1
        return True

    def _skip(self, pos: int, end: int) -> int:
        """Drop what arrives of a message above ``max_message``; where the frame goes on after it."""
        take = min(self._discard, end - pos)
        self._discard -= take
        if not self._discard:
            self.skipped += 1
        return pos + take

    def _settle(self, got: bool) -> None:
        """After a frame: wake the reader if messages arrived (unless the peer floods it with more
        than it may queue), or return the window of a message that is not complete yet."""
        if got:
            if len(self._messages) > MAX_QUEUED_MESSAGES:
                why = f"more than {MAX_QUEUED_MESSAGES} messages waiting for the reader (a flood of tiny messages)"
                self._messages.clear()
                self.abort(ENHANCE_YOUR_CALM, StatusCode.INTERNAL, why)
                return
            self._wake()
        elif (self._need >= 0 or self._discard) and not self._messages and self._pending_bytes:
            # A message larger than the window would never complete (and no reader would ever
            # take anything to give window back): its bytes so far are returned now; what this
            # keeps in memory is bounded by max_message (nothing, for one being skipped).
            self._conn.give_back(self, self._pending_bytes)
            self._pending_bytes = 0

    def _admit(self, flow: int) -> bool:
        """Count a DATA frame against the stream's window; False if it ended the stream (or the stream is over)."""
        self._pending_bytes += flow
        self.recv_used += flow
        if self.recv_used > STREAM_WINDOW:  # RFC 9113 §6.9.1: the peer ignored the window we advertised
            why = f"the peer sent {self.recv_used} bytes on a stream whose window is {STREAM_WINDOW}"
            self.abort(FLOW_CONTROL_ERROR, StatusCode.INTERNAL, why)
            return False
        if self._error is not None:
            self._conn.give_back(self, self._pending_bytes)
            self._pending_bytes = 0
            return False
        return True

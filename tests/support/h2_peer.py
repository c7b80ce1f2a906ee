"""A scripted HTTP/2 server on loopback that misbehaves on purpose: a hostile or broken switch.

The script gets a :class:`Peer`: the client's frames as they arrive (:meth:`Peer.expect`), and
raw bytes to send (:func:`frame`, :meth:`Peer.respond`). Real sockets, no HTTP/2 library on our
side of the wire: the peer says exactly what a test makes it say, RFC 9113 or not.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence

from wire.h2_frames import DATA, END_HEADERS, END_STREAM, HEADERS, PREFACE, SETTINGS, encode_headers, frame

Frame = tuple[int, int, int, bytes]  # (type, flags, stream, payload)
OK_HEADERS = ((":status", "200"), ("content-type", "application/grpc"))


def headers(sid: int, fields: Sequence[tuple[str, str]], *, end_stream: bool = False) -> bytes:
    """One HEADERS frame (END_HEADERS) of HPACK literals."""
    return frame(HEADERS, END_HEADERS | (END_STREAM if end_stream else 0), sid, encode_headers(fields))


def data_frames(sid: int, body: bytes, size: int = 16_384) -> bytes:
    """``body`` as DATA frames of at most ``size`` bytes."""
    return b"".join(frame(DATA, 0, sid, body[i : i + size]) for i in range(0, len(body), size))


class Peer:
    """One connection's server side."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.frames: list[Frame] = []
        self._arrived = asyncio.Event()
        self.eof = asyncio.Event()

    async def read_frames(self) -> None:
        """Take the client's preface and frames until it closes (run as a task)."""
        try:
            assert await self.reader.readexactly(len(PREFACE)) == PREFACE
            while True:
                head = await self.reader.readexactly(9)
                length = int.from_bytes(head[:3], "big")
                payload = await self.reader.readexactly(length)
                sid = struct.unpack(">I", head[5:9])[0] & 0x7FFFFFFF
                self.frames.append((head[3], head[4], sid, payload))
                self._arrived.set()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            self.eof.set()
            self._arrived.set()

    async def expect(self, kind: int, sid: int | None = None, within_s: float = 5.0) -> Frame:
        """The first frame of ``kind`` (on ``sid``) the client sent, waiting for it."""
        async with asyncio.timeout(within_s):
            while True:
                for f in self.frames:
                    if f[0] == kind and (sid is None or f[2] == sid):
                        return f
                if self.eof.is_set():
                    raise AssertionError(f"the client closed without sending frame type {kind} (sid {sid})")
                self._arrived.clear()
                await self._arrived.wait()

    def sent(self, kind: int) -> list[Frame]:
        """The client's frames of ``kind`` so far."""
        return [f for f in self.frames if f[0] == kind]

    async def send(self, data: bytes) -> None:
        self.writer.write(data)
        await self.writer.drain()

    async def respond(self, sid: int, *, settings: bytes = b"") -> None:
        """Our SETTINGS (once, with ``settings``) and a gRPC response's HEADERS on ``sid``."""
        await self.send(frame(SETTINGS, 0, 0, settings) + headers(sid, OK_HEADERS))


Script = Callable[[Peer], Awaitable[None]]


@contextlib.asynccontextmanager
async def h2_peer(
    script: Script, *, read: bool = True, rcvbuf: int | None = None
) -> AsyncIterator[tuple[int, list[Peer]]]:
    """A server on 127.0.0.1 running ``script`` per connection; yields (port, its peers).

    ``read``: take the client's frames (else nothing is ever read: a peer that does not read).
    ``rcvbuf``: the accepted sockets' SO_RCVBUF (small, so a peer that does not read fills up soon).
    """
    peers: list[Peer] = []
    tasks: list[asyncio.Task[None]] = []

    async def run(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = Peer(reader, writer)
        peers.append(peer)
        if read:
            tasks.append(asyncio.create_task(peer.read_frames()))
        with contextlib.suppress(ConnectionError, asyncio.CancelledError):
            await script(peer)
            await asyncio.sleep(3600)  # the connection stays open until the test ends

    sock = socket.socket()
    if rcvbuf is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)  # inherited by accepted sockets
    sock.bind(("127.0.0.1", 0))
    server = await asyncio.start_server(run, sock=sock)
    try:
        yield sock.getsockname()[1], peers
    finally:
        for t in tasks:
            t.cancel()
        server.close()
        for p in peers:
            p.writer.transport.abort()
        await asyncio.gather(*tasks, return_exceptions=True)
        with contextlib.suppress(Exception):
            await asyncio.wait_for(server.wait_closed(), 5)

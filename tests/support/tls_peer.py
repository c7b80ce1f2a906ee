"""A TLS server on loopback whose TLS is done by hand, so a test can make it send any bytes.

The server side is an :class:`ssl.SSLObject` over two memory BIOs on a plain socket: after the
handshake a script sends HTTP/2 frames encrypted (:meth:`TlsPeer.send`), a close_notify
(:meth:`TlsPeer.close_notify`), or raw bytes that are not what TLS allows (:meth:`TlsPeer.send_raw`):
a truncated record, a forged one, garbage.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import struct
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

from wire.h2_frames import PREFACE


def server_context(cert_file: Path, key_file: Path, alpn: tuple[str, ...] = ("h2",)) -> ssl.SSLContext:
    """A server context presenting ``cert_file``, offering ``alpn``."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert_file, key_file)
    ctx.set_alpn_protocols(list(alpn))
    return ctx


class TlsPeer:
    """One connection's server side."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, context: ssl.SSLContext) -> None:
        self.reader, self.writer = reader, writer
        self._in, self._out = ssl.MemoryBIO(), ssl.MemoryBIO()
        self.tls = context.wrap_bio(self._in, self._out, server_side=True)
        #: The client's plaintext so far.
        self.received = bytearray()
        #: The client's close_notify arrived.
        self.closed_by_client = False
        #: Why the handshake failed (the client refused us), if it did.
        self.handshake_error: Exception | None = None
        #: Set once the handshake failed, or the client's close_notify or EOF arrived.
        self.ended = asyncio.Event()

    async def handshake(self) -> bool:
        while True:
            try:
                self.tls.do_handshake()
            except ssl.SSLWantReadError:
                self._flush()
                if not await self._fill():
                    self.ended.set()
                    return False
                continue
            except ssl.SSLError as exc:
                self._flush()
                self.handshake_error = exc
                self.ended.set()
                return False
            self._flush()
            return True

    async def _fill(self) -> bool:
        data = await self.reader.read(1 << 16)
        if not data:
            self._in.write_eof()
            return False
        self._in.write(data)
        return True

    def _flush(self) -> None:
        if self._out.pending:
            self.writer.write(self._out.read())

    def frame_types(self) -> list[tuple[int, int]]:
        """(type, stream) of the client's whole frames after its preface."""
        data, out, pos = bytes(self.received), [], len(PREFACE)
        while len(data) - pos >= 9:
            length = int.from_bytes(data[pos : pos + 3], "big")
            if len(data) - pos < 9 + length:
                break
            out.append((data[pos + 3], struct.unpack_from(">I", data, pos + 5)[0] & 0x7FFFFFFF))
            pos += 9 + length
        return out

    async def read_until(self, done: Callable[[TlsPeer], bool]) -> None:
        """Decrypt what the client sends until ``done(self)``, its close_notify or EOF."""
        try:
            await self._read_until(done)
        except ssl.SSLError:
            self.ended.set()
            raise

    async def _read_until(self, done: Callable[[TlsPeer], bool]) -> None:
        while not done(self):
            try:
                while chunk := self.tls.read(1 << 16):
                    self.received += chunk
                self.closed_by_client = True
                self.ended.set()
                return
            except ssl.SSLWantReadError:
                pass
            except ssl.SSLZeroReturnError:
                self.closed_by_client = True
                self.ended.set()
                return
            if done(self):
                return
            self._flush()
            if not await self._fill():
                self.ended.set()
                return

    async def send(self, data: bytes) -> None:
        """``data`` encrypted, one record per 16 KiB."""
        self.tls.write(data)
        self._flush()
        await self.writer.drain()

    async def send_raw(self, data: bytes) -> None:
        """``data`` as it is, outside TLS."""
        self.writer.write(data)
        await self.writer.drain()

    async def close_notify(self) -> None:
        """Our close_notify; the socket stays open."""
        with contextlib.suppress(ssl.SSLWantReadError):
            self.tls.unwrap()
        self._flush()
        await self.writer.drain()


TlsScript = Callable[[TlsPeer], Awaitable[None]]


@contextlib.asynccontextmanager
async def tls_peer(script: TlsScript, context: ssl.SSLContext) -> AsyncIterator[tuple[int, list[TlsPeer]]]:
    """A server on 127.0.0.1 that does the TLS handshake, then runs ``script``; yields (port, its peers)."""
    peers: list[TlsPeer] = []
    tasks: list[asyncio.Task[object]] = []

    async def run(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = TlsPeer(reader, writer, context)
        peers.append(peer)
        task = asyncio.current_task()
        if task is not None:
            tasks.append(task)
        with contextlib.suppress(ConnectionError, ssl.SSLError, asyncio.CancelledError):
            if await peer.handshake():
                await script(peer)
            await asyncio.sleep(3600)  # the connection stays open until the test ends

    server = await asyncio.start_server(run, "127.0.0.1", 0)
    try:
        yield server.sockets[0].getsockname()[1], peers
    finally:
        server.close()
        for p in peers:
            p.writer.transport.abort()
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        with contextlib.suppress(Exception):
            await asyncio.wait_for(server.wait_closed(), 5)

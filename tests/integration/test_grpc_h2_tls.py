"""Our HTTP/2 client's TLS (wire/tls_layer.py) against TLS servers on loopback, some hostile.

The client does TLS itself over a plain socket (an SSLObject over memory BIOs), so read
coalescing pauses the socket and not only the decryption. That must verify exactly as asyncio's
TLS did (the CA, the name or ``server_name``, ALPN h2), end the connection cleanly on whatever a
peer sends after the handshake, and pause the socket for real.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import selectors
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from simulator.sim_tls import SimTls, prepare
from tests.support.h2_peer import OK_HEADERS, headers
from tests.support.tls_peer import TlsPeer, server_context, tls_peer
from wire import grpc_h2
from wire import h2_frames as h2
from wire.grpc_h2 import RpcError, StatusCode, client_ssl_context
from wire.h2_frames import frame, grpc_message


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> tuple[SimTls, Path]:
    """A server certificate for 127.0.0.1 and sw.lab from one CA, and another CA's file."""
    ours = prepare(tmp_path_factory.mktemp("ca"), ("127.0.0.1", "sw.lab"))
    stranger = prepare(tmp_path_factory.mktemp("other-ca"), ("127.0.0.1",))
    return ours, stranger.ca_file


@contextlib.contextmanager
def loop_errors() -> Iterator[list[dict[str, Any]]]:
    """What reaches the event loop's exception handler meanwhile (an exception escaping a callback)."""
    loop = asyncio.get_running_loop()
    errors: list[dict[str, Any]] = []
    previous = loop.get_exception_handler()
    loop.set_exception_handler(lambda _, ctx: errors.append(ctx))
    try:
        yield errors
    finally:
        loop.set_exception_handler(previous)


async def dial(port: int, ca: Path | None, server_name: str | None = None, **kw: float) -> grpc_h2.Connection:
    ctx = client_ssl_context(str(ca) if ca else None, None, None)
    return await asyncio.wait_for(
        grpc_h2.connect("127.0.0.1", port, ssl_context=ctx, server_name=server_name, keepalive_s=0, **kw), 10
    )


@contextlib.asynccontextmanager
async def tls_client(
    port: int, ca: Path, server_name: str | None = None, **kw: float
) -> AsyncIterator[grpc_h2.Connection]:
    conn = await dial(port, ca, server_name, **kw)
    try:
        yield conn
    finally:
        conn.close()


async def idle(peer: TlsPeer) -> None:
    await peer.read_until(lambda p: False)  # until the client's close_notify


# --- verification, as before -------------------------------------------------------------------


@pytest.mark.parametrize("server_name", [None, "sw.lab"])
async def test_the_right_ca_and_name_connect_and_closing_sends_close_notify(
    pki: tuple[SimTls, Path], server_name: str | None
) -> None:
    ours, _ = pki
    async with tls_peer(idle, server_context(ours.cert_file, ours.key_file)) as (port, peers):
        async with tls_client(port, ours.ca_file, server_name) as conn:
            assert conn.usable and conn.scheme == "https"
        await asyncio.wait_for(peers[0].ended.wait(), 5)
        assert peers[0].closed_by_client
        assert bytes(peers[0].received).startswith(h2.PREFACE)


@pytest.mark.parametrize(
    ("which", "server_name", "says"),
    [
        ("stranger", None, "unable to get local issuer certificate"),  # a CA that did not sign it
        ("ours", "other.lab", "Hostname mismatch"),  # a name the certificate does not carry
        ("ours", "127.0.0.2", "IP address mismatch"),
    ],
)
async def test_a_wrong_ca_or_server_name_is_refused(
    pki: tuple[SimTls, Path], which: str, server_name: str | None, says: str
) -> None:
    ours, stranger_ca = pki
    ca = stranger_ca if which == "stranger" else ours.ca_file
    async with tls_peer(idle, server_context(ours.cert_file, ours.key_file)) as (port, peers):
        with pytest.raises(RpcError) as err:
            await dial(port, ca, server_name)
        await asyncio.wait_for(peers[0].ended.wait(), 5)
        # and the switch hears why, in our alert (asyncio's TLS dropped the socket without it)
        assert peers[0].handshake_error is not None
    assert err.value.code() is StatusCode.UNAVAILABLE
    assert "TLS handshake failed" in err.value.details() and "CERTIFICATE_VERIFY_FAILED" in err.value.details()
    assert says in err.value.details(), err.value.details()
    assert peers[0].received == b""  # not one byte of HTTP/2 (our credentials would be in it)


async def test_a_server_without_alpn_h2_is_refused(pki: tuple[SimTls, Path]) -> None:
    ours, _ = pki
    async with tls_peer(idle, server_context(ours.cert_file, ours.key_file, alpn=("http/1.1",))) as (port, _):
        with pytest.raises(RpcError) as err:
            await dial(port, ours.ca_file)
    assert err.value.code() is StatusCode.UNAVAILABLE and "ALPN h2" in err.value.details()


async def test_a_server_that_never_answers_the_handshake_times_out() -> None:
    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read(1 << 16)  # the ClientHello, unanswered
        await asyncio.sleep(3600)

    server = await asyncio.start_server(silent, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        with pytest.raises(RpcError) as err:
            await dial(port, None, handshake_timeout_s=0.3)
    finally:
        server.close()
    assert err.value.code() is StatusCode.UNAVAILABLE
    assert "no TLS handshake within 0.3 s" in err.value.details()


# --- a hostile peer after the handshake ---------------------------------------------------------


async def _respond_then(peer: TlsPeer, hostile: str) -> None:
    await peer.read_until(lambda p: (h2.HEADERS, 1) in p.frame_types())
    await peer.send(frame(h2.SETTINGS, 0, 0) + headers(1, OK_HEADERS) + frame(h2.DATA, 0, 1, grpc_message(b"one")))
    if hostile == "close_notify":
        await peer.close_notify()  # and the socket stays open
    elif hostile == "truncated record":
        await peer.send_raw(b"\x17\x03\x03\x00\xc8" + os.urandom(20))  # claims 200 bytes, 20 come
        peer.writer.write_eof()
    elif hostile == "forged record":
        await peer.send_raw(b"\x17\x03\x03\x00\x40" + os.urandom(64))  # well-formed, not ours: bad MAC
    elif hostile == "garbage":
        await peer.send_raw(b"HTTP/1.1 400 Bad Request\r\n\r\n" + os.urandom(200))
    elif hostile == "eof without close_notify":
        peer.writer.write_eof()
    elif hostile == "reset":
        peer.writer.transport.abort()


@pytest.mark.parametrize(
    ("hostile", "says"),
    [
        ("close_notify", "close_notify"),
        ("truncated record", "EOF"),
        ("forged record", "BAD_RECORD_MAC"),
        ("garbage", "SSL"),
        ("eof without close_notify", "EOF"),
        ("reset", "socket closed"),
    ],
)
async def test_a_peer_breaking_tls_after_the_handshake_ends_the_connection_cleanly(
    pki: tuple[SimTls, Path], hostile: str, says: str
) -> None:
    ours, _ = pki

    async def script(peer: TlsPeer) -> None:
        await _respond_then(peer, hostile)

    with loop_errors() as errors:
        server = tls_peer(script, server_context(ours.cert_file, ours.key_file))
        async with server as (port, _), tls_client(port, ours.ca_file, coalesce_s=0) as conn:
            stream = conn.open("/t.T/Call", ())
            async with asyncio.timeout(10):  # no hang
                assert await stream.read_batch() == [b"one"]
                with pytest.raises(RpcError) as err:
                    while await stream.read_batch():
                        pass
            assert not conn.usable
        await asyncio.sleep(0.05)  # callbacks scheduled by the close have run
    assert err.value.code() is StatusCode.UNAVAILABLE, err.value
    assert says in err.value.details(), err.value.details()
    assert errors == []  # no exception escaped into the event loop


# --- coalescing pauses the socket -----------------------------------------------------------------


class CountingSelector(selectors.DefaultSelector):
    """The loop's selector, counting how often each file descriptor was ready to read."""

    def __init__(self) -> None:
        super().__init__()
        self.ready: dict[int, int] = {}

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        events: list[tuple[selectors.SelectorKey, int]] = super().select(timeout)
        for key, mask in events:
            if mask & selectors.EVENT_READ:
                self.ready[key.fd] = self.ready.get(key.fd, 0) + 1
        return events


def test_while_reading_is_paused_over_tls_the_socket_is_not_read(pki: tuple[SimTls, Path]) -> None:
    # asyncio's TLS went on reading the socket while the protocol was paused: every server write
    # still cost a wake-up, and coalescing saved half of what it saves in plaintext
    ours, _ = pki
    bursts, per_burst = 100, 10
    payloads = [i.to_bytes(4, "big") * 100 for i in range(bursts * per_burst)]

    async def trickle(peer: TlsPeer) -> None:
        await peer.read_until(lambda p: (h2.HEADERS, 1) in p.frame_types())
        await peer.send(frame(h2.SETTINGS, 0, 0) + headers(1, OK_HEADERS))
        for b in range(bursts):
            for p in payloads[b * per_burst : (b + 1) * per_burst]:
                await peer.send(frame(h2.DATA, 0, 1, grpc_message(p)))  # a record, a write each
            await asyncio.sleep(0.001)  # the bursts arrive spread over >= 100 ms
        await peer.send(headers(1, (("grpc-status", "0"),), end_stream=True))

    async def run() -> int:
        server = tls_peer(trickle, server_context(ours.cert_file, ours.key_file))
        async with server as (port, _), tls_client(port, ours.ca_file, coalesce_s=0.05) as conn:
            assert conn._transport is not None
            fd = conn._transport.get_extra_info("socket").fileno()
            stream = conn.open("/t.T/Call", ())
            got: list[bytes] = []
            async with asyncio.timeout(30):
                while batch := await stream.read_batch():
                    got += batch
            assert got == payloads
            return selector.ready.get(fd, 0)

    selector = CountingSelector()
    loop = asyncio.SelectorEventLoop(selector)
    try:
        wakeups = loop.run_until_complete(run())
    finally:
        loop.close()
    # read as it comes (or by asyncio's TLS while paused), ~one wake-up per burst; paused for
    # 50 ms at a time, a handful (the loaded machine's scheduling too)
    assert wakeups * 3 < bursts, wakeups

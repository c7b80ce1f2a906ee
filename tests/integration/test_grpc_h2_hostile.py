"""Our HTTP/2 client (wire/grpc_h2.py) against scripted hostile servers on loopback (issue 28, items 4 and 5).

Each server says exactly what a broken or hostile switch could say; each test checks that the
client's memory stays bounded, and that the fault ends what RFC 9113 says it ends: the
connection (GOAWAY with the right code, every stream INTERNAL) or one stream (RST_STREAM, the
other streams go on). Every test here failed before the client was hardened.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import struct
from collections.abc import AsyncIterator, Callable

import pytest

from collector.config import PLAINTEXT
from collector.gnmi_settings import GnmiTuning
from collector.gnmi_transport import SUBSCRIBE, H2Channel
from tests.support.h2_peer import OK_HEADERS, Peer, Script, data_frames, h2_peer, headers
from wire import grpc_h2
from wire import h2_frames as h2
from wire.grpc_h2 import RpcError, StatusCode
from wire.h2_frames import frame, grpc_message

pytestmark = pytest.mark.asyncio
OK_TRAILERS = (("grpc-status", "0"),)


@contextlib.asynccontextmanager
async def client(port: int, **kw: float) -> AsyncIterator[grpc_h2.Connection]:
    conn = await grpc_h2.connect("127.0.0.1", port, keepalive_s=kw.get("keepalive_s", 0.0),
                                 keepalive_timeout_s=kw.get("keepalive_timeout_s", 20.0), coalesce_s=0)  # fmt: skip
    try:
        yield conn
    finally:
        conn.close()


async def read_all(stream: grpc_h2.Stream) -> list[bytes]:
    out: list[bytes] = []
    async with asyncio.timeout(10):
        while batch := await stream.read_batch():
            out += batch
    return out


async def fails(stream: grpc_h2.Stream) -> RpcError:
    with pytest.raises(RpcError) as err:
        await read_all(stream)
    return err.value


def error_code(f: tuple[int, int, int, bytes], at: int = 0) -> str:
    return h2.error_name(struct.unpack_from(">I", f[3], at)[0])


# --- item 4: memory that grew with the attacker's traffic ------------------------------------


async def test_a_ping_flood_to_a_client_whose_replies_are_not_read_ends_in_enhance_your_calm() -> None:
    # 200 MB of PINGs to a client whose ACKs nobody read grew it by 166 MB: ACKs were written unbounded
    sent = 0

    async def flood(peer: Peer) -> None:
        nonlocal sent
        await peer.send(frame(h2.SETTINGS, 0, 0) + headers(1, OK_HEADERS))
        burst = frame(h2.PING, 0, 0, b"12345678") * 1000
        while sent < 2_000_000 and not peer.writer.transport.is_closing():
            peer.writer.write(burst)
            sent += 1000
            await peer.writer.drain()

    async with h2_peer(flood, read=False, rcvbuf=4096) as (port, _), client(port) as conn:
        stream = conn.open("/t.T/Call", ())
        err = await asyncio.wait_for(fails(stream), 60)
        assert conn.control_queued == 0  # dropped with the connection; never past the bound while it lived
    assert err.code() is StatusCode.INTERNAL and "ENHANCE_YOUR_CALM" in err.details(), err
    assert "PING/SETTINGS replies" in err.details()
    assert sent < 2_000_000  # ended long before the peer ran out of PINGs


@pytest.mark.parametrize("size", [0, 7, 9, 16_384])
async def test_a_ping_that_is_not_8_bytes_is_a_frame_size_error(size: int) -> None:
    async def script(peer: Peer) -> None:
        await peer.expect(h2.HEADERS, 1)
        await peer.send(frame(h2.SETTINGS, 0, 0) + frame(h2.PING, 0, 0, b"p" * size))

    async with h2_peer(script) as (port, peers), client(port) as conn:
        err = await fails(conn.open("/t.T/Call", ()))
        goaway = await peers[0].expect(h2.GOAWAY)
    assert err.code() is StatusCode.INTERNAL and "FRAME_SIZE_ERROR" in err.details()
    assert error_code(goaway, 4) == "FRAME_SIZE_ERROR"
    assert not peers[0].sent(h2.PING)  # not acknowledged


async def test_a_peer_overrunning_the_stream_window_gets_rst_stream_flow_control_error() -> None:
    # the 16 MiB stream window was advertised and not enforced: 64 MiB of messages were queued
    async def overrun(peer: Peer) -> None:
        await peer.expect(h2.HEADERS, 1)
        await peer.respond(1)
        body = grpc_message(b"m" * (1 << 20)) * 17  # 17 MiB, the reader takes none: past the window
        await peer.send(data_frames(1, body))

    async with h2_peer(overrun) as (port, peers), client(port) as conn:
        stream = conn.open("/t.T/Call", ())
        rst = await peers[0].expect(h2.RST_STREAM, 1, within_s=30)
        err = await fails(stream)
        assert conn.usable  # a stream error: the connection lives on
        other = conn.open("/t.T/Call", ())
    assert error_code(rst) == "FLOW_CONTROL_ERROR" and not peers[0].sent(h2.GOAWAY)
    assert err.code() is StatusCode.INTERNAL and "window" in err.details()
    assert other.id == 3


async def test_a_flood_of_tiny_messages_is_bounded_by_a_count_not_only_by_bytes() -> None:
    # 64 MiB of 1-byte messages were 11.2 M queued objects (+688 MB); within one stream window
    # a peer can still send 3.3 M empty ones
    n = grpc_h2.MAX_QUEUED_MESSAGES + 5000

    async def tiny(peer: Peer) -> None:
        await peer.expect(h2.HEADERS, 1)
        await peer.respond(1)
        await peer.send(data_frames(1, grpc_message(b"") * n))

    async with h2_peer(tiny) as (port, peers), client(port) as conn:
        stream = conn.open("/t.T/Call", ())
        rst = await peers[0].expect(h2.RST_STREAM, 1, within_s=30)
        assert stream.queued == 0
        err = await fails(stream)
    assert error_code(rst) == "ENHANCE_YOUR_CALM"
    assert "messages waiting for the reader" in err.details()


async def test_a_message_above_the_decoders_limit_is_dropped_unread_and_the_next_one_arrives() -> None:
    # the channel buffered up to 256 MiB while the decoder drops anything above 64 MiB
    limit = GnmiTuning().max_message_bytes

    async def huge(peer: Peer) -> None:
        await peer.expect(h2.HEADERS, 1)
        await peer.respond(1)
        # a prefix claiming limit + 1 bytes, then 4 MiB of them, then the rest of the message
        await peer.send(data_frames(1, b"\x00" + struct.pack(">I", limit + 1) + b"z" * (4 << 20)))
        await asyncio.sleep(0.2)  # the client has seen the prefix and four MiB: it holds none of it
        rest = limit + 1 - (4 << 20)
        chunk = b"z" * (1 << 20)
        for off in range(0, rest, len(chunk)):
            await peer.send(data_frames(1, chunk[: min(len(chunk), rest - off)]))
        await peer.send(data_frames(1, grpc_message(b"next")) + headers(1, OK_TRAILERS, end_stream=True))

    skipped: list[int] = []
    async with h2_peer(huge) as (port, _):
        channel = H2Channel(f"127.0.0.1:{port}", PLAINTEXT, GnmiTuning(read_coalesce_s=0))
        try:
            call = await channel.subscribe((), skipped.append)
            got = []
            async with asyncio.timeout(60):
                while batch := await call.read_batch():
                    got += batch
        finally:
            await channel.close()
    assert got == [b"next"] and skipped == [1]


async def test_a_message_above_the_limit_fails_before_any_of_it_is_buffered() -> None:
    async def huge(peer: Peer) -> None:
        await peer.expect(h2.HEADERS, 1)
        await peer.respond(1)
        await peer.send(data_frames(1, b"\x00" + struct.pack(">I", (256 << 20)) + b"z" * 1000))  # then nothing

    async with h2_peer(huge) as (port, peers), client(port) as conn:
        stream = conn.open("/t.T/Call", ())  # the default limit: the decoder's
        err = await fails(stream)
        rst = await peers[0].expect(h2.RST_STREAM, 1)
    assert err.code() is StatusCode.RESOURCE_EXHAUSTED and str(64 << 20) in err.details()
    assert error_code(rst) == "CANCEL"


async def _keepalive_against(answer: Script) -> RpcError | None:
    async with h2_peer(answer) as (port, _), client(port, keepalive_s=0.3, keepalive_timeout_s=0.3) as conn:
        stream = conn.open("/t.T/Call", ())
        try:
            await asyncio.wait_for(stream.read_batch(), 3)
        except RpcError as exc:
            return exc
        except TimeoutError:
            return None
    return None


async def test_unsolicited_ping_acks_and_other_chatter_do_not_keep_a_dead_peer_alive() -> None:
    # _last_received was reset on every read, and any PING ACK cleared the outstanding ping
    async def chatter(peer: Peer) -> None:
        await peer.expect(h2.HEADERS, 1)
        await peer.respond(1)
        while True:  # never answers our PINGs, but is never quiet
            await peer.send(
                frame(h2.PING, h2.ACK, 0, os.urandom(8)) + frame(0x42, 0, 0, b"unknown type") + frame(h2.SETTINGS, 0, 0)
            )
            await asyncio.sleep(0.05)

    err = await _keepalive_against(chatter)
    assert err is not None and err.code() is StatusCode.UNAVAILABLE and "keepalive" in err.details()


def _answering_pings(ack: Callable[[bytes], bytes]) -> Script:
    """A peer that answers each of our PINGs with a PING ACK carrying ``ack(our bytes)``."""

    async def answer(peer: Peer) -> None:
        await peer.expect(h2.HEADERS, 1)
        await peer.respond(1)
        seen = 0
        while True:
            pings = [f for f in peer.sent(h2.PING) if not f[1] & h2.ACK]
            for f in pings[seen:]:
                await peer.send(frame(h2.PING, h2.ACK, 0, ack(bytes(f[3]))))
            seen = len(pings)
            await asyncio.sleep(0.02)

    return answer


async def test_a_ping_ack_must_carry_our_pings_bytes() -> None:
    err = await _keepalive_against(_answering_pings(lambda ours: bytes(b ^ 0xFF for b in ours)))
    assert err is not None and "keepalive" in err.details()


async def test_a_peer_that_answers_our_pings_stays_connected() -> None:
    assert await _keepalive_against(_answering_pings(bytes)) is None  # 3 s: ten keepalive rounds, each answered


# --- item 5: RFC 9113 leniency --------------------------------------------------------------

#: (what the peer sends after our HEADERS on stream 1, the GOAWAY code we must answer with)
CONNECTION_ERRORS = {
    "DATA on stream 0": (frame(h2.DATA, 0, 0, b"x"), "PROTOCOL_ERROR"),
    "DATA on a stream never opened": (frame(h2.DATA, 0, 3, grpc_message(b"x")), "PROTOCOL_ERROR"),
    "DATA on a server stream": (frame(h2.DATA, 0, 2, grpc_message(b"x")), "PROTOCOL_ERROR"),
    "HEADERS on a stream never opened": (headers(5, OK_HEADERS), "PROTOCOL_ERROR"),
    "SETTINGS on stream 1": (frame(h2.SETTINGS, 0, 1), "PROTOCOL_ERROR"),
    "SETTINGS ACK with a payload": (frame(h2.SETTINGS, h2.ACK, 0, struct.pack(">HI", 4, 1)), "FRAME_SIZE_ERROR"),
    "SETTINGS of 5 bytes": (frame(h2.SETTINGS, 0, 0, b"\x00\x04\x00\x00\x01"), "FRAME_SIZE_ERROR"),
    "INITIAL_WINDOW_SIZE above 2^31-1": (
        frame(h2.SETTINGS, 0, 0, struct.pack(">HI", 4, 1 << 31)),
        "FLOW_CONTROL_ERROR",
    ),
    "INITIAL_WINDOW_SIZE overflowing a stream's send window": (
        frame(h2.WINDOW_UPDATE, 0, 1, struct.pack(">I", h2.MAX_WINDOW - h2.DEFAULT_WINDOW))
        + frame(h2.SETTINGS, 0, 0, struct.pack(">HI", 4, h2.DEFAULT_WINDOW + 1)),
        "FLOW_CONTROL_ERROR",
    ),
    "PING on stream 1": (frame(h2.PING, 0, 1, b"12345678"), "PROTOCOL_ERROR"),
    "RST_STREAM on stream 0": (frame(h2.RST_STREAM, 0, 0, struct.pack(">I", 8)), "PROTOCOL_ERROR"),
    "RST_STREAM on a stream never opened": (frame(h2.RST_STREAM, 0, 7, struct.pack(">I", 8)), "PROTOCOL_ERROR"),
    "WINDOW_UPDATE on a stream never opened": (frame(h2.WINDOW_UPDATE, 0, 9, struct.pack(">I", 1)), "PROTOCOL_ERROR"),
    "GOAWAY on stream 1": (frame(h2.GOAWAY, 0, 1, struct.pack(">II", 0, 0)), "PROTOCOL_ERROR"),
    "empty CONTINUATION frames without end": (
        frame(h2.HEADERS, 0, 1, grpc_h2.encode_headers(OK_HEADERS))
        + frame(h2.CONTINUATION, 0, 1) * (grpc_h2.MAX_CONTINUATIONS + 1),
        "ENHANCE_YOUR_CALM",
    ),
    "SETTINGS_ENABLE_PUSH 2": (frame(h2.SETTINGS, 0, 0, struct.pack(">HI", 2, 2)), "PROTOCOL_ERROR"),
}


@pytest.mark.parametrize("case", list(CONNECTION_ERRORS))
async def test_a_connection_error_ends_the_connection_with_goaway_and_its_code(case: str) -> None:
    hostile, code = CONNECTION_ERRORS[case]

    async def script(peer: Peer) -> None:
        await peer.expect(h2.HEADERS, 1)
        await peer.send(frame(h2.SETTINGS, 0, 0) + hostile)

    async with h2_peer(script) as (port, peers), client(port) as conn:
        err = await fails(conn.open("/t.T/Call", ()))
        goaway = await peers[0].expect(h2.GOAWAY)
        assert not conn.usable
    assert err.code() is StatusCode.INTERNAL and code in err.details(), err
    assert error_code(goaway, 4) == code


#: (the peer's answer on stream 1, the RST_STREAM code we must send, what the caller is told)
STREAM_ERRORS = {
    "DATA before the response's HEADERS": (frame(h2.DATA, 0, 1, grpc_message(b"x")), "PROTOCOL_ERROR", "before"),
    "a :status of '²'": (
        headers(1, ((":status", "²00"), ("content-type", "application/grpc"))),
        "PROTOCOL_ERROR",
        ":status",
    ),
    "a :status of 'abc'": (headers(1, ((":status", "abc"),)), "PROTOCOL_ERROR", ":status"),
    "a grpc-status of '²'": (
        headers(1, (*OK_HEADERS, ("grpc-status", "²")), end_stream=True),
        "PROTOCOL_ERROR",
        "grpc-status",
    ),
    "a grpc-status of 4301 digits": (
        headers(1, OK_HEADERS) + headers(1, (("grpc-status", "9" * 4301),), end_stream=True),
        "PROTOCOL_ERROR",
        "grpc-status",
    ),
    "trailers without END_STREAM": (headers(1, OK_HEADERS) + headers(1, OK_TRAILERS), "PROTOCOL_ERROR", "trailers"),
    "a PRIORITY of 4 bytes": (frame(h2.PRIORITY, 0, 1, b"\x00\x00\x00\x00"), "FRAME_SIZE_ERROR", "PRIORITY"),
}


@pytest.mark.parametrize("case", list(STREAM_ERRORS))
async def test_a_stream_at_fault_is_reset_and_the_other_stream_goes_on(case: str) -> None:
    hostile, code, said = STREAM_ERRORS[case]

    async def script(peer: Peer) -> None:
        await peer.expect(h2.HEADERS, 3)
        await peer.send(frame(h2.SETTINGS, 0, 0) + hostile)
        await peer.expect(h2.RST_STREAM, 1)
        await peer.send(headers(3, OK_HEADERS) + data_frames(3, grpc_message(b"fine")))
        await peer.send(headers(3, OK_TRAILERS, end_stream=True))

    async with h2_peer(script) as (port, peers), client(port) as conn:
        bad, good = conn.open("/t.T/Call", ()), conn.open("/t.T/Call", ())
        err = await fails(bad)
        assert await read_all(good) == [b"fine"]
        assert conn.usable
        rst = await peers[0].expect(h2.RST_STREAM, 1)
    assert err.code() is StatusCode.INTERNAL and said in err.details(), err
    assert error_code(rst) == code and not peers[0].sent(h2.GOAWAY)


async def test_the_peers_max_concurrent_streams_is_honoured_and_the_channel_opens_another_connection() -> None:
    async def one_at_a_time(peer: Peer) -> None:
        await peer.send(frame(h2.SETTINGS, 0, 0, struct.pack(">HI", h2.S_MAX_CONCURRENT, 1)))
        await peer.expect(h2.HEADERS, 1)
        await peer.send(headers(1, OK_HEADERS) + data_frames(1, grpc_message(b"one")))

    async with h2_peer(one_at_a_time) as (port, peers):
        async with client(port) as conn:
            first = conn.open("/t.T/Call", ())
            assert await asyncio.wait_for(first.read_batch(), 5) == [b"one"]  # the SETTINGS came before
            assert not conn.has_room
            with pytest.raises(RpcError) as err:
                conn.open("/t.T/Call", ())
            assert err.value.code() is StatusCode.UNAVAILABLE
            assert "SETTINGS_MAX_CONCURRENT_STREAMS" in err.value.details()
            assert not peers[0].sent(h2.HEADERS)[1:]  # the second never went out
        channel = H2Channel(f"127.0.0.1:{port}", PLAINTEXT, GnmiTuning(read_coalesce_s=0))
        try:
            a = await channel.subscribe(())
            assert await asyncio.wait_for(a.read_batch(), 5) == [b"one"]
            b = await channel.subscribe(())
            assert await asyncio.wait_for(b.read_batch(), 5) == [b"one"]
            assert channel.connections == 2
        finally:
            await channel.close()
    assert all(p.sent(h2.HEADERS)[0][2] == 1 for p in peers)
    assert SUBSCRIBE == "/gnmi.gNMI/Subscribe"

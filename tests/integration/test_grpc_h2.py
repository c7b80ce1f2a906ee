"""Our HTTP/2 gRPC client (wire/grpc_h2.py) against a real grpc.aio server, and raw sockets that misbehave.

The server is grpc's own C-core over loopback, so framing, flow control, HPACK and trailers
are what a real gRPC peer sends. Each test says what a user would see if it went wrong.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any

import grpc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from collector import gnmi_transport as transport
from collector.config import PLAINTEXT
from collector.gnmi_settings import GnmiTuning
from collector.gnmi_transport import SUBSCRIBE, H2Channel
from wire import grpc_h2
from wire.grpc_h2 import RpcError, StatusCode

pytestmark = pytest.mark.asyncio

Behaviour = Callable[[AsyncIterator[bytes], grpc.aio.ServicerContext[Any, Any]], AsyncIterator[bytes]]


@contextlib.asynccontextmanager
async def grpc_server(behaviour: Behaviour, method: str = "/test.T/Call") -> AsyncIterator[int]:
    """A grpc.aio server on loopback whose ``method`` is ``behaviour`` (raw bytes both ways); its port."""
    server = grpc.aio.server()
    handler = grpc.stream_stream_rpc_method_handler(behaviour)  # no (de)serializers: bytes
    service, name = method.strip("/").split("/")
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(service, {name: handler}),))
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        yield port
    finally:
        await server.stop(grace=None)


_OPEN: list[grpc_h2.Connection] = []


@pytest.fixture(autouse=True)
def _close_connections() -> Iterator[None]:
    yield
    while _OPEN:
        _OPEN.pop().close()


async def connect(port: int, keepalive_s: float = 0.0, keepalive_timeout_s: float = 20.0) -> grpc_h2.Connection:
    conn = await grpc_h2.connect("127.0.0.1", port, keepalive_s=keepalive_s, keepalive_timeout_s=keepalive_timeout_s)
    _OPEN.append(conn)
    return conn


async def call(port: int, *, metadata: tuple[tuple[str, str], ...] = (), max_message: int = 1 << 24) -> grpc_h2.Stream:
    conn = await connect(port)
    return conn.open("/test.T/Call", metadata, max_message)


async def read_all(stream: grpc_h2.Stream) -> list[bytes]:
    out: list[bytes] = []
    while batch := await stream.read_batch():
        out += batch
    return out


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sizes=st.lists(st.one_of(st.just(0), st.integers(1, 300), st.integers(16_000, 70_000)), min_size=1, max_size=12))
async def test_every_message_arrives_whole_and_in_order_whatever_its_size(sizes: list[int]) -> None:
    # sizes around the 16 KB frame size split messages across DATA frames and pack several into one
    payloads = [bytes([i % 251]) * n for i, n in enumerate(sizes)]

    async def send(requests: AsyncIterator[bytes], ctx: Any) -> AsyncIterator[bytes]:
        async for _ in requests:
            for p in payloads:
                yield p
            return

    async with grpc_server(send) as port:
        stream = await call(port)
        await stream.write(b"go")
        assert await read_all(stream) == payloads


async def test_messages_written_one_at_a_time_are_read_together_and_every_one_arrives() -> None:
    """A gNMI server writes a message at a time; read coalescing takes many per socket read."""
    payloads = [i.to_bytes(4, "big") * 100 for i in range(1000)]

    async def trickle(requests: AsyncIterator[bytes], ctx: Any) -> AsyncIterator[bytes]:
        async for _ in requests:
            for i, p in enumerate(payloads):
                yield p
                if i % 10 == 9:
                    await asyncio.sleep(0.001)  # the messages arrive spread over ~100 ms
            return

    reads = {}
    async with grpc_server(trickle) as port:
        for coalesce_s in (0.0, 0.05):
            conn = await grpc_h2.connect("127.0.0.1", port, keepalive_s=0, coalesce_s=coalesce_s)
            _OPEN.append(conn)
            stream = conn.open("/test.T/Call", (), 1 << 24)
            await stream.write(b"go")
            assert await read_all(stream) == payloads
            reads[coalesce_s] = conn.reads
    # ~100 sends apart read as they come; at 50 ms a pause, a handful (the loaded machine's too)
    assert reads[0.05] * 3 < reads[0.0], reads


async def test_a_status_and_its_message_reach_the_caller_decoded() -> None:
    async def refuse(requests: AsyncIterator[bytes], ctx: Any) -> AsyncIterator[bytes]:
        async for _ in requests:
            yield b"one"
            await ctx.abort(grpc.StatusCode.PERMISSION_DENIED, "user 'ops' may not read /interfaces: 100% sure ✓")

    async with grpc_server(refuse) as port:
        stream = await call(port)
        await stream.write(b"go")
        assert await stream.read_batch() == [b"one"]
        with pytest.raises(RpcError) as err:
            await read_all(stream)
    assert err.value.code() is StatusCode.PERMISSION_DENIED
    assert err.value.details() == "user 'ops' may not read /interfaces: 100% sure ✓"


async def test_a_trailers_only_refusal_is_its_status() -> None:
    async def unauthenticated(requests: AsyncIterator[bytes], ctx: Any) -> AsyncIterator[bytes]:
        await ctx.abort(grpc.StatusCode.UNAUTHENTICATED, "bad password")
        yield b""  # never reached

    async with grpc_server(unauthenticated) as port:
        stream = await call(port)
        with pytest.raises(RpcError) as err:
            await read_all(stream)
    assert (err.value.code(), err.value.details()) == (StatusCode.UNAUTHENTICATED, "bad password")


async def test_metadata_reaches_the_server_and_an_unknown_method_is_unimplemented() -> None:
    seen: list[tuple[str, str]] = []

    async def echo_metadata(requests: AsyncIterator[bytes], ctx: Any) -> AsyncIterator[bytes]:
        seen.extend((k, v) for k, v in ctx.invocation_metadata() if k in ("username", "password"))
        yield b"ok"

    async with grpc_server(echo_metadata) as port:
        stream = await call(port, metadata=(("username", "admin"), ("password", "s3cret pass")))
        assert await read_all(stream) == [b"ok"]
        conn = await connect(port)
        with pytest.raises(RpcError) as err:
            await read_all(conn.open("/test.T/Nope", (), 1 << 20))
    assert seen == [("username", "admin"), ("password", "s3cret pass")]
    assert err.value.code() is StatusCode.UNIMPLEMENTED


async def test_a_message_above_the_limit_fails_the_stream_with_resource_exhausted() -> None:
    async def big(requests: AsyncIterator[bytes], ctx: Any) -> AsyncIterator[bytes]:
        yield b"small"
        yield b"x" * 100_000

    async with grpc_server(big) as port:
        stream = await call(port, max_message=50_000)
        with pytest.raises(RpcError) as err:
            await read_all(stream)
    assert err.value.code() is StatusCode.RESOURCE_EXHAUSTED
    assert "100000" in err.value.details()


async def test_a_message_larger_than_the_window_arrives() -> None:
    # a SONiC COUNTERS table or a first dump can exceed the 16 MB stream window: window must be
    # given back while it is assembled, or the stream would stall for good
    big = bytes(range(256)) * (20_000_000 // 256)

    async def send(requests: AsyncIterator[bytes], ctx: Any) -> AsyncIterator[bytes]:
        yield big
        yield b"after"

    async with grpc_server(send) as port:
        stream = await call(port, max_message=64 << 20)
        got = await asyncio.wait_for(read_all(stream), 30)
    assert len(got) == 2 and got[0] == big and got[1] == b"after"


async def test_a_reader_that_stops_reading_stops_the_sender_and_loses_nothing() -> None:
    sent = 0
    message = b"m" * 100_000
    total = 600  # 60 MB: far past the 16 MB stream window

    async def flood(requests: AsyncIterator[bytes], ctx: Any) -> AsyncIterator[bytes]:
        nonlocal sent
        for _ in range(total):
            yield message
            sent += 1

    async with grpc_server(flood) as port:
        stream = await call(port)
        await asyncio.sleep(1.5)  # nobody reads
        held = sent
        assert held < total, "the server was never held back: flow control is not working"
        assert held * len(message) < 40 << 20  # within the windows (ours and grpc's own buffers)
        got = await read_all(stream)
    assert len(got) == total and all(g == message for g in got)


async def test_streams_share_one_connection_and_cancelling_one_leaves_the_other() -> None:
    cancelled = asyncio.Event()

    async def per_stream(requests: AsyncIterator[bytes], ctx: Any) -> AsyncIterator[bytes]:
        # "a" sends 50 messages and ends; "b" sends until its client cancels it. (It used to end
        # after 50 too: on a loaded machine its 0.5 s were over before the client's RST_STREAM came,
        # and the handler, finished, never saw the cancel it was waiting for.)
        name = b""
        try:
            async for name in requests:
                i = 0
                while name == b"b" or i < 50:
                    yield name + b"-%d" % i
                    i += 1
                    await asyncio.sleep(0.01)
                return
        except asyncio.CancelledError:  # how grpc.aio tells a handler its client cancelled
            if name == b"b":  # only the cancelled stream's handler
                cancelled.set()
            raise

    async with grpc_server(per_stream) as port:
        conn = await connect(port)
        a, b = conn.open("/test.T/Call", (), 1 << 20), conn.open("/test.T/Call", (), 1 << 20)
        await a.write(b"a")
        await b.write(b"b")
        first = await b.read_batch()
        b.cancel()
        with pytest.raises(RpcError):
            await b.read_batch()
        got = await read_all(a)
        await asyncio.wait_for(cancelled.wait(), 5)
    assert first and all(x.startswith(b"b-") for x in first)
    assert got == [b"a-%d" % i for i in range(50)]


async def test_a_server_going_away_fails_its_streams_as_unavailable_and_a_new_connection_works() -> None:
    async def slow(requests: AsyncIterator[bytes], ctx: Any) -> AsyncIterator[bytes]:
        while True:
            yield b"tick"
            await asyncio.sleep(0.05)

    server = grpc.aio.server()
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler("test.T", {"Call": grpc.stream_stream_rpc_method_handler(slow)}),)
    )
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    conn = await connect(port)
    stream = conn.open("/test.T/Call", (), 1 << 20)
    assert await stream.read_batch()
    await server.stop(grace=0.2)
    with pytest.raises(RpcError) as err:
        await read_all(stream)
    assert err.value.code() in (StatusCode.UNAVAILABLE, StatusCode.CANCELLED)
    assert not conn.usable
    async with grpc_server(slow) as port2:
        again = await call(port2)
        assert await again.read_batch()
        again.cancel()


async def test_a_name_that_does_not_resolve_says_so() -> None:
    with pytest.raises(RpcError) as err:
        await asyncio.wait_for(grpc_h2.connect("no-such-switch.invalid", 57400), 30)
    assert err.value.code() is StatusCode.UNAVAILABLE
    assert "no-such-switch.invalid" in err.value.details() and "Unknown error" not in err.value.details()


async def test_a_server_that_finds_our_pings_too_many_gets_fewer_on_the_next_connection() -> None:
    # C-core servers strike a client out (GOAWAY ENHANCE_YOUR_CALM "too_many_pings") that pings
    # more than twice without data in between; its next connection must ping half as often
    async def quiet(requests: AsyncIterator[bytes], ctx: Any) -> AsyncIterator[bytes]:
        await asyncio.sleep(60)
        yield b""

    tuning = GnmiTuning(keepalive_time_s=0.2, keepalive_timeout_s=0.3)
    async with grpc_server(quiet, SUBSCRIBE) as port:
        channel = H2Channel(f"127.0.0.1:{port}", PLAINTEXT, tuning)
        try:
            first = await channel.subscribe(())
            with pytest.raises(transport.RpcError) as err:
                await asyncio.wait_for(first.read_batch(), 30)
            assert err.value.code() is grpc.StatusCode.UNAVAILABLE and "too many pings" in err.value.details().lower()
            await asyncio.sleep(0.5)  # the GOAWAY follows the stream's trailers (a retry waits >= 1 s)
            again = await channel.subscribe(())
            assert channel.keepalive_s == pytest.approx(0.4)
            again.cancel()
        finally:
            await channel.close()


async def test_nothing_listening_is_unavailable_with_the_reason() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed when the block ends: nothing listens there
    with pytest.raises(RpcError) as err:
        await grpc_h2.connect("127.0.0.1", port)
    assert err.value.code() is StatusCode.UNAVAILABLE
    assert "failed to connect" in err.value.details() and "refused" in err.value.details().lower()


@contextlib.asynccontextmanager
async def raw_server(
    answer: Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]],
) -> AsyncIterator[int]:
    """A TCP server that answers with ``answer`` (not HTTP/2 unless it writes it); its port."""
    tasks: list[asyncio.Task[None]] = []
    writers: list[asyncio.StreamWriter] = []

    async def run(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writers.append(writer)
        tasks.append(asyncio.current_task())  # type: ignore[arg-type]
        with contextlib.suppress(Exception):
            await answer(reader, writer)

    server = await asyncio.start_server(run, "127.0.0.1", 0)
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for w in writers:
            w.close()
        server.close()
        await server.wait_closed()


async def test_a_peer_that_goes_silent_is_found_by_keepalive() -> None:
    # a frozen switch (or a dead path) keeps the TCP connection open and answers nothing
    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(Exception):
            while await reader.read(65536):
                pass

    async with raw_server(silent) as port:
        conn = await connect(port, keepalive_s=0.3, keepalive_timeout_s=0.3)
        stream = conn.open("/test.T/Call", (), 1 << 20)
        with pytest.raises(RpcError) as err:
            await asyncio.wait_for(stream.read_batch(), 5)
    assert err.value.code() is StatusCode.UNAVAILABLE and "keepalive" in err.value.details()


@pytest.mark.parametrize(
    ("garbage", "said"),
    [
        (b"\xff\xff\xff" + b"\x00" * 60, "frame"),  # a 16 MB frame header: above our limit
        (b"\x00\x00\x02\x08\x00\x00\x00\x00\x00\x00\x01", "FRAME_SIZE_ERROR"),  # a 2-byte WINDOW_UPDATE
        (b"\x00\x00\x00\x09\x04\x00\x00\x00\x01", "CONTINUATION without HEADERS"),
        (b"\x00\x00\x06\x04\x00\x00\x00\x00\x00" + b"\x00\x05\x00\x00\x00\x00", "SETTINGS_MAX_FRAME_SIZE"),
        (b"\x00\x00\x04\x08\x00\x00\x00\x00\x00" + b"\x00\x00\x00\x00", "WINDOW_UPDATE of 0"),
    ],
)
async def test_a_peer_speaking_garbage_fails_the_stream_and_closes_the_connection(garbage: bytes, said: str) -> None:
    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read(100)
        writer.write(garbage)
        await writer.drain()
        await asyncio.sleep(1)

    async with raw_server(answer) as port:
        conn = await connect(port)
        stream = conn.open("/test.T/Call", (), 1 << 20)
        with pytest.raises(RpcError) as err:
            await asyncio.wait_for(stream.read_batch(), 5)
    assert err.value.code() is StatusCode.INTERNAL and said in err.value.details()
    assert not conn.usable


async def test_a_plain_http_answer_is_not_taken_for_grpc() -> None:
    # a web server on the gNMI port: its HTTP/2 answer is a 404 page, not a gRPC stream
    def h2_frame(kind: int, flags: int, sid: int, payload: bytes) -> bytes:
        return struct.pack(">I", len(payload))[1:] + bytes((kind, flags)) + struct.pack(">I", sid) + payload

    async def web(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read(1000)
        block = grpc_h2.encode_headers([(":status", "404"), ("content-type", "text/html")])
        writer.write(h2_frame(4, 0, 0, b"") + h2_frame(1, 0x4 | 0x1, 1, block))
        await writer.drain()
        await asyncio.sleep(1)

    async with raw_server(web) as port:
        stream = await call(port)
        with pytest.raises(RpcError) as err:
            await asyncio.wait_for(read_all(stream), 5)
    assert err.value.code() is StatusCode.UNIMPLEMENTED and "404" in err.value.details()


# --- a second HTTP/2 stack: grpclib's server on python-hyper's h2 -----------------------------


@contextlib.asynccontextmanager
async def grpclib_server(handler: Callable[[Any], Awaitable[None]]) -> AsyncIterator[int]:
    """A grpclib server (another HTTP/2 and HPACK implementation than C-core's) serving /test.T/Call."""
    from grpclib.const import Cardinality, Handler
    from grpclib.encoding.base import CodecBase
    from grpclib.server import Server

    class Raw(CodecBase):
        __content_subtype__ = "proto"

        def encode(self, message: bytes, message_type: Any) -> bytes:
            return message

        def decode(self, data: bytes, message_type: Any) -> bytes:
            return data

    class Service:
        def __mapping__(self) -> dict[str, Any]:
            return {"/test.T/Call": Handler(handler, Cardinality.STREAM_STREAM, bytes, bytes)}

    server = Server([Service()], codec=Raw())
    await server.start("127.0.0.1", 0)
    try:
        listening = server._server
        assert isinstance(listening, asyncio.Server)
        yield listening.sockets[0].getsockname()[1]
    finally:
        server.close()
        await server.wait_closed()


async def test_a_second_http2_implementation_is_understood_messages_statuses_and_metadata() -> None:
    from grpclib.const import Status
    from grpclib.exceptions import GRPCError

    seen: list[tuple[str, str]] = []

    async def handler(stream: Any) -> None:
        seen.extend((k, v) for k, v in stream.metadata.items() if k == "username")
        request = await stream.recv_message()
        if request == b"refuse":
            raise GRPCError(Status.UNAUTHENTICATED, "bad password ✓")  # before any message: Trailers-Only
        for i in range(100):
            await stream.send_message(b"m%d-" % i + request * 50)
        await stream.send_message(b"x" * 100_000)  # across 16 KB frames
        await stream.send_trailing_metadata(status=Status.PERMISSION_DENIED, status_message="nope: 100% ✓")

    async with grpclib_server(handler) as port:
        stream = await call(port, metadata=(("username", "ops"),))
        await stream.write(b"hello")
        got: list[bytes] = []
        with pytest.raises(RpcError) as err:
            while batch := await stream.read_batch():
                got += batch
        refused = await call(port)
        await refused.write(b"refuse")
        with pytest.raises(RpcError) as refusal:
            await read_all(refused)
    assert [g[:10] for g in got[:2]] == [b"m0-hellohe", b"m1-hellohe"] and len(got) == 101
    assert got[-1] == b"x" * 100_000
    assert (err.value.code(), err.value.details()) == (StatusCode.PERMISSION_DENIED, "nope: 100% ✓")
    assert (refusal.value.code(), refusal.value.details()) == (StatusCode.UNAUTHENTICATED, "bad password ✓")
    assert seen == [("username", "ops")]

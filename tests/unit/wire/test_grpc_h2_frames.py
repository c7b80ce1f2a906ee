"""HTTP/2 framing of wire/grpc_h2.py, whatever the socket's reads cut: pure logic, hypothesis.

A peer's bytes (padded DATA, messages across frames, several messages in one frame, HPACK
headers with Huffman strings and dynamic-table entries, trailers) are fed to the connection
cut at arbitrary points, as TCP may deliver them; the messages and the status must not change.
"""

from __future__ import annotations

import asyncio
import struct

import hpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wire import grpc_h2
from wire import h2_frames as h2


class _Transport(asyncio.Transport):
    def __init__(self) -> None:
        super().__init__()
        self.written = bytearray()
        self.closed = False

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.written += data

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True


def _frame(kind: int, flags: int, sid: int, payload: bytes) -> bytes:
    return struct.pack(">I", len(payload))[1:] + bytes((kind, flags)) + struct.pack(">I", sid) + payload


def _peer_bytes(messages: list[bytes], frame_size: int, pad: int) -> bytes:
    """What a gRPC server sends for one stream: headers, ``messages`` in DATA frames, OK trailers."""
    enc = hpack.Encoder()  # Huffman and indexing: the decoder's dynamic table is exercised
    body = b"".join(grpc_h2.grpc_message(m) for m in messages)
    out = _frame(h2.SETTINGS, 0, 0, b"")
    out += _frame(h2.HEADERS, h2.END_HEADERS, 1, enc.encode([(":status", "200"), ("content-type", "application/grpc")]))
    for i in range(0, len(body), frame_size):
        chunk = body[i : i + frame_size]
        if pad:
            out += _frame(h2.DATA, h2.PADDED, 1, bytes((pad,)) + chunk + b"\x00" * pad)
        else:
            out += _frame(h2.DATA, 0, 1, chunk)
    trailers = enc.encode([("grpc-status", "0"), ("grpc-message", "")])
    return out + _frame(h2.HEADERS, h2.END_HEADERS | h2.END_STREAM, 1, trailers)


async def _receive(data: bytes, cuts: list[int]) -> list[bytes]:
    conn = grpc_h2.Connection("127.0.0.1:1", tls=False, keepalive_s=0, keepalive_timeout_s=1)
    conn.connection_made(_Transport())
    stream = conn.open("/x.Y/Z", (), 1 << 24)
    prev = 0
    for cut in [*sorted({c % (len(data) + 1) for c in cuts}), len(data)]:
        conn.data_received(data[prev:cut])
        prev = cut
    out: list[bytes] = []
    while batch := await stream.read_batch():
        out += batch
    return out


@settings(max_examples=200, deadline=None)
@given(
    messages=st.lists(st.binary(max_size=3000), min_size=1, max_size=8),
    frame_size=st.integers(1, 5000),
    pad=st.integers(0, 20),
    cuts=st.lists(st.integers(0, 1 << 20), max_size=30),
)
def test_messages_survive_any_framing_and_any_cut(
    messages: list[bytes], frame_size: int, pad: int, cuts: list[int]
) -> None:
    data = _peer_bytes(messages, frame_size, pad)
    assert asyncio.run(_receive(data, cuts)) == messages


@given(
    headers=st.lists(
        st.tuples(st.from_regex(r"[a-z][a-z0-9-]{0,40}", fullmatch=True), st.text(max_size=300)), max_size=10
    )
)
def test_our_header_encoding_is_what_an_hpack_decoder_reads(headers: list[tuple[str, str]]) -> None:
    decoded = hpack.Decoder().decode(grpc_h2.encode_headers(headers), raw=True)
    assert [(k.decode(), v.decode()) for k, v in decoded] == headers


def test_a_stream_ending_inside_a_message_is_an_error_not_a_short_read() -> None:
    enc = hpack.Encoder()
    data = _frame(h2.HEADERS, h2.END_HEADERS, 1, enc.encode([(":status", "200"), ("content-type", "application/grpc")]))
    data += _frame(h2.DATA, 0, 1, grpc_h2.grpc_message(b"x" * 100)[:60])  # the prefix says 100 bytes
    data += _frame(h2.HEADERS, h2.END_HEADERS | h2.END_STREAM, 1, enc.encode([("grpc-status", "0")]))
    with pytest.raises(grpc_h2.RpcError) as err:
        asyncio.run(_receive(data, []))
    assert err.value.code() is grpc_h2.StatusCode.INTERNAL and "inside a message" in err.value.details()


def test_window_is_given_back_only_as_the_reader_takes_messages() -> None:
    async def run() -> tuple[int, int]:
        conn = grpc_h2.Connection("127.0.0.1:1", tls=False, keepalive_s=0, keepalive_timeout_s=1)
        transport = _Transport()
        conn.connection_made(transport)
        stream = conn.open("/x.Y/Z", (), 1 << 24)
        ok = hpack.Encoder().encode([(":status", "200"), ("content-type", "application/grpc")])
        conn.data_received(_frame(h2.HEADERS, h2.END_HEADERS, 1, ok))
        start = len(transport.written)
        body = grpc_h2.grpc_message(b"y" * 1_000_000)
        for _ in range(4):  # 4 MB: past the lump in which the stream's window is returned
            conn.data_received(b"".join(_frame(h2.DATA, 0, 1, body[i : i + 16384]) for i in range(0, len(body), 16384)))
        before = len(transport.written) - start  # received, not read: nothing given back yet
        assert len(await stream.read_batch()) == 4
        return before, len(transport.written) - start

    before, after = asyncio.run(run())
    assert before == 0 and after > 0

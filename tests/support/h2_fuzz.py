"""What the HTTP/2 client's fuzz tests share: a connection fed a peer's bytes, its bounds, hostile seeds.

Used by tests/unit/wire/test_grpc_h2_fuzz.py. ``python -m tests.support.h2_fuzz`` writes the seed
corpus (:data:`SEEDS`: what a server sends after our preface) to tests/fixtures/fuzz/h2/; a
failing input found later goes there too, as a ``.bin`` file.

The connection runs over :class:`BufferTransport`, the network's edge: it keeps what the client
writes and, past :data:`HIGH_WATER` bytes, says ``pause_writing`` and never resumes: a peer that
does not read, the case in which replies must not pile up.
"""

from __future__ import annotations

import asyncio
import contextlib
import struct
import sys
from pathlib import Path

import hpack

from wire import grpc_h2
from wire import h2_frames as h2
from wire.grpc_h2_stream import STREAM_WINDOW
from wire.h2_frames import frame, grpc_message

CORPUS = Path(__file__).resolve().parents[1] / "fixtures" / "fuzz" / "h2"
HIGH_WATER = 4096
#: What the client may write beyond HIGH_WATER while paused: its own frames (GOAWAY, RST_STREAM,
#: WINDOW_UPDATE, the HEADERS of the streams the harness opens), never replies to the peer.
WRITE_SLACK = 4096
STREAMS = 3  # opened before the peer's bytes: ids 1, 3, 5 (5 skips oversize messages)
MAX_MESSAGE = 1 << 16


class BufferTransport(asyncio.Transport):
    """A transport whose peer never reads: writes are kept, and past HIGH_WATER it pauses for good."""

    def __init__(self, protocol: asyncio.Protocol) -> None:
        super().__init__()
        self.written = bytearray()
        self.closed = False
        self.paused = False
        self._protocol = protocol

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.written += data
        if not self.paused and len(self.written) > HIGH_WATER:
            self.paused = True
            self._protocol.pause_writing()

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True

    def abort(self) -> None:
        self.closed = True

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def get_extra_info(self, name: str, default: object = None) -> object:
        return default


class Harness:
    """A connection with :data:`STREAMS` streams open, fed a peer's bytes; :meth:`check` asserts its bounds."""

    def __init__(self) -> None:
        self.conn = grpc_h2.Connection("127.0.0.1:1", tls=False, keepalive_s=0, keepalive_timeout_s=1)
        self.transport = BufferTransport(self.conn)
        self.conn.connection_made(self.transport)
        self.streams = [self.conn.open("/gnmi.gNMI/Subscribe", (), MAX_MESSAGE) for _ in range(STREAMS - 1)]
        self.streams.append(self.conn.open("/gnmi.gNMI/Subscribe", (), MAX_MESSAGE, skip_oversize=True))
        self.received: list[bytes] = []

    def feed(self, data: bytes) -> None:
        self.conn.data_received(data)  # must never raise
        self.check()

    async def read(self) -> None:
        """Take what every stream has (an error must be RpcError); no waiting."""
        for stream in self.streams:
            if stream.queued or stream._error is not None or stream._ended:
                with contextlib.suppress(grpc_h2.RpcError):
                    self.received += await stream.read_batch()
        self.check()

    def check(self) -> None:
        conn = self.conn
        closed = conn._closed
        assert closed is None or grpc_h2.BUG not in closed.details(), closed.details()
        assert conn.control_queued <= grpc_h2.MAX_CONTROL_REPLIES
        assert conn.buffered <= 9 + grpc_h2.MAX_FRAME + grpc_h2.MAX_HEADER_BYTES
        for stream in self.streams:
            assert stream.queued <= grpc_h2.MAX_QUEUED_MESSAGES
            assert stream.buffered <= MAX_MESSAGE
            assert stream.recv_used <= STREAM_WINDOW or stream._error is not None
        assert len(self.transport.written) <= HIGH_WATER + WRITE_SLACK, len(self.transport.written)


async def run(chunks: list[bytes]) -> Harness:
    """Feed ``chunks`` one socket read at a time, the streams read between them."""
    harness = Harness()
    for chunk in chunks:
        harness.feed(chunk)
        await harness.read()
    return harness


# --- seeds -------------------------------------------------------------------------------------


def _ok(enc: hpack.Encoder) -> bytes:
    return bytes(enc.encode([(":status", "200"), ("content-type", "application/grpc"), ("server", "switch")]))


def _trailers(enc: hpack.Encoder, status: str = "0") -> bytes:
    return bytes(enc.encode([("grpc-status", status), ("grpc-message", "done%20%E2%9C%93")]))


def _response(sid: int, enc: hpack.Encoder, messages: list[bytes]) -> bytes:
    body = b"".join(grpc_message(m) for m in messages)
    out = frame(h2.HEADERS, h2.END_HEADERS, sid, _ok(enc))
    out += b"".join(frame(h2.DATA, 0, sid, body[i : i + 700]) for i in range(0, len(body), 700))
    return out + frame(h2.HEADERS, h2.END_HEADERS | h2.END_STREAM, sid, _trailers(enc))


def _seeds() -> dict[str, bytes]:
    enc = hpack.Encoder()
    settings = frame(h2.SETTINGS, 0, 0, struct.pack(">HIHI", h2.S_MAX_CONCURRENT, 100, h2.S_INITIAL_WINDOW, 1 << 20))
    notes = [bytes([i]) * (40 + i * 37) for i in range(12)]
    seeds = {
        "ok-three-streams": settings + _response(1, enc, notes) + _response(3, enc, notes[:3]) + _response(5, enc, []),
        "padded-and-priority": settings
        + frame(
            h2.HEADERS,
            h2.END_HEADERS | h2.PADDED | h2.PRIORITY_FLAG,
            1,
            b"\x03" + b"\x00\x00\x00\x03\x10" + _ok(enc) + b"\x00" * 3,
        )
        + frame(h2.DATA, h2.PADDED, 1, b"\x05" + grpc_message(b"padded") + b"\x00" * 5)
        + frame(h2.PRIORITY, 0, 3, b"\x00\x00\x00\x01\x20")
        + frame(h2.HEADERS, h2.END_HEADERS | h2.END_STREAM, 1, _trailers(enc)),
        "continuation-split": settings
        + frame(h2.HEADERS, 0, 1, _ok(enc)[:3])
        + frame(h2.CONTINUATION, 0, 1, _ok(enc)[3:])
        + frame(h2.CONTINUATION, h2.END_HEADERS, 1, b"")
        + frame(h2.DATA, 0, 1, grpc_message(b"after continuation")),
        "continuation-flood": settings + frame(h2.HEADERS, 0, 1, _ok(enc)) + frame(h2.CONTINUATION, 0, 1) * 400,
        "ping-flood": settings + frame(h2.PING, 0, 0, b"floodnow") * 3000,
        "settings-flood": frame(h2.SETTINGS, 0, 0, struct.pack(">HI", h2.S_INITIAL_WINDOW, 70_000)) * 3000,
        "ping-acks-unsolicited": frame(h2.PING, h2.ACK, 0, b"notyours") * 50 + frame(h2.PING, 0, 0, b"x" * 16_384),
        "window-overflow": settings
        + frame(h2.WINDOW_UPDATE, 0, 1, struct.pack(">I", h2.MAX_WINDOW - 1_000_000))
        + frame(h2.SETTINGS, 0, 0, struct.pack(">HI", h2.S_INITIAL_WINDOW, h2.MAX_WINDOW)),
        "window-update-zero": settings + frame(h2.WINDOW_UPDATE, 0, 3, b"\x00\x00\x00\x00"),
        "data-on-idle-and-zero": settings + frame(h2.DATA, 0, 9, b"idle") + frame(h2.DATA, 0, 0, b"zero"),
        "data-before-headers": settings + frame(h2.DATA, 0, 1, grpc_message(b"early")) + _response(3, enc, notes),
        "bad-statuses": settings
        + frame(h2.HEADERS, h2.END_HEADERS, 1, bytes(enc.encode([(":status", "²00")])))
        + frame(
            h2.HEADERS,
            h2.END_HEADERS | h2.END_STREAM,
            3,
            bytes(enc.encode([(":status", "200"), ("content-type", "application/grpc"), ("grpc-status", "²")])),
        )
        + frame(h2.HEADERS, h2.END_HEADERS, 5, bytes(enc.encode([(":status", "404")]))),
        "oversize-message": settings
        + frame(h2.HEADERS, h2.END_HEADERS, 5, _ok(enc))
        + frame(h2.DATA, 0, 5, b"\x00" + struct.pack(">I", MAX_MESSAGE * 4) + b"z" * 16_000)
        + frame(h2.HEADERS, h2.END_HEADERS, 1, _ok(enc))
        + frame(h2.DATA, 0, 1, b"\x00" + struct.pack(">I", MAX_MESSAGE * 4) + b"z" * 100),
        "compressed-flag": settings
        + frame(h2.HEADERS, h2.END_HEADERS, 1, _ok(enc))
        + frame(h2.DATA, 0, 1, b"\x01\x00\x00\x00\x01x"),
        "tiny-messages": settings
        + frame(h2.HEADERS, h2.END_HEADERS, 1, _ok(enc))
        + frame(h2.DATA, 0, 1, grpc_message(b"") * 3000),
        "rst-and-goaway": settings
        + frame(h2.RST_STREAM, 0, 1, struct.pack(">I", h2.REFUSED_STREAM))
        + frame(h2.GOAWAY, 0, 0, struct.pack(">II", 3, h2.ENHANCE_YOUR_CALM) + b"too_many_pings" * 100),
        "push-promise": settings + frame(h2.PUSH_PROMISE, h2.END_HEADERS, 1, b"\x00\x00\x00\x02" + _ok(enc)),
        "hpack-garbage": settings + frame(h2.HEADERS, h2.END_HEADERS, 1, b"\xff\xff\xff\xff\x0f" + b"\x80" * 20),
        "hpack-table-bomb": settings
        + frame(h2.HEADERS, h2.END_HEADERS, 1, b"\x40\x01x\x7f\xa1\x1e" + b"v" * 4000 + b"\xbe" * 9000),
        "unknown-types": settings + b"".join(frame(t, 0xFF, 1, bytes([t]) * 10) for t in range(10, 40)),
    }
    return seeds


SEEDS = _seeds()


def corpus() -> dict[str, bytes]:
    """The corpus on disk: the seeds as written, and any input a failure left there."""
    return {p.stem: p.read_bytes() for p in sorted(CORPUS.glob("*.bin"))}


def main() -> None:
    CORPUS.mkdir(parents=True, exist_ok=True)
    for name, data in SEEDS.items():
        (CORPUS / f"{name}.bin").write_bytes(data)
    print(f"{len(SEEDS)} seeds in {CORPUS}", file=sys.stderr)


if __name__ == "__main__":
    main()

"""HTTP/2 framing (RFC 9113) as :mod:`wire.grpc_h2` writes and checks it: constants, frames, our
HPACK literals, gRPC's length prefix, and the connection error a peer's fault ends in."""

from __future__ import annotations

import struct
from collections.abc import Sequence

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
DATA, HEADERS, PRIORITY, RST_STREAM, SETTINGS, PUSH_PROMISE, PING, GOAWAY, WINDOW_UPDATE, CONTINUATION = range(10)
END_STREAM, ACK, END_HEADERS, PADDED, PRIORITY_FLAG = 0x1, 0x1, 0x4, 0x8, 0x20
S_HEADER_TABLE_SIZE, S_ENABLE_PUSH, S_MAX_CONCURRENT, S_INITIAL_WINDOW, S_MAX_FRAME, S_MAX_HEADER_LIST = range(1, 7)

# Error codes (RFC 9113 §7)
NO_ERROR, PROTOCOL_ERROR, INTERNAL_ERROR, FLOW_CONTROL_ERROR, SETTINGS_TIMEOUT, STREAM_CLOSED = range(6)
FRAME_SIZE_ERROR, REFUSED_STREAM, CANCEL, COMPRESSION_ERROR, CONNECT_ERROR, ENHANCE_YOUR_CALM = range(6, 12)
INADEQUATE_SECURITY, HTTP_1_1_REQUIRED = 0xC, 0xD
ERROR_NAME = {
    0x0: "NO_ERROR", 0x1: "PROTOCOL_ERROR", 0x2: "INTERNAL_ERROR", 0x3: "FLOW_CONTROL_ERROR",
    0x4: "SETTINGS_TIMEOUT", 0x5: "STREAM_CLOSED", 0x6: "FRAME_SIZE_ERROR", 0x7: "REFUSED_STREAM",
    0x8: "CANCEL", 0x9: "COMPRESSION_ERROR", 0xA: "CONNECT_ERROR", 0xB: "ENHANCE_YOUR_CALM",
    0xC: "INADEQUATE_SECURITY", 0xD: "HTTP_1_1_REQUIRED",
}  # fmt: skip

DEFAULT_WINDOW = 65_535
MAX_WINDOW = (1 << 31) - 1
UINT32 = struct.Struct(">I")


def error_name(code: int) -> str:
    """An HTTP/2 error code's name (``error 0x..`` for one RFC 9113 does not name)."""
    return ERROR_NAME.get(code, f"error {code:#x}")


class ProtocolError(Exception):
    """The peer broke HTTP/2: the connection ends (every stream INTERNAL) with GOAWAY ``code``."""

    def __init__(self, why: str, code: int = PROTOCOL_ERROR) -> None:
        super().__init__(why)
        self.code = code


def frame(kind: int, flags: int, stream_id: int, payload: bytes = b"") -> bytes:
    """One HTTP/2 frame."""
    n = len(payload)
    return bytes((n >> 16, (n >> 8) & 0xFF, n & 0xFF, kind, flags)) + UINT32.pack(stream_id & MAX_WINDOW) + payload


def grpc_message(payload: bytes) -> bytes:
    """gRPC's length-prefixed message (uncompressed)."""
    return b"\x00" + UINT32.pack(len(payload)) + payload


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

"""Our HTTP/2 frame reader (wire/grpc_h2.py) beside python-hyper's ``h2``, on the same bytes.

The bytes are what a gNMI server sends on one stream: HEADERS, then gRPC messages of
``MESSAGE_BYTES`` (a Notification per interface) packed in 16 KiB DATA frames, then trailers,
handed over in 64 KiB socket reads. Each reader ends with the messages as ``bytes`` and the
window given back, the work the collector needs from it:

* ``ours``: :meth:`wire.grpc_h2.Connection.data_received` and :meth:`Stream.read_batch`;
* ``h2``: ``H2Connection.receive_data`` (client side, our window settings), its events, window
  acknowledged per DATA frame, and gRPC's 5-byte prefixes split in Python as ours splits them;
* ``h2_frames_only``: ``receive_data`` and its events alone, no message split: the library's
  floor, what it would cost if splitting were free.

Exit criterion (docs/benchmarks.md): if a library's reader comes within 1.3x of ours
(``h2 / ours <= 1.3``), return to it: our client is kept only while it is clearly cheaper.
"""

from __future__ import annotations

import asyncio
import struct
import time
from typing import Any

import h2.config
import h2.connection
import h2.events
import h2.settings
import hpack

from wire import grpc_h2
from wire import h2_frames as frames
from wire.h2_frames import frame, grpc_message

MESSAGE_BYTES = 1_500
MESSAGES = 40_000
READ_BYTES = 64 << 10
REPEATS = 5


def server_bytes(messages: int = MESSAGES, size: int = MESSAGE_BYTES) -> bytes:
    """A gRPC server's answer on stream 1 (after its SETTINGS): HEADERS, DATA, trailers."""
    enc = hpack.Encoder()
    body = b"".join(grpc_message(bytes([i % 251]) * size) for i in range(messages))
    out = frame(frames.SETTINGS, 0, 0) + frame(frames.SETTINGS, frames.ACK, 0)
    out += frame(
        frames.HEADERS, frames.END_HEADERS, 1, enc.encode([(":status", "200"), ("content-type", "application/grpc")])
    )
    out += b"".join(frame(frames.DATA, 0, 1, body[i : i + 16_384]) for i in range(0, len(body), 16_384))
    return out + frame(frames.HEADERS, frames.END_HEADERS | frames.END_STREAM, 1, enc.encode([("grpc-status", "0")]))


def reads(data: bytes) -> list[bytes]:
    return [data[i : i + READ_BYTES] for i in range(0, len(data), READ_BYTES)]


class _Sink(asyncio.Transport):
    def write(self, data: Any) -> None:
        pass

    def is_closing(self) -> bool:
        return False

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return default


async def _ours(chunks: list[bytes]) -> tuple[float, int]:
    conn = grpc_h2.Connection("127.0.0.1:1", tls=False, keepalive_s=0, keepalive_timeout_s=1)
    conn.connection_made(_Sink())
    stream = conn.open("/gnmi.gNMI/Subscribe", ())
    got = 0
    t0 = time.process_time()
    for chunk in chunks:
        conn.data_received(chunk)
        if stream.queued:
            got += len(await stream.read_batch())
    elapsed = time.process_time() - t0
    assert await stream.read_batch() == []
    return elapsed, got


def _h2(chunks: list[bytes], *, split: bool) -> tuple[float, int]:
    conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, header_encoding=None))
    conn.initiate_connection()
    conn.update_settings({h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: grpc_h2.STREAM_WINDOW,
                          h2.settings.SettingCodes.MAX_FRAME_SIZE: grpc_h2.MAX_FRAME})  # fmt: skip
    conn.increment_flow_control_window(grpc_h2.CONNECTION_WINDOW - 65_535)
    sid = conn.get_next_available_stream_id()
    conn.send_headers(sid, [(":method", "POST"), (":scheme", "http"), (":path", "/gnmi.gNMI/Subscribe"),
                            (":authority", "x"), ("content-type", "application/grpc"), ("te", "trailers")])  # fmt: skip
    conn.data_to_send()
    buf, need, got, ended = bytearray(), -1, 0, False
    t0 = time.process_time()
    for chunk in chunks:
        for event in conn.receive_data(chunk):
            if isinstance(event, h2.events.DataReceived):
                conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
                if not split:
                    continue
                data, pos, end = event.data, 0, len(event.data)
                while pos < end:  # gRPC's messages out of the frame, as wire/grpc_h2_stream.py does
                    if need < 0:
                        take = min(5 - len(buf), end - pos)
                        buf += data[pos : pos + take]
                        pos += take
                        if len(buf) < 5:
                            break
                        need = struct.unpack_from(">I", buf, 1)[0]
                        buf.clear()
                        continue
                    if not buf and end - pos >= need:
                        _ = bytes(data[pos : pos + need])
                        pos += need
                        need, got = -1, got + 1
                        continue
                    take = min(need - len(buf), end - pos)
                    buf += data[pos : pos + take]
                    pos += take
                    if len(buf) == need:
                        _ = bytes(buf)
                        buf.clear()
                        need, got = -1, got + 1
            elif isinstance(event, h2.events.StreamEnded):
                ended = True
        conn.data_to_send()
    elapsed = time.process_time() - t0
    assert ended
    return elapsed, got


def measure() -> dict[str, Any]:
    data = server_bytes()
    chunks = reads(data)
    best: dict[str, float] = {}
    for _ in range(REPEATS):
        runs = {
            "ours": asyncio.run(_ours(chunks)),
            "h2": _h2(chunks, split=True),
            "h2_frames_only": _h2(chunks, split=False),
        }
        for name, (elapsed, got) in runs.items():
            assert name == "h2_frames_only" or got == MESSAGES, (name, got)
            best[name] = min(best.get(name, elapsed), elapsed)
    out: dict[str, Any] = {
        "messages": MESSAGES,
        "message_bytes": MESSAGE_BYTES,
        "stream_mb": round(len(data) / 1e6, 1),
        "read_bytes": READ_BYTES,
    }
    for name, seconds in best.items():
        out[f"{name}_us_per_message"] = round(seconds / MESSAGES * 1e6, 3)
        out[f"{name}_mb_per_cpu_s"] = round(len(data) / 1e6 / seconds, 1)
    out["h2_over_ours"] = round(best["h2"] / best["ours"], 2)
    out["h2_frames_only_over_ours"] = round(best["h2_frames_only"] / best["ours"], 2)
    out["return_to_library"] = out["h2_over_ours"] <= 1.3  # the exit criterion
    return out


async def run(dsn: str) -> dict[str, Any]:
    """``python -m bench h2_reader`` (needs no database)."""
    return await asyncio.to_thread(measure)


if __name__ == "__main__":
    import json

    print(json.dumps(measure(), indent=2))

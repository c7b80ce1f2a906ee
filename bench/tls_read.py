"""Our TLS read path (wire/tls_layer.py) beside asyncio's (``asyncio.sslproto``), on the same records.

What a gNMI server sends over TLS on one stream: its SETTINGS and the response's HEADERS, then
one gRPC message of ``MESSAGE_BYTES`` per DATA frame, each written on its own, so one TLS record
per message (as a gRPC server writes a message at a time). The client gets them
``records_per_read`` records per socket read: 1 (read as it comes), 20 and 200 (read coalescing:
20 ms of a connection carrying 1K or 10K messages/s). Each client ends with the messages as
``bytes`` (:class:`wire.grpc_h2.Connection` and :meth:`Stream.read_batch`):

* ``plaintext``: the same frames without TLS, the same messages per read;
* ``ours``: :class:`wire.tls_layer.TlsLayer`, given each read as ``recv_into`` leaves it;
* ``asyncio``: ``asyncio.sslproto.SSLProtocol`` (what ``create_connection(ssl=...)`` runs), fed
  the same way.

No socket here: this is the read path's CPU in userland, what one read and one record cost; the
wake-ups that read coalescing saves (asyncio's TLS kept reading the socket while paused) are in
``bench/gnmi_collector.py``. ``python -m bench tls_read`` (no database needed).
"""

from __future__ import annotations

import asyncio
import ssl
import tempfile
import time
from asyncio import sslproto
from collections.abc import Callable
from pathlib import Path
from typing import Any

import hpack

from simulator.sim_tls import prepare
from wire import grpc_h2
from wire import h2_frames as frames
from wire.h2_frames import frame, grpc_message
from wire.tls_layer import TlsLayer

MESSAGE_BYTES = 1_500
MESSAGES = 20_000
RECORDS_PER_READ = (1, 20, 200)
REPEATS = 5


class _Capture(asyncio.Transport):
    """The socket transport's side: what the client writes is kept (the handshake) or dropped."""

    def __init__(self) -> None:
        super().__init__()
        self.out = bytearray()

    def write(self, data: Any) -> None:
        self.out += data

    def is_closing(self) -> bool:
        return False

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return default

    def get_write_buffer_size(self) -> int:
        return 0

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


def _feed(proto: asyncio.BufferedProtocol, data: bytes) -> None:
    """``data`` as the socket transport hands it: copied into the protocol's buffer, then announced."""
    pos = 0
    while pos < len(data):
        buf = memoryview(proto.get_buffer(len(data) - pos))
        n = min(len(buf), len(data) - pos)
        buf[:n] = data[pos : pos + n]
        proto.buffer_updated(n)
        pos += n


def _response_frames() -> list[bytes]:
    """The server's writes: SETTINGS and HEADERS, then a DATA frame per message."""
    head = frame(frames.SETTINGS, 0, 0) + frame(
        frames.HEADERS,
        frames.END_HEADERS,
        1,
        hpack.Encoder().encode([(":status", "200"), ("content-type", "application/grpc")]),
    )
    body = [frame(frames.DATA, 0, 1, grpc_message(bytes([i % 251]) * MESSAGE_BYTES)) for i in range(MESSAGES)]
    return [head, *body]


def _grouped(writes: list[bytes], per_read: int) -> list[bytes]:
    return [b"".join(writes[i : i + per_read]) for i in range(0, len(writes), per_read)]


ClientFactory = Callable[[grpc_h2.Connection, ssl.SSLContext], asyncio.BufferedProtocol]


def _ours(conn: grpc_h2.Connection, ctx: ssl.SSLContext) -> asyncio.BufferedProtocol:
    return TlsLayer(conn, ctx, "127.0.0.1")


def _asyncio(conn: grpc_h2.Connection, ctx: ssl.SSLContext) -> asyncio.BufferedProtocol:
    loop = asyncio.get_running_loop()
    return sslproto.SSLProtocol(loop, conn, ctx, loop.create_future(), server_hostname="127.0.0.1")


async def _tls_run(factory: ClientFactory, tls: dict[str, ssl.SSLContext], writes: list[bytes], per_read: int) -> float:
    """One connection: the handshake in memory, then the records fed ``per_read`` a read; CPU seconds."""
    conn = grpc_h2.Connection("127.0.0.1:1", tls=True, keepalive_s=0, keepalive_timeout_s=1)
    client = factory(conn, tls["client"])
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    server = tls["server"].wrap_bio(incoming, outgoing, server_side=True)
    raw = _Capture()
    client.connection_made(raw)
    for _ in range(10):
        incoming.write(bytes(raw.out))
        raw.out.clear()
        try:
            server.do_handshake()
            done = True
        except ssl.SSLWantReadError:
            done = False
        if outgoing.pending:
            _feed(client, outgoing.read())
        if done:
            break
    incoming.write(bytes(raw.out))  # the client's Finished, so the server sends its tickets
    raw.out.clear()
    stream = conn.open("/gnmi.gNMI/Subscribe", ())
    records = []
    for w in writes:
        server.write(w)
        records.append(outgoing.read())
    reads = _grouped(records, per_read)
    got = 0
    t0 = time.process_time()
    for chunk in reads:
        _feed(client, chunk)
        if stream.queued:
            got += len(await stream.read_batch())
    elapsed = time.process_time() - t0
    assert got == MESSAGES, got
    return elapsed


async def _plaintext_run(writes: list[bytes], per_read: int) -> float:
    conn = grpc_h2.Connection("127.0.0.1:1", tls=False, keepalive_s=0, keepalive_timeout_s=1)
    conn.connection_made(_Capture())
    stream = conn.open("/gnmi.gNMI/Subscribe", ())
    reads = _grouped(writes, per_read)
    got = 0
    t0 = time.process_time()
    for chunk in reads:
        conn.data_received(chunk)
        if stream.queued:
            got += len(await stream.read_batch())
    elapsed = time.process_time() - t0
    assert got == MESSAGES, got
    return elapsed


async def _measure(tls: dict[str, ssl.SSLContext]) -> dict[str, Any]:
    writes = _response_frames()
    best: dict[str, float] = {}
    for _ in range(REPEATS):
        for per_read in RECORDS_PER_READ:
            runs = {
                "plaintext": await _plaintext_run(writes, per_read),
                "ours": await _tls_run(_ours, tls, writes, per_read),
                "asyncio": await _tls_run(_asyncio, tls, writes, per_read),
            }
            for name, seconds in runs.items():
                key = f"{name}_{per_read}"
                best[key] = min(best.get(key, seconds), seconds)
    out: dict[str, Any] = {"messages": MESSAGES, "message_bytes": MESSAGE_BYTES, "tls": ssl.OPENSSL_VERSION}
    for per_read in RECORDS_PER_READ:
        row = {name: round(best[f"{name}_{per_read}"] / MESSAGES * 1e6, 2) for name in ("plaintext", "ours", "asyncio")}
        row["asyncio_over_ours"] = round(row["asyncio"] / row["ours"], 2)
        row["ours_over_plaintext"] = round(row["ours"] / row["plaintext"], 2)
        out[f"us_per_message_{per_read}_records_per_read"] = row
    return out


def measure() -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="fabricmon-bench-tls-") as d:
        pki = prepare(Path(d), ("127.0.0.1",))
        server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        server.load_cert_chain(pki.cert_file, pki.key_file)
        server.set_alpn_protocols(["h2"])
        client = grpc_h2.client_ssl_context(str(pki.ca_file), None, None)
        return asyncio.run(_measure({"server": server, "client": client}))


async def run(dsn: str) -> dict[str, Any]:
    """``python -m bench tls_read`` (needs no database)."""
    del dsn
    return await asyncio.to_thread(measure)


if __name__ == "__main__":
    import json

    print(json.dumps(measure(), indent=2))

"""TLS for the HTTP/2 client over a plain socket transport, so that pausing reading pauses the socket.

asyncio's own TLS (``create_connection(ssl=...)``) goes on reading the socket while its protocol
is paused: its ``pause_reading`` only stops decryption (CPython 3.11-3.13 ``asyncio/sslproto.py``),
and the socket itself waits only once 256 KiB of ciphertext are buffered. Read coalescing
(:data:`wire.grpc_h2.COALESCE_S`) then saved the protocol's work but not the wake-ups: every server
write still cost an epoll wake-up, a ``recv`` and a BIO write, and TLS took twice plaintext's CPU
per message.

Here the TLS state is an :class:`ssl.SSLObject` over two :class:`ssl.MemoryBIO` (the public API
asyncio itself is built on): :class:`TlsLayer` is the socket transport's protocol, and
:class:`TlsTransport` is what the application protocol writes to and pauses. Its
``pause_reading`` is the socket's, so what the peer writes during a pause is read, decrypted and
handed over in one go.

Verification is the context's, as with asyncio: ``SSLContext.wrap_bio`` with ``server_hostname``
(the certificate's chain against the context's CAs, the name or IP address against its SAN).
Whatever the peer sends after the handshake (close_notify, a truncated or forged record,
garbage) ends the connection: the application protocol's ``connection_lost`` gets the reason, and
no exception leaves an event-loop callback.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import threading
from typing import Any

__all__ = ["HANDSHAKE_TIMEOUT_S", "TlsLayer", "TlsTransport"]

#: As asyncio's default ``ssl_handshake_timeout``.
HANDSHAKE_TIMEOUT_S = 60.0
#: The plaintext of one TLS record, at most (RFC 8446 §5.1): what one ``SSLObject.read`` returns.
_RECORD = 16_384
#: A socket read, at most (asyncio's own ``max_size``).
_READ_BYTES = 256 << 10
_local = threading.local()


def _read_buffer() -> memoryview:
    """This thread's socket read buffer, shared by its connections: each read is copied into its
    connection's BIO before the next (``recv_into`` then ``buffer_updated``, in one callback)."""
    view: memoryview | None = getattr(_local, "view", None)
    if view is None:
        view = _local.view = memoryview(bytearray(_READ_BYTES))
    return view


class TlsLayer(asyncio.BufferedProtocol):
    """The socket transport's protocol: TLS records in, the application protocol's bytes out.

    :attr:`handshake` completes when the handshake has (the application protocol's
    ``connection_made`` has then been called with :attr:`transport`), or fails with the
    :class:`ssl.SSLError` or :class:`OSError` that ended it.
    """

    def __init__(
        self,
        app: asyncio.Protocol,
        context: ssl.SSLContext,
        server_hostname: str,
        handshake_timeout_s: float = HANDSHAKE_TIMEOUT_S,
    ) -> None:
        self.app = app
        self._incoming, self._outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
        self.ssl = context.wrap_bio(self._incoming, self._outgoing, server_hostname=server_hostname)
        self.context = context
        self.raw: asyncio.Transport | None = None
        self.transport = TlsTransport(self)
        loop = asyncio.get_running_loop()
        self.handshake: asyncio.Future[None] = loop.create_future()
        self._timeout_s = handshake_timeout_s
        self._timer: asyncio.TimerHandle | None = None
        self._view = _read_buffer()
        self._wrapped = False  # the handshake is done
        self._app_open = False  # between the application's connection_made and connection_lost
        self._error: Exception | None = None  # why we ended the connection (for connection_lost)

    # --- asyncio.Protocol, called by the socket transport -----------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.raw = transport
        why = TimeoutError(f"no TLS handshake within {self._timeout_s:g} s")
        self._timer = asyncio.get_running_loop().call_later(self._timeout_s, self._fail_handshake, why)
        self._do_handshake()

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._view

    def buffer_updated(self, nbytes: int) -> None:
        self._incoming.write(self._view[:nbytes])
        if self._wrapped:
            self._read_app()
        else:
            self._do_handshake()

    def eof_received(self) -> bool:
        self._incoming.write_eof()  # a record cut short now fails as one (SSLEOFError), not silently
        if self._wrapped:
            self._read_app(at_eof=True)
        else:
            self._do_handshake()
        return False  # the socket transport closes; connection_lost follows

    def connection_lost(self, exc: Exception | None) -> None:
        if self._timer is not None:
            self._timer.cancel()
        if not self.handshake.done():
            self._fail_handshake(exc or ConnectionResetError("the connection closed during the TLS handshake"))
        elif self._app_open:
            self._app_open = False
            self.app.connection_lost(exc or self._error)

    def pause_writing(self) -> None:
        if self._app_open:
            self.app.pause_writing()

    def resume_writing(self) -> None:
        if self._app_open:
            self.app.resume_writing()

    # --- TLS ---------------------------------------------------------------------------------

    def _do_handshake(self) -> None:
        try:
            self.ssl.do_handshake()
        except ssl.SSLWantReadError:
            self._flush()
            return
        except (ssl.SSLError, OSError) as exc:  # a refused certificate or name, a peer not speaking TLS
            self._flush()  # our alert, if any
            self._fail_handshake(exc)
            return
        self._flush()
        if self._timer is not None:
            self._timer.cancel()
        if self.handshake.done():  # cancelled by the caller meanwhile
            return
        self.handshake.set_result(None)
        self._wrapped = self._app_open = True
        self.app.connection_made(self.transport)
        self._read_app()  # what came with the handshake's last flight (the server's SETTINGS)

    def _fail_handshake(self, exc: BaseException) -> None:
        if not self.handshake.done():
            self.handshake.set_exception(exc)
        if self.raw is not None:
            self.raw.abort()

    def _read_app(self, *, at_eof: bool = False) -> None:
        """Decrypt every whole record there is and hand the application one chunk."""
        chunks: list[bytes] = []
        error: Exception | None = None
        closed = False
        incoming, tls = self._incoming, self.ssl
        try:
            # Only while bytes wait: the read that finds none raises SSLWantReadError, which costs
            # more than the record (OpenSSL reads a record's header, then exactly its body).
            while incoming.pending or tls.pending() or at_eof:
                chunk = tls.read(_RECORD)
                if not chunk:  # the peer's close_notify
                    closed = True
                    break
                chunks.append(chunk)
        except ssl.SSLWantReadError:
            pass
        except ssl.SSLZeroReturnError:
            closed = True
        except (ssl.SSLError, OSError) as exc:  # a forged or garbled record, a truncated one at EOF
            error = exc
        self._flush()  # what reading wrote (a KeyUpdate's answer, an alert)
        if chunks and self._app_open:
            self.app.data_received(chunks[0] if len(chunks) == 1 else b"".join(chunks))
        if error is not None:
            self._error = error
            self.transport.abort()
        elif closed:
            self._error = ConnectionResetError("the peer closed TLS (close_notify)")
            self.transport.close()

    def write(self, data: bytes | bytearray | memoryview) -> None:
        """Encrypt ``data`` and write it to the socket."""
        if self.raw is None or self.raw.is_closing():
            return
        try:
            self.ssl.write(data)
        except ssl.SSLError as exc:  # SSLWantReadError: a renegotiation, which gRPC peers never start
            self._error = exc
            self.raw.abort()
            return
        self._flush()

    def close(self) -> None:
        """Our close_notify, then the socket's close (after what is buffered is written)."""
        if self.raw is None or self.raw.is_closing():
            return
        if self._wrapped:
            with contextlib.suppress(ssl.SSLError):  # SSLWantReadError: the peer's close_notify, not awaited
                self.ssl.unwrap()
            self._flush()
        self.raw.close()

    def _flush(self) -> None:
        if self._outgoing.pending and self.raw is not None and not self.raw.is_closing():
            self.raw.write(self._outgoing.read())


class TlsTransport(asyncio.Transport):
    """What the application protocol sees: writes encrypted, reading paused at the socket."""

    def __init__(self, layer: TlsLayer) -> None:
        super().__init__()
        self._layer = layer

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        layer = self._layer
        if name == "ssl_object":
            return layer.ssl
        if name == "sslcontext":
            return layer.context
        if name == "peercert":
            return layer.ssl.getpeercert()
        if name == "cipher":
            return layer.ssl.cipher()
        return layer.raw.get_extra_info(name, default) if layer.raw is not None else default

    def is_closing(self) -> bool:
        return self._layer.raw is None or self._layer.raw.is_closing()

    def close(self) -> None:
        self._layer.close()

    def abort(self) -> None:
        if self._layer.raw is not None:
            self._layer.raw.abort()

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self._layer.write(data)

    def pause_reading(self) -> None:
        if self._layer.raw is not None:
            self._layer.raw.pause_reading()

    def resume_reading(self) -> None:
        if self._layer.raw is not None:
            self._layer.raw.resume_reading()

    def is_reading(self) -> bool:
        return self._layer.raw is not None and self._layer.raw.is_reading()

    def get_write_buffer_size(self) -> int:
        return self._layer.raw.get_write_buffer_size() if self._layer.raw is not None else 0

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        if self._layer.raw is not None:
            self._layer.raw.set_write_buffer_limits(high, low)

    def can_write_eof(self) -> bool:
        return False

    def set_protocol(self, protocol: asyncio.BaseProtocol) -> None:
        assert isinstance(protocol, asyncio.Protocol)
        self._layer.app = protocol

    def get_protocol(self) -> asyncio.BaseProtocol:
        return self._layer.app

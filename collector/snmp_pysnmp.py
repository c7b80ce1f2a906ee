"""The pysnmp codec: every SNMP version and USM setting, with contexts; slower than gufo-snmp.

pysnmp 7's asyncio high-level API with numeric OIDs and ``lookupMib=False`` (MIB lookups cost
3x); multi-column GETBULK walks through :func:`collector.snmp_walk.walk_columns`.

Engines are shared: one pysnmp ``SnmpEngine`` (one UDP socket) per distinct credential set,
so thousands of targets cost a handful of engines. They cannot all share one engine because
pysnmp's configuration keys USM users by name alone: two targets with the same user name
and different keys would overwrite each other's keys.

pysnmp drops datagrams it cannot parse without telling the caller; the engine's transport
here checks each datagram's outer BER frame first and reports garbage for the target(s)
waiting on that address (:class:`CheckedUdpTransport`).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Callable, Sequence
from typing import Any

from pyasn1.type import univ
from pysnmp.carrier.asyncio.dgram import udp, udp6
from pysnmp.entity import config as pysnmp_config
from pysnmp.hlapi.v3arch import asyncio as hlapi
from pysnmp.proto import errind, rfc1905

from collector.oids import Column
from collector.snmp_client import (
    InvalidSink,
    SnmpAuthError,
    SnmpClient,
    SnmpError,
    SnmpProtocolError,
    SnmpTimeout,
)
from collector.snmp_walk import END_OF_MIB_VIEW, EndOfMibView, Value, VarBind, Walked, walk_columns
from collector.targets import SwitchTarget

#: Bytes of varbinds asked per GETBULK response (agents cap lower; the walker adapts).
BUDGET_BYTES = 16_000
#: Requests one engine keeps in flight: pysnmp decodes at ~10K varbinds per CPU-second, so more
#: only queues answers in the socket buffer (where a burst overflows and is lost), not speed.
MAX_IN_FLIGHT = 8
RCVBUF_BYTES = 4 << 20

_AUTH: dict[str, Any] = {
    "md5": hlapi.usmHMACMD5AuthProtocol,
    "sha": hlapi.usmHMACSHAAuthProtocol,
    "sha224": hlapi.usmHMAC128SHA224AuthProtocol,
    "sha256": hlapi.usmHMAC192SHA256AuthProtocol,
    "sha384": hlapi.usmHMAC256SHA384AuthProtocol,
    "sha512": hlapi.usmHMAC384SHA512AuthProtocol,
}
_PRIV: dict[str, Any] = {
    "des": hlapi.usmDESPrivProtocol,
    "aes": hlapi.usmAesCfb128Protocol,
    "aes192": hlapi.usmAesCfb192Protocol,
    "aes256": hlapi.usmAesCfb256Protocol,
}

_AUTH_ERRORS: dict[type[Any], str] = {
    errind.WrongDigest: "wrong auth key or auth protocol (the agent reported usmStatsWrongDigests)",
    errind.DecryptionError: "wrong priv key or privacy protocol (the agent reported usmStatsDecryptionErrors)",
    errind.UnknownUserName: "user unknown to the agent (usmStatsUnknownUserNames)",
    errind.UnsupportedSecurityLevel: "the agent does not allow authPriv for this user",
    errind.AuthenticationFailure: "the agent's reply failed authentication (wrong auth key?)",
    errind.AuthenticationError: "authentication error",
    errind.NotInTimeWindow: "the agent keeps answering notInTimeWindow",
    errind.UnknownEngineID: "the agent's engine id could not be discovered",
    errind.UnknownSecurityName: "unknown security name",
}


#: The version INTEGER an SNMPv2c (1) or SNMPv3 (3) message starts with.
_VERSIONS = (b"\x02\x01\x01", b"\x02\x01\x03")


def plausible_snmp(datagram: bytes) -> bool:
    """True when ``datagram`` is framed like an SNMP message: SEQUENCE { INTEGER version (1|3) ...

    Total: any bytes at all give True or False (slices only, no index can be out of range).
    """
    if len(datagram) < 5 or datagram[0] != 0x30:
        return False
    first = datagram[1]
    if first < 0x80:
        length, head = first, 2
    else:
        n = first & 0x7F
        if not 1 <= n <= 4 or len(datagram) < 2 + n:
            return False
        length, head = int.from_bytes(datagram[2 : 2 + n], "big"), 2 + n
    return head + length == len(datagram) and datagram[head : head + 3] in _VERSIONS


class _Checked:
    """Mixin for pysnmp's asyncio datagram transports: garbage reported, nothing after close.

    pysnmp's own ``datagram_received`` schedules delivery with ``call_soon``; a datagram that
    lands between that and the engine's close would raise "Unregistered transport" in the
    loop's exception handler, so delivery re-checks ``closed``. The socket gets a large
    receive buffer: one engine's socket takes the answers of many targets at once.
    """

    on_garbage: Callable[[tuple[str, int]], None] | None = None
    closed = False
    loop: asyncio.AbstractEventLoop
    _callback_function: Callable[..., None] | None

    def datagram_received(self, datagram: bytes, transportAddress: Any) -> None:  # pysnmp's name
        if self.closed:
            return
        if not plausible_snmp(datagram):
            if self.on_garbage is not None:
                self.on_garbage((str(transportAddress[0]), int(transportAddress[1])))
            return
        self.loop.call_soon(self._deliver, transportAddress, datagram)

    def _deliver(self, address: Any, datagram: bytes) -> None:
        if not self.closed and self._callback_function is not None:
            self._callback_function(self, address, datagram)

    def connection_made(self, transport: asyncio.DatagramTransport) -> None:
        sock = transport.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):  # the kernel caps it at net.core.rmem_max
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, RCVBUF_BYTES)
        super().connection_made(transport)  # type: ignore[misc]


class CheckedUdpTransport(_Checked, udp.UdpAsyncioTransport):  # type: ignore[misc]  # pysnmp ships no type hints
    """pysnmp's UDP transport, reporting datagrams that are not SNMP instead of dropping them."""


class CheckedUdp6Transport(_Checked, udp6.Udp6AsyncioTransport):  # type: ignore[misc]
    """The IPv6 twin of :class:`CheckedUdpTransport`."""


class PysnmpEngines:
    """The shared pysnmp engines of one collector, one per credential set; close them at the end."""

    def __init__(self) -> None:
        self._engines: dict[tuple[str, ...], Any] = {}
        self._in_flight: dict[int, asyncio.Semaphore] = {}
        self._transports: list[_Checked] = []
        self._waiting: dict[tuple[str, int], list[PysnmpClient]] = {}

    def engine(self, target: SwitchTarget) -> Any:
        """The engine for ``target``'s credentials (created with its transports on first use)."""
        key = _credential_key(target)
        eng = self._engines.get(key)
        if eng is None:
            eng = self._engines[key] = hlapi.SnmpEngine()
            self._in_flight[id(eng)] = asyncio.Semaphore(MAX_IN_FLIGHT)
            for cls, domain in ((CheckedUdpTransport, udp.DOMAIN_NAME), (CheckedUdp6Transport, udp6.DOMAIN_NAME)):
                transport = cls()
                transport.on_garbage = self._garbage
                self._transports.append(transport)
                pysnmp_config.add_transport(eng, domain, transport.open_client_mode())
        return eng

    def limiter(self, engine: Any) -> asyncio.Semaphore:
        """The in-flight request limit of ``engine``."""
        return self._in_flight[id(engine)]

    def waiting(self, client: PysnmpClient, address: tuple[str, int], on: bool) -> None:
        """Track which clients await an answer from ``address`` (to blame garbage on)."""
        clients = self._waiting.setdefault(address, [])
        if on:
            clients.append(client)
        else:
            with contextlib.suppress(ValueError):
                clients.remove(client)

    def _garbage(self, address: tuple[str, int]) -> None:
        clients = self._waiting.get(address)
        if clients:  # one datagram, one count: the oldest waiter is the likeliest addressee
            clients[0].on_invalid("datagram that is not SNMP", 1)

    def close(self) -> None:
        """Stop every engine's dispatcher (closes their sockets)."""
        for transport in self._transports:
            transport.closed = True
        for eng in self._engines.values():
            with contextlib.suppress(Exception):
                eng.close_dispatcher()
        self._engines.clear()


def _credential_key(target: SwitchTarget) -> tuple[str, ...]:
    v3 = target.v3
    if target.snmp_version == "2c" or v3 is None:
        return ("v2c",)
    return (
        "v3",
        v3.user,
        v3.auth_protocol,
        v3.auth_key.get_secret_value(),
        v3.priv_protocol,
        v3.priv_key.get_secret_value(),
    )


def _value(v: Any) -> Value | EndOfMibView | None:
    """A pysnmp value as plain Python; None for noSuchObject/noSuchInstance/NULL."""
    if isinstance(v, univ.Integer):  # Integer32, Counter32/64, Gauge32, TimeTicks, Unsigned32
        return int(v)
    if isinstance(v, univ.OctetString):  # OCTET STRING, IpAddress, Opaque
        return v.asOctets()  # type: ignore[no-any-return]
    if isinstance(v, univ.ObjectIdentifier):
        return str(v)
    if isinstance(v, univ.Null) and v.tagSet == rfc1905.endOfMibView.tagSet:
        return END_OF_MIB_VIEW
    return None


class PysnmpClient(SnmpClient):
    """One target over a shared pysnmp engine."""

    backend = "pysnmp"

    def __init__(self, target: SwitchTarget, on_invalid: InvalidSink, engines: PysnmpEngines) -> None:
        super().__init__(target, on_invalid)
        self._engines = engines
        self._engine = engines.engine(target)
        v3 = target.v3
        if target.snmp_version == "2c" or v3 is None:
            community = target.community.get_secret_value() if target.community is not None else "public"
            self._auth: Any = hlapi.CommunityData(community, mpModel=1)
            self._context = hlapi.ContextData()
        else:
            self._auth = hlapi.UsmUserData(
                v3.user,
                v3.auth_key.get_secret_value(),
                v3.priv_key.get_secret_value(),
                authProtocol=_AUTH[v3.auth_protocol],
                privProtocol=_PRIV[v3.priv_protocol],
            )
            self._context = hlapi.ContextData(contextName=v3.context)
        self._transport: Any = None
        self._address: tuple[str, int] | None = None

    async def _target(self) -> Any:
        if self._transport is None:
            host, port = self.target.host_port
            cls = hlapi.Udp6TransportTarget if ":" in host else hlapi.UdpTransportTarget
            try:
                self._transport = await cls.create(
                    (host, port), timeout=self.target.timeout_s, retries=self.target.retries
                )
            except Exception as exc:  # pysnmp raises PySnmpError for unresolvable names
                raise SnmpError(f"cannot resolve {self.target.address}: {exc}") from exc
            addr = self._transport.transport_address
            self._address = (str(addr[0]), int(addr[1]))
        return self._transport

    async def _call(self, fn: Any, *args: Any) -> list[tuple[Any, Any]]:
        transport = await self._target()
        assert self._address is not None
        self.requests += 1
        async with self._engines.limiter(self._engine):
            self._engines.waiting(self, self._address, True)
            try:
                err_ind, err_status, err_index, var_binds = await fn(
                    self._engine, self._auth, transport, self._context, *args, lookupMib=False
                )
            finally:
                self._engines.waiting(self, self._address, False)
        if err_ind is not None:
            raise self._error(err_ind)
        if err_status and int(err_status):
            raise SnmpProtocolError(
                f"{self.target.address} answered error-status {err_status.prettyPrint()} at index {int(err_index)}"
            )
        self.varbinds += len(var_binds)
        return list(var_binds)

    def _error(self, err_ind: Any) -> SnmpError:
        tries = self.target.retries + 1
        if isinstance(err_ind, errind.RequestTimedOut):
            return SnmpTimeout(
                f"no response from {self.target.address} within {self.target.timeout_s:g}s ({tries} tries)"
            )
        for kind, why in _AUTH_ERRORS.items():
            if isinstance(err_ind, kind):
                user = self.target.v3.user if self.target.v3 else "?"
                return SnmpAuthError(f"SNMPv3 authentication failed for user {user!r} at {self.target.address}: {why}")
        return SnmpError(f"{self.target.address}: {err_ind}")

    async def get(self, oids: Sequence[str]) -> dict[str, Value]:
        var_binds = await self._call(hlapi.get_cmd, *[hlapi.ObjectType(hlapi.ObjectIdentity(o)) for o in oids])
        out: dict[str, Value] = {}
        for name, raw in var_binds:
            value = _value(raw)
            if value is not None and not isinstance(value, EndOfMibView):
                out[str(name)] = value
        return out

    async def _bulk(self, oids: Sequence[str], reps: int) -> Sequence[VarBind]:
        var_binds = await self._call(
            hlapi.bulk_cmd, 0, reps, *[hlapi.ObjectType(hlapi.ObjectIdentity(o)) for o in oids]
        )
        out: list[VarBind] = []
        for name, raw in var_binds:
            value = _value(raw)
            # noSuchObject/noSuchInstance cannot occur in a GETBULK answer (RFC 3416): treat as the end
            out.append((str(name), END_OF_MIB_VIEW if value is None else value))
        return out

    async def walk(self, columns: Sequence[Column], rows_hint: int | None = None) -> Walked:
        return await walk_columns(
            self._bulk,
            [c.oid for c in columns],
            [c.varbind_bytes for c in columns],
            budget_bytes=BUDGET_BYTES,
            rows_hint=rows_hint,
        )

    async def close(self) -> None:
        self._transport = None

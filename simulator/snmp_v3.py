"""SNMPv3 for the simulator agent: a pysnmp engine (USM) fed from the agent's own UDP socket.

The agent's datagram protocol hands every v3 message (``msgVersion`` 3) to
:meth:`V3Responder.feed`; pysnmp authenticates, decrypts, answers and sends its reply
through the same asyncio transport, so v2c and v3 share one port. The pysnmp transport
object is registered with the engine but never opens a socket of its own.

USM users are configured for every switch alike; the SNMPv3 context name selects the switch
(as the v2c community does). Unknown or unreachable contexts get no response: pysnmp drops a
request whose context has no MIB instrumentation. Wrong keys get the USM reports pysnmp
generates (``usmStatsWrongDigests``, ``usmStatsDecryptionErrors``,
``usmStatsUnknownUserNames``), which net-snmp reports as authentication or decryption errors.
VACM is not consulted: an authenticated user reads every switch's whole view.

pysnmp answers GETBULK with at most ``BULK_MAX_VARBINDS`` varbinds (its own guard against a
response that would exceed the manager's msgMaxSize; pysnmp silently drops oversized replies).
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pysnmp.carrier.asyncio.dgram import udp, udp6
from pysnmp.entity import config, engine
from pysnmp.entity.rfc3413 import cmdrsp, context
from pysnmp.error import PySnmpError
from pysnmp.proto import rfc1902, rfc1905
from pysnmp.smi import error as smi_error

from simulator.snmp_ber import (
    COUNTER32,
    COUNTER64,
    GAUGE32,
    INTEGER,
    OBJECT_IDENTIFIER,
    OCTET_STRING,
    TIMETICKS,
    normalize,
)
from simulator.snmp_mib import NO_SUCH_OBJECT, SwitchMib

AUTH_PROTOCOLS: dict[str, Any] = {
    "MD5": config.USM_AUTH_HMAC96_MD5,
    "SHA": config.USM_AUTH_HMAC96_SHA,
    "SHA-224": config.USM_AUTH_HMAC128_SHA224,
    "SHA-256": config.USM_AUTH_HMAC192_SHA256,
    "SHA-384": config.USM_AUTH_HMAC256_SHA384,
    "SHA-512": config.USM_AUTH_HMAC384_SHA512,
}
PRIV_PROTOCOLS: dict[str, Any] = {
    "DES": config.USM_PRIV_CBC56_DES,
    "AES": config.USM_PRIV_CFB128_AES,
    "AES-192": config.USM_PRIV_CFB192_AES,
    "AES-256": config.USM_PRIV_CFB256_AES,
}
BULK_MAX_VARBINDS = 64

_PYSNMP_TYPES: dict[int, Any] = {
    INTEGER: rfc1902.Integer32,
    OCTET_STRING: rfc1902.OctetString,
    OBJECT_IDENTIFIER: rfc1902.ObjectIdentifier,
    COUNTER32: rfc1902.Counter32,
    GAUGE32: rfc1902.Gauge32,
    TIMETICKS: rfc1902.TimeTicks,
    COUNTER64: rfc1902.Counter64,
}


@dataclass(frozen=True, slots=True)
class V3User:
    """One USM user (authPriv); keys are pass phrases, localized by pysnmp to the engine id."""

    name: str = "fabricmon"
    auth_key: str = field(default="fabricmon-auth", repr=False)
    priv_key: str = field(default="fabricmon-priv", repr=False)
    auth_protocol: str = "SHA"  # a key of AUTH_PROTOCOLS
    priv_protocol: str = "AES"  # a key of PRIV_PROTOCOLS (AES = AES-128 CFB, RFC 3826)

    def __post_init__(self) -> None:
        if self.auth_protocol not in AUTH_PROTOCOLS:
            raise ValueError(f"unknown SNMPv3 auth protocol {self.auth_protocol!r}")
        if self.priv_protocol not in PRIV_PROTOCOLS:
            raise ValueError(f"unknown SNMPv3 privacy protocol {self.priv_protocol!r}")
        if len(self.auth_key) < 8 or len(self.priv_key) < 8:
            raise ValueError("SNMPv3 pass phrases need at least 8 characters (RFC 3414 §11.2)")


#: The documented default: user ``fabricmon``, SHA ``fabricmon-auth``, AES-128 ``fabricmon-priv``.
DEFAULT_V3_USERS: tuple[V3User, ...] = (V3User(),)

#: Resolves a context name to the switch's current MIB, or None (unknown or unreachable).
MibResolver = Callable[[str], SwitchMib | None]


def _to_pysnmp(syntax: int, value: int | bytes | tuple[int, ...]) -> Any:
    if isinstance(value, int):
        value = normalize(syntax, value)
    return _PYSNMP_TYPES[syntax](value)


class _SwitchInstrum:
    """pysnmp MIB instrumentation for one switch (duck-typed AbstractMibInstrumController)."""

    def __init__(self, resolve: MibResolver, switch: str) -> None:
        self._resolve = resolve
        self.switch = switch

    def _mib(self) -> SwitchMib:
        mib = self._resolve(self.switch)
        if mib is None:  # went away since the context lookup: drop the request
            raise PySnmpError(f"switch {self.switch} is not answering")
        return mib

    def read_variables(self, *var_binds: Any, **context: Any) -> list[tuple[Any, Any]]:
        mib = self._mib()
        out: list[tuple[Any, Any]] = []
        for name, _value in var_binds:
            pos = mib.lookup(tuple(name))
            if isinstance(pos, int):
                out.append((name, rfc1905.noSuchObject if pos == NO_SUCH_OBJECT else rfc1905.noSuchInstance))
            else:
                _, syntax, value = mib.instance(pos)
                out.append((name, _to_pysnmp(syntax, value)))
        return out

    def read_next_variables(self, *var_binds: Any, **context: Any) -> list[tuple[Any, Any]]:
        mib = self._mib()
        out: list[tuple[Any, Any]] = []
        for name, _value in var_binds:
            pos = mib.next_position(tuple(name))
            if pos is None:
                out.append((name, rfc1905.endOfMibView))
            else:
                oid, syntax, value = mib.instance(pos)
                out.append((rfc1902.ObjectName(oid), _to_pysnmp(syntax, value)))
        return out

    def write_variables(self, *var_binds: Any, **context: Any) -> list[tuple[Any, Any]]:
        raise smi_error.NoAccessError(name=var_binds[0][0] if var_binds else None, idx=0)


class _SwitchContexts(context.SnmpContext):  # type: ignore[misc]  # pysnmp ships no type hints
    """Context name → switch; resolved per request instead of registered one by one."""

    def __init__(self, snmp_engine: Any, resolve: MibResolver, on_unknown: Callable[[], None]) -> None:
        super().__init__(snmp_engine)
        self._resolve = resolve
        self._on_unknown = on_unknown
        self._instrums: dict[bytes, _SwitchInstrum] = {}

    def get_mib_instrum(self, contextName: Any = b"") -> _SwitchInstrum:
        name = bytes(rfc1902.OctetString(contextName).asOctets())
        switch = name.decode("utf-8", "replace")
        if self._resolve(switch) is None:
            self._on_unknown()
            raise PySnmpError(f"no switch answers context {switch!r}")  # pysnmp drops the request
        instrum = self._instrums.get(name)
        if instrum is None:
            instrum = self._instrums[name] = _SwitchInstrum(self._resolve, switch)
        return instrum


class V3Responder:
    """A pysnmp engine that answers v3 requests handed to it, replying through a shared transport."""

    def __init__(
        self,
        resolve: MibResolver,
        users: tuple[V3User, ...],
        *,
        family: int = socket.AF_INET,
        on_unknown_context: Callable[[], None] = lambda: None,
        loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        loop = loop or asyncio.get_running_loop()
        self.engine = engine.SnmpEngine()
        module = udp6 if family == socket.AF_INET6 else udp
        self._carrier: Any = (
            udp6.Udp6AsyncioTransport(loop=loop) if family == socket.AF_INET6 else udp.UdpAsyncioTransport(loop=loop)
        )
        config.add_transport(self.engine, module.DOMAIN_NAME, self._carrier)
        for user in users:
            config.add_v3_user(
                self.engine,
                user.name,
                AUTH_PROTOCOLS[user.auth_protocol],
                user.auth_key,
                PRIV_PROTOCOLS[user.priv_protocol],
                user.priv_key,
            )
        contexts = _SwitchContexts(self.engine, resolve, on_unknown_context)
        cmdrsp.GetCommandResponder(self.engine, contexts)
        cmdrsp.NextCommandResponder(self.engine, contexts)
        bulk = cmdrsp.BulkCommandResponder(self.engine, contexts)
        bulk.max_varbinds = BULK_MAX_VARBINDS
        cmdrsp.SetCommandResponder(self.engine, contexts)

    def attach(self, transport: asyncio.DatagramTransport) -> None:
        """Send pysnmp's replies through the agent's socket."""
        self._carrier.transport = transport

    def feed(self, data: bytes, addr: Any) -> None:
        """Process one v3 datagram (pysnmp schedules the work on the loop)."""
        self._carrier.datagram_received(data, addr)

    def close(self) -> None:
        """Stop pysnmp's timer task; the shared socket is closed by its owner."""
        self._carrier.transport = None
        self.engine.close_dispatcher()

"""The gufo-snmp codec: SNMPv2c, and SNMPv3 without a context name, over gufo's Rust sockets.

We drive gufo's socket objects (``gufo.snmp._fast``) ourselves rather than through its
``SnmpSession``, to own what a collector needs per request: the target's timeout *and*
retries, a datagram that fails to decode counted and skipped (the real answer may still
come), and late answers to an earlier try dropped (gufo matches request ids).

gufo-snmp's GETBULK carries one OID and follows one column (its ``GetIter`` stops at the first
OID outside the prefix), so :meth:`GufoClient.walk` walks the requested columns one after
another; each response is sized by :func:`collector.snmp_walk.repetitions` to fit gufo's
4,080-byte receive buffer (a larger datagram is truncated by the kernel and fails to
decode; the column is then re-walked with half the repetitions).

A datagram that fails to decode is either our own answer cut at that buffer, or garbage (a
broken agent, a stray packet). Before gufo reads a walk's answer, its real size is peeked
(``MSG_PEEK | MSG_TRUNC``): only a datagram larger than the buffer means "ask for fewer rows";
any other undecodable one is counted (``undecodable SNMP response``) and skipped, and the walk
waits on for its real answer.
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar, cast

from gufo.snmp import (
    Aes128Key,
    Aes192Key,
    Aes256Key,
    DesKey,
    KeyExpansion,
    Md5Key,
    Sha1Key,
    Sha224Key,
    Sha256Key,
    Sha384Key,
    Sha512Key,
    SnmpDecodeError,
    User,
)
from gufo.snmp import SnmpAuthError as GufoAuthError
from gufo.snmp import SnmpError as GufoError
from gufo.snmp._fast import GetIter, SnmpV2cClientSocket, SnmpV3ClientSocket

from collector.oids import Column
from collector.snmp_client import InvalidSink, SnmpAuthError, SnmpClient, SnmpError, SnmpTimeout
from collector.snmp_walk import MAX_ROWS, Value, Walked, repetitions
from collector.targets import SwitchTarget

T = TypeVar("T")

#: gufo's receive buffer: a longer datagram is cut to this many bytes (and fails to decode).
RECV_BUFFER_BYTES = 4080
#: Leave room for the message and PDU headers.
BUDGET_BYTES = 3600
#: Re-synchronise SNMPv3 engine boots/time this often (the USM time window is ±150 s).
V3_REFRESH_S = 100.0

_AUTH: dict[str, Any] = {
    "md5": Md5Key,
    "sha": Sha1Key,
    "sha224": Sha224Key,
    "sha256": Sha256Key,
    "sha384": Sha384Key,
    "sha512": Sha512Key,
}
_PRIV: dict[str, Any] = {"des": DesKey, "aes": Aes128Key, "aes192": Aes192Key, "aes256": Aes256Key}


def _address(target: SwitchTarget) -> str:
    host, port = target.host_port
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def gufo_user(target: SwitchTarget) -> User:
    """The target's SNMPv3 USM user as gufo-snmp wants it (pass phrases, localized by gufo)."""
    v3 = target.v3
    assert v3 is not None
    return User(
        v3.user,
        auth_key=_AUTH[v3.auth_protocol](v3.auth_key.get_secret_value().encode()),
        priv_key=_PRIV[v3.priv_protocol](v3.priv_key.get_secret_value().encode()),
        # pysnmp's usmAesCfb192/256Protocol (and the simulator's) extend short keys as Cisco does
        key_expansion=KeyExpansion.Cisco,
    )


class GufoClient(SnmpClient):
    """One target over gufo-snmp: a connected UDP socket of its own."""

    backend = "gufo"

    def __init__(self, target: SwitchTarget, on_invalid: InvalidSink) -> None:
        super().__init__(target, on_invalid)
        addr = _address(target)
        self._v3_user: User | None = None
        self._refreshed = -1e18
        self._sock: Any
        try:
            if target.snmp_version == "2c":
                community = target.community.get_secret_value() if target.community is not None else "public"
                self._sock = SnmpV2cClientSocket(addr, community, 0, 0, 0, 0)
            else:
                self._v3_user = gufo_user(target)
                self._sock = SnmpV3ClientSocket(addr, b"", "", 0, b"", 0, b"", 0, 0, 0, 0)
        except (OSError, ValueError) as exc:
            raise SnmpError(f"cannot open an SNMP socket to {target.address}: {exc}") from exc
        self._fd: int = self._sock.get_fd()
        probe = socket.socket(fileno=self._fd)  # gufo's socket, borrowed: detached, never closed here
        self._family = probe.family
        probe.detach()
        self._peek_buf = bytearray(1)
        self._keys_set = False
        #: Rows each column had at its last walk (0: absent), to size the next walk exactly.
        self._rows: dict[str, int] = {}

    # -- one request, with timeout and retries ------------------------------------------

    async def _readable(self, wait_s: float) -> bool:
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()

        def ready() -> None:
            if not fut.done():
                fut.set_result(None)

        loop.add_reader(self._fd, ready)
        try:
            async with asyncio.timeout(wait_s):
                await fut
            return True
        except TimeoutError:
            return False
        finally:
            loop.remove_reader(self._fd)

    async def _exchange(self, send: Callable[[], None], recv: Callable[[], T], *, walking: bool = False) -> T:
        """Send, then wait for the matching answer; resend on timeout. ``walking``: an answer
        cut at gufo's buffer raises :class:`_Truncated` (the walk asks for fewer rows)."""
        refused = False
        garbage = 0
        for _ in range(self.target.retries + 1):
            self.requests += 1
            try:
                send()
            except BlockingIOError:
                await asyncio.sleep(0.001)  # send buffer full: the retry loop tries again
                continue
            except OSError as exc:
                raise SnmpError(f"cannot send to {self.target.address}: {exc}") from exc
            answer, undecodable = await self._receive(recv, walking)
            garbage += undecodable
            if answer is _REFUSED:
                refused = True
            elif answer is not _NOTHING:
                return cast(T, answer)
        tries = self.target.retries + 1
        why = "port unreachable (connection refused)" if refused else "no response"
        also = f"; {garbage} undecodable datagram(s) skipped" if garbage else ""
        raise SnmpTimeout(f"{why} from {self.target.address} within {self.target.timeout_s:g}s ({tries} tries{also})")

    async def _receive(self, recv: Callable[[], T], walking: bool) -> tuple[T | object, int]:
        """The answer to the request just sent, or ``_NOTHING``/``_REFUSED`` once the timeout passed;
        and how many undecodable datagrams were skipped meanwhile."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.target.timeout_s
        cut = False  # a datagram larger than gufo's buffer arrived (and was cut)
        garbage = 0
        while (left := deadline - loop.time()) > 0 and await self._readable(left):
            oversize = walking and self._next_size() > RECV_BUFFER_BYTES
            try:
                return recv(), garbage
            except BlockingIOError:  # a stale or foreign datagram was consumed: keep waiting
                cut |= oversize  # SNMPv3: gufo drops a cut (undecryptable) answer silently
            except GufoAuthError as exc:
                raise SnmpAuthError(self._auth_detail()) from exc
            except TimeoutError:  # gufo maps ICMP port unreachable to TimeoutError
                return _REFUSED, garbage
            except SnmpDecodeError:
                garbage += self._undecodable(oversize)
            except GufoError as exc:
                raise SnmpError(f"SNMP error from {self.target.address}: {exc}") from exc
            except BaseException as exc:
                if not _is_panic(exc):
                    raise
                # gufo-snmp 0.13's BER decoder panics on some malformed datagrams
                # ("index out of bounds" in ber/header.rs): garbage, like a decode error
                garbage += self._undecodable(oversize)
        if cut:
            raise _Truncated
        return _NOTHING, garbage

    def _next_size(self) -> int:
        """The size of the datagram waiting (not read: gufo reads it next), 0 if none."""
        borrowed = socket.socket(self._family, socket.SOCK_DGRAM, 0, fileno=self._fd)
        try:
            return borrowed.recv_into(self._peek_buf, 1, socket.MSG_PEEK | socket.MSG_TRUNC)
        except OSError:  # nothing waiting after all, or an error gufo's own read reports
            return 0
        finally:
            borrowed.detach()  # gufo's descriptor stays open, gufo's to close

    def _undecodable(self, oversize: bool) -> int:
        """A datagram that did not decode: our answer cut at the buffer (raises), or garbage (counted: 1)."""
        if oversize:
            raise _Truncated
        self.on_invalid("undecodable SNMP response", 1)
        return 1

    def _auth_detail(self) -> str:
        v3 = self.target.v3
        if v3 is None:
            return "the agent answered with a report PDU"
        return (
            f"SNMPv3 authentication failed for user {v3.user!r} ({v3.auth_protocol}/{v3.priv_protocol}):"
            " wrong user name, auth key or priv key (the agent answered with a USM report)"
        )

    async def _refresh(self) -> None:
        """SNMPv3: discover the engine id, set the keys, resynchronise boots/time."""
        if self._v3_user is None or time.monotonic() - self._refreshed < V3_REFRESH_S:
            return
        sock = self._sock
        if not self._keys_set:
            await self._exchange(sock.send_refresh, sock.recv_refresh)
            u = self._v3_user
            sock.set_keys(u.name, u.get_auth_alg(), u.get_auth_key(), u.get_priv_alg(), u.get_priv_key())
            self._keys_set = True
        await self._exchange(sock.send_refresh, sock.recv_refresh)
        self._refreshed = time.monotonic()

    # -- SnmpClient ---------------------------------------------------------------------

    async def get(self, oids: Sequence[str]) -> dict[str, Value]:
        await self._refresh()
        oid_list = list(oids)
        sock = self._sock
        try:
            got: dict[str, Value] = await self._exchange(lambda: sock.send_get_many(oid_list), sock.recv_get_many)
        except SnmpAuthError:
            if self._v3_user is None:
                raise
            self._refreshed = -1e18  # the agent may have rebooted (new engine boots): resync once
            await self._refresh()
            got = await self._exchange(lambda: sock.send_get_many(oid_list), sock.recv_get_many)
        self.varbinds += len(got)
        return got

    async def walk(self, columns: Sequence[Column], rows_hint: int | None = None) -> Walked:
        await self._refresh()
        result = Walked.empty([c.oid for c in columns])
        for i, col in enumerate(columns):
            last = self._rows.get(col.oid)
            if not last:
                # Never seen rows here: one row first. GETBULK past a column the agent lacks returns
                # whatever follows it (long OIDs, long strings), which may not fit gufo's buffer.
                await self._walk_sized(col.oid, 1, result, i, probe=True)
                if not result.rows[i]:
                    self._rows[col.oid] = 0
                    continue
                result.rows[i].clear()
            hint = last or rows_hint
            await self._walk_sized(col.oid, repetitions(col.varbind_bytes, BUDGET_BYTES, hint), result, i)
            self._rows[col.oid] = len(result.rows[i])
        return result

    async def _walk_sized(self, oid: str, reps: int, result: Walked, i: int, *, probe: bool = False) -> None:
        """Walk one column, halving max-repetitions while responses come back cut."""
        while True:
            try:
                await self._walk_column(oid, reps, result, i, probe=probe)
                return
            except _Truncated:
                result.rows[i].clear()
                if reps == 1:
                    raise SnmpError(
                        f"{oid}: a single row does not fit gufo-snmp's {RECV_BUFFER_BYTES}-byte receive buffer"
                    ) from None
                reps = max(1, reps // 2)

    async def _walk_column(self, oid: str, reps: int, result: Walked, i: int, *, probe: bool = False) -> None:
        sock = self._sock
        it = GetIter(oid, reps)
        skip = len(oid) + 1
        rows = result.rows[i]
        while True:
            result.requests += 1
            try:
                batch = await self._exchange(
                    lambda: sock.send_get_bulk(it), lambda: sock.recv_get_bulk(it), walking=True
                )
            except StopAsyncIteration:  # an answer with nothing in the column: its end
                return
            t_ns = time.time_ns()
            result.varbinds += len(batch)
            self.varbinds += len(batch)
            for item in batch:
                if item is None:  # past the column
                    return
                index = item[0][skip:]
                if index in rows or len(rows) >= MAX_ROWS:
                    result.invalid += 1
                    return
                rows[index] = item[1]
                if i == 0:
                    result.times[index] = t_ns
            if probe:
                return

    async def close(self) -> None:
        self._sock = None


def _is_panic(exc: BaseException) -> bool:
    """A Rust panic surfaced by pyo3 (``pyo3_runtime.PanicException``, a BaseException)."""
    return type(exc).__name__ == "PanicException" and not isinstance(exc, Exception | asyncio.CancelledError)


_NOTHING, _REFUSED = object(), object()


class _Truncated(Exception):
    """A response mid-walk was larger than gufo's receive buffer: cut, it failed to decode."""

"""The simulator's SNMP agent: one UDP socket answering for every simulated switch.

SNMPv2c picks the switch by community (community = switch name); SNMPv3 by context name.
The datagram protocol routes on ``msgVersion``:

* v2c, the hot path: our own BER codec (:mod:`simulator.snmp_ber`) over the per-switch
  snapshot of :mod:`simulator.snmp_mib` — GET, GETNEXT, GETBULK (RFC 3416 §4.2: non-repeaters,
  max-repetitions, stop once every repeater is past the end, responses truncated to
  ``max_response_bytes``; GET/GETNEXT that would not fit answer ``tooBig``); SET answers
  ``noAccess`` (a read-only community).
* v3: handed to a pysnmp engine on the same socket (:mod:`simulator.snmp_v3`).
* v1, unknown communities, switches whose ``SwitchInfo.reachable`` is False, non-request
  PDUs and garbage: no response, as a real agent; each is counted in :class:`AgentStats`.
* A switch with ``SwitchInfo.snmp_delay_s`` (the ``snmp_slow`` fault): its v2c answers are
  computed on arrival and sent that many seconds later (values as old as the delay); other
  switches are answered meanwhile. v3 answers are never delayed.

Why two paths: measured here (2 cores) with ``snmpbulkwalk -Cr50`` of ifXTable, pysnmp's
responder manages ~13-15K varbinds/s even behind a trivial MIB controller (the v3 path: ~11K/s),
while this v2c path answered ~195K varbinds/s to four parallel net-snmp clients (~280K per
agent CPU-second): the 384 spines and superspines of a 16K-GPU fabric, whole ifXTable each, in
under 5 s of every 60 s interval, so the collector is the bottleneck. SNMPv1 is not served
(64-bit counters need v2c or v3).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import socket
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

from simulator.snmp_ber import (
    END_OF_MIB_VIEW,
    GET,
    GET_BULK,
    GET_NEXT,
    NO_ACCESS,
    NO_ERROR,
    NO_SUCH_INSTANCE,
    NO_SUCH_OBJECT,
    SET,
    TOO_BIG,
    VERSION_2C,
    VERSION_3,
    BerError,
    Request,
    decode_request,
    encode_response,
    peek_version,
    response_overhead,
    varbind,
)
from simulator.snmp_mib import NO_SUCH_OBJECT as LOOKUP_NO_SUCH_OBJECT
from simulator.snmp_mib import MibCache, SwitchMib
from simulator.snmp_v3 import DEFAULT_V3_USERS, V3Responder, V3User
from simulator.view import FabricView

__all__ = ["DEFAULT_V3_USERS", "AgentStats", "SnmpAgent", "V3User", "serve_snmp"]

log = logging.getLogger(__name__)

#: Largest response the agent sends: below the 65,507-byte IPv4 UDP payload limit.
MAX_RESPONSE_BYTES = 65000
_END = bytes((END_OF_MIB_VIEW, 0))
_NO_OBJECT = bytes((NO_SUCH_OBJECT, 0))
_NO_INSTANCE = bytes((NO_SUCH_INSTANCE, 0))


@dataclass(slots=True)
class AgentStats:
    """What the agent did, for tests and the simulator's own metrics."""

    datagrams: int = 0
    responses: int = 0
    varbinds: int = 0  # varbinds sent on the v2c fast path
    v3_datagrams: int = 0
    unknown_community: int = 0
    unknown_context: int = 0  # v3 requests for no (reachable) switch
    unreachable: int = 0  # v2c requests to a switch that is down
    malformed: int = 0
    unsupported: int = 0  # SNMPv1, and PDUs an agent does not answer
    too_big: int = 0
    dropped_responses: int = 0  # not sent while the socket's send buffer was full
    delayed: int = 0  # answers held back by an snmp_slow fault
    errors: int = 0  # internal failures (logged)


def _get(mib: SwitchMib, req: Request) -> list[bytes]:
    out = []
    for oid, name in zip(req.oids, req.oid_tlvs, strict=True):
        pos = mib.lookup(oid)
        if isinstance(pos, int):
            out.append(varbind(name, _NO_OBJECT if pos == LOOKUP_NO_SUCH_OBJECT else _NO_INSTANCE))
        else:
            out.append(varbind(name, mib.encoded(pos)[1]))
    return out


def _get_next(mib: SwitchMib, oids: list[tuple[int, ...]], names: list[bytes]) -> list[bytes]:
    out = []
    for oid, name in zip(oids, names, strict=True):
        pos = mib.next_position(oid)
        out.append(varbind(name, _END) if pos is None else varbind(*mib.encoded(pos)))
    return out


def _get_bulk(mib: SwitchMib, req: Request, budget: int) -> list[bytes]:
    """RFC 3416 §4.2.3, truncated at ``budget`` bytes of varbinds."""
    n = min(max(req.error_status, 0), len(req.oids))
    m = max(req.error_index, 0)
    out: list[bytes] = []
    size = 0
    for vb in _get_next(mib, req.oids[:n], req.oid_tlvs[:n]):
        size += len(vb)
        if size > budget:
            return out
        out.append(vb)
    if m == 0 or n == len(req.oids):
        return out
    walks = [mib.positions(oid) for oid in req.oids[n:]]
    last = req.oid_tlvs[n:]  # the name an endOfMibView repeats
    ended = [False] * len(walks)
    for _ in range(m):
        alive = False
        for r, walk in enumerate(walks):
            pos = None if ended[r] else next(walk, None)
            if pos is None:
                ended[r] = True
                vb = varbind(last[r], _END)
            else:
                name, value = mib.encoded(pos)
                last[r] = name
                vb = varbind(name, value)
                alive = True
            size += len(vb)
            if size > budget:
                return out
            out.append(vb)
        if not alive:  # every repeater is past the end: the rest would repeat endOfMibView
            break
    return out


class SnmpAgent(asyncio.DatagramProtocol):
    """The datagram protocol behind :func:`serve_snmp`; ``port`` is the bound UDP port."""

    def __init__(
        self,
        view: FabricView,
        *,
        cache_ttl_s: float = 0.5,
        max_response_bytes: int = MAX_RESPONSE_BYTES,
    ) -> None:
        self.view = view
        self.cache = MibCache(view, cache_ttl_s)
        self.max_response_bytes = max_response_bytes
        self.stats = AgentStats()
        self.host = ""
        self.port = 0
        self._transport: asyncio.DatagramTransport | None = None
        self._paused = False
        self._v3: V3Responder | None = None
        self._closed: asyncio.Future[None] | None = None
        self._late: dict[int, asyncio.TimerHandle] = {}  # answers of slow switches, not sent yet
        self._late_ids = itertools.count()

    # asyncio.DatagramProtocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # CPython's selector datagram transport does not subclass asyncio.DatagramTransport.
        self._transport = cast(asyncio.DatagramTransport, transport)
        self.host, self.port = transport.get_extra_info("sockname")[:2]
        self._closed = asyncio.get_running_loop().create_future()

    def on_change(self, switch: str, port: str | None) -> None:
        """A ChangeListener: state a poller must see at once (oper status, speed, LLDP) changed."""
        self.cache.invalidate(switch)

    def connection_lost(self, exc: Exception | None) -> None:
        if self._closed is not None and not self._closed.done():
            self._closed.set_result(None)

    def pause_writing(self) -> None:
        # Overflow policy: while asyncio's send buffer is above its high-water mark, v2c replies
        # are dropped and counted (the manager retries, as with a real agent under load).
        self._paused = True

    def resume_writing(self) -> None:
        self._paused = False

    def error_received(self, exc: Exception) -> None:
        log.debug("snmp agent socket error: %s", exc)  # e.g. ICMP port unreachable from a gone client

    def datagram_received(self, data: bytes, addr: Any) -> None:
        self.stats.datagrams += 1
        try:
            version = peek_version(data)
        except BerError:
            self.stats.malformed += 1
            return
        if version == VERSION_3 and self._v3 is not None:
            self.stats.v3_datagrams += 1
            self._v3.feed(data, addr)
        elif version == VERSION_2C:
            self._serve_v2c(data, addr)
        else:
            self.stats.unsupported += 1

    # the v2c fast path

    def _serve_v2c(self, data: bytes, addr: Any) -> None:
        try:
            req = decode_request(data)
        except BerError:
            self.stats.malformed += 1
            return
        if req.pdu_type not in (GET, GET_NEXT, GET_BULK, SET):
            self.stats.unsupported += 1
            return
        switch = req.community.decode("utf-8", "replace")
        info = self.view.switch(switch)
        if info is None:
            self.stats.unknown_community += 1
            return
        if not info.reachable:
            self.stats.unreachable += 1
            return
        try:
            response = self._answer(req, self.cache.get(switch, info))
        except Exception:  # a bug must not take the agent down for every other switch
            self.stats.errors += 1
            log.exception("snmp agent failed to answer %s for %s", hex(req.pdu_type), switch)
            return
        if info.snmp_delay_s > 0:
            self._hold(response, addr, info.snmp_delay_s)
        else:
            self._send(response, addr)

    def _hold(self, response: bytes, addr: Any, delay_s: float) -> None:
        """Send ``response`` ``delay_s`` from now (kept so that :meth:`stop` can cancel it)."""
        self.stats.delayed += 1
        key = next(self._late_ids)
        self._late[key] = asyncio.get_running_loop().call_later(delay_s, self._release, key, response, addr)

    def _release(self, key: int, response: bytes, addr: Any) -> None:
        self._late.pop(key, None)
        self._send(response, addr)

    def _send(self, response: bytes, addr: Any) -> None:
        if self._transport is None or self._paused:
            self.stats.dropped_responses += 1
            return
        self._transport.sendto(response, addr)
        self.stats.responses += 1

    def _answer(self, req: Request, mib: SwitchMib | None) -> bytes:
        if mib is None:  # vanished between the two look-ups
            raise LookupError("switch has no MIB")
        budget = self.max_response_bytes - response_overhead(req.community, req.request_id_tlv)
        status = index = NO_ERROR
        if req.pdu_type == GET:
            varbinds = _get(mib, req)
        elif req.pdu_type == GET_NEXT:
            varbinds = _get_next(mib, req.oids, req.oid_tlvs)
        elif req.pdu_type == GET_BULK:
            varbinds = _get_bulk(mib, req, budget)
        else:  # SET on a read-only community (RFC 3416 §4.2.5: not in the write view)
            return encode_response(req.version, req.community, req.request_id_tlv, NO_ACCESS, 1, req.varbind_list)
        body = b"".join(varbinds)
        if len(body) > budget:  # RFC 3416 §4.2.1: tooBig, error-index 0, no varbinds
            self.stats.too_big += 1
            body, status = b"", TOO_BIG
        else:
            self.stats.varbinds += len(varbinds)
        return encode_response(req.version, req.community, req.request_id_tlv, status, index, body)

    # v3 plumbing

    def _resolve(self, switch: str) -> SwitchMib | None:
        info = self.view.switch(switch)
        if info is None or not info.reachable:
            return None
        return self.cache.get(switch, info)

    def _count_unknown_context(self) -> None:
        self.stats.unknown_context += 1

    def start_v3(self, users: Sequence[V3User]) -> None:
        """Route v3 messages to a pysnmp engine with these USM users (sends through our socket)."""
        assert self._transport is not None, "start the transport first"
        family = self._transport.get_extra_info("socket").family
        self._v3 = V3Responder(
            self._resolve, tuple(users), family=family, on_unknown_context=self._count_unknown_context
        )
        self._v3.attach(self._transport)

    async def stop(self) -> None:
        """Stop answering: close the pysnmp engine, then the socket (idempotent)."""
        self.view.remove_listener(self.on_change)
        for handle in self._late.values():
            handle.cancel()
        self._late.clear()
        if self._v3 is not None:
            self._v3.close()
            self._v3 = None
        if self._transport is not None:
            self._transport.close()
            self._transport = None
        if self._closed is not None:
            await self._closed


async def serve_snmp(
    view: FabricView,
    host: str = "127.0.0.1",
    port: int = 161,
    *,
    v3_users: Sequence[V3User] = DEFAULT_V3_USERS,
    cache_ttl_s: float = 0.5,
    max_response_bytes: int = MAX_RESPONSE_BYTES,
) -> SnmpAgent:
    """Bind ``host:port`` (port 0: any free port, see ``agent.port``) and answer for every switch.

    ``v3_users`` empty disables SNMPv3. Stop with ``await agent.stop()``.
    """
    loop = asyncio.get_running_loop()
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    agent = SnmpAgent(view, cache_ttl_s=cache_ttl_s, max_response_bytes=max_response_bytes)
    await loop.create_datagram_endpoint(lambda: agent, local_addr=(host, port), family=family)
    view.add_listener(agent.on_change)
    if v3_users:
        try:
            agent.start_v3(v3_users)
        except BaseException:
            await agent.stop()
            raise
    log.info("snmp agent listening on %s:%d for %d switches", agent.host, agent.port, len(view.switch_names()))
    return agent

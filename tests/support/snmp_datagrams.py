"""SNMP datagrams for tests: requests built by hand, responses re-addressed, a scripted agent.

:class:`ScriptedAgent` is a v2c agent on a UDP port of loopback that answers GET and GETBULK
from a table, and sends whatever a test scripts *before* each real answer (garbage, a mutated
answer, nothing), or an oversized answer instead of it, as a broken or hostile agent does.
"""

from __future__ import annotations

import asyncio
import bisect
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from simulator.snmp_ber import (
    GET,
    GET_BULK,
    INTEGER,
    NULL,
    OCTET_STRING,
    OID,
    SEQUENCE,
    BerError,
    decode_request,
    encode_oid,
    encode_response,
    encode_value,
    tlv,
    varbind,
)

END_OF_MIB_VIEW_TLV = b"\x82\x00"
NO_SUCH_INSTANCE_TLV = b"\x81\x00"


def dotted(oid: str) -> OID:
    return tuple(int(a) for a in oid.strip(".").split("."))


def request(pdu: int, community: bytes, request_id: int, oids: Sequence[str], reps: int = 0) -> bytes:
    """A v2c GET (``pdu`` 0xA0) or GETBULK (0xA5, non-repeaters 0) message."""
    vbs = b"".join(varbind(encode_oid(dotted(o)), bytes((NULL, 0))) for o in oids)
    body = encode_value(INTEGER, request_id) + encode_value(INTEGER, 0) + encode_value(INTEGER, reps)
    pdu_tlv = tlv(pdu, body + tlv(SEQUENCE, vbs))
    return tlv(SEQUENCE, bytes((INTEGER, 1, 1)) + tlv(OCTET_STRING, community) + pdu_tlv)


def _element(data: bytes, pos: int) -> tuple[int, int, int]:
    """(tag, content start, content end) of the BER element at ``pos`` (ValueError if cut)."""
    tag, first = data[pos], data[pos + 1]
    pos += 2
    if first >= 0x80:
        n = first & 0x7F
        length = int.from_bytes(data[pos : pos + n], "big")
        pos += n
    else:
        length = first
    if pos + length > len(data):
        raise ValueError("element overruns the datagram")
    return tag, pos, pos + length


def request_id_tlv(answer: bytes) -> bytes:
    """The request-id element of a response message (ValueError or IndexError if it has none)."""
    _, pos, _ = _element(answer, 0)
    _, _, v1 = _element(answer, pos)
    _, _, c1 = _element(answer, v1)
    _, p0, _ = _element(answer, c1)
    _, _, r1 = _element(answer, p0)
    return answer[p0:r1]


@dataclass(frozen=True)
class Response:
    """A response message's parts (a captured datagram, taken apart to be re-addressed)."""

    version: int
    community: bytes
    error_status: int
    error_index: int
    varbinds: bytes  # the varbind list's content

    @classmethod
    def parse(cls, data: bytes) -> Response:
        _, pos, _ = _element(data, 0)
        _, v0, v1 = _element(data, pos)
        _, c0, c1 = _element(data, v1)
        _, p0, _ = _element(data, c1)
        _, _, r1 = _element(data, p0)  # the request-id: replaced by to()
        _, s0, s1 = _element(data, r1)
        _, i0, i1 = _element(data, s1)
        _, b0, b1 = _element(data, i1)
        num = int.from_bytes
        return cls(num(data[v0:v1], "big"), data[c0:c1], num(data[s0:s1], "big"), num(data[i0:i1], "big"),
                   data[b0:b1])  # fmt: skip

    def to(self, request_id_tlv: bytes) -> bytes:
        """This response as the answer to the request with this request-id."""
        return encode_response(self.version, self.community, request_id_tlv, self.error_status,
                               self.error_index, self.varbinds)  # fmt: skip


@dataclass(eq=False)
class ScriptedAgent(asyncio.DatagramProtocol):
    """A v2c agent answering from ``table`` (dotted OID → value TLV), as scripted.

    ``before(answer)`` gives the datagrams sent ahead of each real answer; ``answer_real`` False
    sends only those. ``pad`` adds that many bytes to each answer (an OCTET STRING varbind that
    follows the real ones), to make it larger than a client's buffer.
    """

    table: dict[str, bytes]
    community: bytes = b"public"
    before: Callable[[bytes], Sequence[bytes]] = lambda answer: ()
    answer_real: bool = True
    requests: int = 0
    sent: list[bytes] = field(default_factory=list)
    transport: Any = None

    def __post_init__(self) -> None:
        self._oids = sorted(dotted(o) for o in self.table)
        self._values = {dotted(o): v for o, v in self.table.items()}

    @property
    def port(self) -> int:
        return int(self.transport.get_extra_info("sockname")[1])

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport

    def answer(self, data: bytes) -> bytes | None:
        """The real answer to a request, or None for what is not one."""
        try:
            req = decode_request(data)
        except BerError:
            return None
        if req.community != self.community:
            return None
        vbs: list[bytes] = []
        if req.pdu_type == GET:
            for oid in req.oids:
                vbs.append(varbind(encode_oid(oid), self._values.get(oid, NO_SUCH_INSTANCE_TLV)))
        elif req.pdu_type == GET_BULK:
            for _ in range(max(1, req.error_index)):
                row = []
                for k, oid in enumerate(req.oids):
                    i = bisect.bisect_right(self._oids, oid)
                    nxt = self._oids[i] if i < len(self._oids) else None
                    row.append(varbind(encode_oid(nxt or oid), self._values[nxt] if nxt else END_OF_MIB_VIEW_TLV))
                    req.oids[k] = nxt or oid
                vbs.extend(row)
        else:
            return None
        return encode_response(req.version, req.community, req.request_id_tlv, 0, 0, b"".join(vbs))

    def datagram_received(self, data: bytes, addr: Any) -> None:
        self.requests += 1
        answer = self.answer(data)
        if answer is None:
            return
        for extra in self.before(answer):
            self.sent.append(extra)
            self.transport.sendto(extra, addr)
        if self.answer_real:
            self.transport.sendto(answer, addr)


async def scripted_agent(table: dict[str, bytes], **script: Any) -> ScriptedAgent:
    """A :class:`ScriptedAgent` listening on loopback (close its ``transport`` when done)."""
    loop = asyncio.get_running_loop()
    _, agent = await loop.create_datagram_endpoint(lambda: ScriptedAgent(table, **script), local_addr=("127.0.0.1", 0))
    return agent


def column_table(oid: str, values: Sequence[bytes]) -> dict[str, bytes]:
    """A table column ``oid.1 .. oid.N`` of OCTET STRING values, then one OID past it."""
    table = {f"{oid}.{i + 1}": encode_value(OCTET_STRING, v) for i, v in enumerate(values)}
    table["1.3.6.1.6.3.1.1.1.0"] = encode_value(INTEGER, 1)  # something after the column
    return table

"""A minimal BER codec for SNMPv2c requests and responses: the simulator agent's fast path.

Only what a read-only v2c agent needs (RFC 3416 PDUs in an RFC 1901 message): decoding
GetRequest, GetNextRequest, GetBulkRequest and SetRequest messages, and encoding Response
messages from varbinds that the caller assembles from pre-encoded pieces. pysnmp builds a
pyasn1 object per value and tops out at ~15K varbinds/s; this codec works on ``bytes`` and
plain ints. SNMPv3 messages are not decoded here: :func:`peek_version` only routes them.

Every decoding error raises :class:`BerError` (a ``ValueError``); the agent counts and drops
the datagram, as real agents do with garbage.
"""

from __future__ import annotations

from dataclasses import dataclass

from wire.protobuf import U64_MAX

OID = tuple[int, ...]

# Universal and SNMP application tags (RFC 2578 §7.1, RFC 3416 §3).
INTEGER = 0x02
OCTET_STRING = 0x04
NULL = 0x05
OBJECT_IDENTIFIER = 0x06
SEQUENCE = 0x30
IP_ADDRESS = 0x40
COUNTER32 = 0x41
GAUGE32 = 0x42
TIMETICKS = 0x43
COUNTER64 = 0x46
# Varbind exception values (RFC 3416 §3): context-specific, primitive, empty.
NO_SUCH_OBJECT = 0x80
NO_SUCH_INSTANCE = 0x81
END_OF_MIB_VIEW = 0x82

# PDU tags.
GET = 0xA0
GET_NEXT = 0xA1
RESPONSE = 0xA2
SET = 0xA3
GET_BULK = 0xA5

# Error-status values used by the agent.
NO_ERROR = 0
TOO_BIG = 1
NO_ACCESS = 6

VERSION_1 = 0
VERSION_2C = 1
VERSION_3 = 3

MAX_OID_ARCS = 128  # RFC 2578 §3.5
_MAX_ARC = 0xFFFFFFFF
_U32 = 0xFFFFFFFF

_SHORT_LENGTHS = [bytes((n,)) for n in range(128)]


class BerError(ValueError):
    """A datagram that is not a well-formed message of the kind this codec decodes."""


@dataclass(slots=True)
class Request:
    """A decoded v1/v2c request; ``oid_tlvs`` keep each varbind name as received (echoed in replies)."""

    version: int
    community: bytes
    pdu_type: int
    request_id_tlv: bytes  # re-sent verbatim in the response
    error_status: int  # GetBulk: non-repeaters
    error_index: int  # GetBulk: max-repetitions
    oids: list[OID]
    oid_tlvs: list[bytes]
    varbind_list: bytes  # raw varbind-list content, echoed in error responses


def encode_length(n: int) -> bytes:
    """The BER definite length octets of ``n``."""
    if n < 128:
        return _SHORT_LENGTHS[n]
    body = n.to_bytes((n.bit_length() + 7) // 8, "big")
    return bytes((0x80 | len(body),)) + body


def tlv(tag: int, content: bytes) -> bytes:
    """One tag-length-value element."""
    if len(content) < 128:
        return bytes((tag, len(content))) + content
    return bytes((tag,)) + encode_length(len(content)) + content


def encode_oid_arcs(arcs: OID) -> bytes:
    """Base-128 content octets of sub-identifiers (no first-two-arcs folding): for index suffixes."""
    out = bytearray()
    for arc in arcs:
        if arc < 0x80:
            out.append(arc)
            continue
        chunk = [arc & 0x7F]
        arc >>= 7
        while arc:
            chunk.append(0x80 | (arc & 0x7F))
            arc >>= 7
        out.extend(reversed(chunk))
    return bytes(out)


def encode_oid_content(oid: OID) -> bytes:
    """Content octets of an OBJECT IDENTIFIER (first two arcs folded into one)."""
    if len(oid) < 2 or oid[0] > 2 or (oid[0] < 2 and oid[1] >= 40):
        raise ValueError(f"not an encodable OID: {oid!r}")
    return encode_oid_arcs((oid[0] * 40 + oid[1], *oid[2:]))


def encode_oid(oid: OID) -> bytes:
    """A complete OBJECT IDENTIFIER TLV."""
    return tlv(OBJECT_IDENTIFIER, encode_oid_content(oid))


def decode_oid(content: bytes) -> OID:
    """An OID from its content octets; rejects empty, unterminated and oversized ones."""
    if not content or content[-1] & 0x80:
        raise BerError("bad OID encoding")
    arcs: list[int] = []
    value = 0
    for byte in content:
        value = (value << 7) | (byte & 0x7F)
        if not byte & 0x80:
            arcs.append(value)
            value = 0
    first = arcs[0]
    head = (first // 40, first % 40) if first < 80 else (2, first - 80)
    oid = (*head, *arcs[1:])
    if len(oid) > MAX_OID_ARCS or max(oid) > _MAX_ARC:
        raise BerError("OID out of range")
    return oid


def _uint(tag: int, value: int) -> bytes:
    # Minimal two's-complement octets of a non-negative number.
    body = value.to_bytes((value.bit_length() >> 3) + 1, "big")
    return bytes((tag, len(body))) + body


def encode_value(tag: int, value: int | bytes | OID) -> bytes:
    """A value TLV; Counter32/TimeTicks wrap mod 2^32, Counter64 mod 2^64, Gauge32 is capped."""
    if isinstance(value, int):
        if tag == INTEGER:
            size = ((value if value >= 0 else ~value).bit_length() >> 3) + 1
            return bytes((tag, size)) + value.to_bytes(size, "big", signed=True)
        if tag == COUNTER64:
            return _uint(tag, value & U64_MAX)
        if tag == GAUGE32:
            return _uint(tag, min(max(value, 0), _U32))
        return _uint(tag, value & _U32)  # Counter32, TimeTicks
    if isinstance(value, bytes):
        return tlv(tag, value)
    return encode_oid(value)


def varbind(oid_tlv: bytes, value_tlv: bytes) -> bytes:
    """One VarBind SEQUENCE from an encoded name and an encoded value."""
    n = len(oid_tlv) + len(value_tlv)
    if n < 128:
        return bytes((SEQUENCE, n)) + oid_tlv + value_tlv
    return b"\x30" + encode_length(n) + oid_tlv + value_tlv


def _header(data: bytes, pos: int, end: int) -> tuple[int, int, int]:
    """(tag, content start, content end) of the element at ``pos``."""
    if pos + 2 > end:
        raise BerError("truncated element")
    tag = data[pos]
    if tag & 0x1F == 0x1F:
        raise BerError("multi-byte tags are not SNMP")
    first = data[pos + 1]
    pos += 2
    if first < 0x80:
        length = first
    else:
        count = first & 0x7F
        if count == 0 or count > 4 or pos + count > end:
            raise BerError("bad or indefinite length")
        length = int.from_bytes(data[pos : pos + count], "big")
        pos += count
    if pos + length > end:
        raise BerError("element overruns its container")
    return tag, pos, pos + length


def _integer(data: bytes, pos: int, end: int) -> tuple[int, int]:
    tag, start, stop = _header(data, pos, end)
    if tag != INTEGER or not 0 < stop - start <= 5:
        raise BerError("expected a 32-bit INTEGER")
    return int.from_bytes(data[start:stop], "big", signed=True), stop


def peek_version(data: bytes) -> int:
    """The msgVersion of an SNMP message (0 v1, 1 v2c, 3 v3), without decoding the rest."""
    tag, start, stop = _header(data, 0, len(data))
    if tag != SEQUENCE:
        raise BerError("not an SNMP message")
    version, _ = _integer(data, start, stop)
    return version


def decode_request(data: bytes) -> Request:
    """Decode a community-based (v1/v2c) message carrying a request PDU."""
    end = len(data)
    tag, pos, stop = _header(data, 0, end)
    if tag != SEQUENCE:
        raise BerError("not an SNMP message")
    version, pos = _integer(data, pos, stop)
    tag, cstart, pos = _header(data, pos, stop)
    if tag != OCTET_STRING:
        raise BerError("expected the community string")
    community = data[cstart:pos]
    pdu_type, pos, pdu_end = _header(data, pos, stop)
    if pdu_type & 0xE0 != 0xA0:
        raise BerError("expected a PDU")
    rid_start = pos
    _, pos = _integer(data, pos, pdu_end)
    request_id_tlv = data[rid_start:pos]
    error_status, pos = _integer(data, pos, pdu_end)
    error_index, pos = _integer(data, pos, pdu_end)
    tag, pos, list_end = _header(data, pos, pdu_end)
    if tag != SEQUENCE:
        raise BerError("expected the varbind list")
    varbind_list = data[pos:list_end]
    oids: list[OID] = []
    oid_tlvs: list[bytes] = []
    while pos < list_end:
        tag, vb_start, vb_end = _header(data, pos, list_end)
        if tag != SEQUENCE:
            raise BerError("expected a varbind")
        tag, ostart, ostop = _header(data, vb_start, vb_end)
        if tag != OBJECT_IDENTIFIER:
            raise BerError("expected a varbind name")
        _header(data, ostop, vb_end)  # the value must at least be a well-formed element
        oids.append(decode_oid(data[ostart:ostop]))
        oid_tlvs.append(data[vb_start:ostop])
        pos = vb_end
    return Request(
        version, community, pdu_type, request_id_tlv, error_status, error_index, oids, oid_tlvs, varbind_list
    )


def encode_response(
    version: int,
    community: bytes,
    request_id_tlv: bytes,
    error_status: int,
    error_index: int,
    varbinds: bytes,
) -> bytes:
    """A Response message around an already encoded varbind-list content."""
    pdu = (
        request_id_tlv
        + encode_value(INTEGER, error_status)
        + encode_value(INTEGER, error_index)
        + tlv(SEQUENCE, varbinds)
    )
    return tlv(SEQUENCE, bytes((INTEGER, 1, version)) + tlv(OCTET_STRING, community) + tlv(RESPONSE, pdu))


def response_overhead(community: bytes, request_id_tlv: bytes) -> int:
    """Upper bound of a response message's size beyond its varbind-list content."""
    # outer SEQUENCE (≤6) + version (3) + community TLV + PDU header (≤6) + request id
    # + error status and index (≤12) + varbind-list header (≤6)
    return 6 + 3 + len(tlv(OCTET_STRING, community)) + 6 + len(request_id_tlv) + 12 + 6


def normalize(tag: int, value: int) -> int:
    """An integer value as the wire carries it: wrapped counters, capped gauges."""
    if tag == COUNTER64:
        return value & U64_MAX
    if tag == GAUGE32:
        return min(max(value, 0), _U32)
    if tag in (COUNTER32, TIMETICKS):
        return value & _U32
    return value

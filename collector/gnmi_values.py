"""The gNMI wire and value layer under :mod:`collector.gnmi_decode`.

* :data:`Response` / :data:`Varints`: private messages with gnmi.proto's field numbers whose
  ``prefix``/``update``/``delete`` fields are ``bytes``, so the C parser hands over each Update
  serialized; and a packed ``repeated uint64`` that decodes many varints in one call. They
  live in a private descriptor pool: nothing collides with pygnmi's ``gnmi_pb2``.
* TypedValue → Python (:func:`scalar`), then the checks of each leaf kind (:func:`to_uint`,
  :func:`to_status`, :func:`to_speed`, :func:`to_text`), which raise :class:`Bad` with one of
  the invalid kinds below. Every value a switch sends is checked against a bound (the ``MAX_*``
  below) before any arithmetic on it: a switch is an untrusted peer, and ``10**precision`` or
  ``int()`` of a long digit string costs what the sender chooses.
* :func:`flatten`: a JSON value (RFC 7951 containers and lists, SONiC's wildcard tables) as
  (leaf path, scalar) pairs.
* The decoder's state: :class:`PortState` (what a port's readings carry) and :class:`Resolver`
  (per-profile path → leaf caches).
"""

from __future__ import annotations

import math
import re
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory  # type: ignore[import-untyped, unused-ignore]

from collector.profiles import Elem, Kind, Leaf, Profile, strip_module
from collector.records import LldpNeighborReading
from wire.protobuf import U64_MAX

WRONG_TYPE = "wrong_type"  # a value of a type the leaf cannot take (bool for a counter, bytes, ...)
UNKNOWN_PATH = "unknown_path"  # a path no profile family knows
NOT_A_NUMBER = "not_a_number"  # a string or double that is not a whole number
NEGATIVE = "negative"
OUT_OF_RANGE = "out_of_range"  # above U64_MAX (2^64 - 1)
BAD_ENUM = "bad_enum"  # an oper-status or speed the profile cannot read
BAD_JSON = "bad_json"
MALFORMED = "malformed"  # bytes that do not parse as a gNMI message
OVERSIZE = "oversize"  # a response above the configured maximum
TOO_LONG = "too_long"  # a string above MAX_TEXT characters (a value, or an LLDP neighbour id)
TOO_DEEP = "too_deep"  # a JSON value nested deeper than MAX_DEPTH
TOO_MANY = "too_many"  # an LLDP neighbour beyond MAX_NEIGHBORS on one port
DECODE_ERROR = "decode_error"  # a message the decoder failed on (a bug): skipped, the stream goes on

#: Decimal64.precision is a uint32 the switch chooses; ``10**precision`` is arithmetic on it.
#: Its ``digits`` is an int64 (at most 19 digits), so any precision above 19 is |value| < 1; 30
#: leaves room for zero or a fraction sent with extra precision at a cost of nothing.
MAX_PRECISION = 30
#: Decimal digits of an unsigned counter (uint64: 2^64 - 1 has 20), leading zeros aside.
MAX_DIGITS = 20
#: Characters of one string value: 8x the longest LLDP TLV string (511 octets, IEEE 802.1AB 8.5).
MAX_TEXT = 4096
#: Nesting of a json/json_ietf value: OpenConfig's deepest counter leaf is ~10 below its path.
MAX_DEPTH = 64
#: LLDP remote-table entries of one port (a port has one neighbour, a shared segment a few).
MAX_NEIGHBORS = 128
#: A speed in bits/s (the bigint column of port_counters).
MAX_SPEED = (1 << 63) - 1

_DOWN = frozenset({"DOWN", "LOWER_LAYER_DOWN", "DORMANT", "NOT_PRESENT", "TESTING", "UNKNOWN"})
_SPEED = re.compile(r"SPEED_([0-9]{1,12})(MB|GB)")  # ASCII digits, bounded: no int() of 4301 digits
_UNIT = {"MB": 10**6, "GB": 10**9}


def _wire_classes() -> tuple[Any, Any]:
    """``SubscribeResponse`` with bytes-typed prefix/updates, and a packed uint64 list."""
    t = descriptor_pb2.FieldDescriptorProto
    fdp = descriptor_pb2.FileDescriptorProto(
        name="fabricmon/gnmi_fast.proto", package="fabricmon.fast", syntax="proto3"
    )

    def message(name: str, *spec: tuple[str, int, int, bool, str]) -> None:
        msg = fdp.message_type.add(name=name)
        for fname, number, ftype, repeated, type_name in spec:
            f = msg.field.add(name=fname, number=number, type=ftype)
            f.label = t.LABEL_REPEATED if repeated else t.LABEL_OPTIONAL
            if type_name:
                f.type_name = type_name

    # gnmi.proto: Notification{timestamp=1, prefix=2, update=4, delete=5}; SubscribeResponse{update=1,
    # sync_response=3}. Other fields (alias, atomic, error, extension) are kept as unknown fields.
    message(
        "Notification",
        ("timestamp", 1, t.TYPE_INT64, False, ""),
        ("prefix", 2, t.TYPE_BYTES, False, ""),
        ("update", 4, t.TYPE_BYTES, True, ""),
        ("delete", 5, t.TYPE_BYTES, True, ""),
    )
    message(
        "Response",
        ("update", 1, t.TYPE_MESSAGE, False, ".fabricmon.fast.Notification"),
        ("sync_response", 3, t.TYPE_BOOL, False, ""),
    )
    message("Varints", ("v", 1, t.TYPE_UINT64, True, ""))
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    get = message_factory.GetMessageClass
    return get(pool.FindMessageTypeByName("fabricmon.fast.Response")), get(
        pool.FindMessageTypeByName("fabricmon.fast.Varints")
    )


Response, Varints = _wire_classes()


def path_elems(path: Any) -> tuple[Elem, ...]:
    """A ``gnmi_pb2.Path`` as profile elements (module prefixes stripped, keys sorted)."""
    return tuple((strip_module(e.name), tuple(sorted(e.key.items()))) for e in path.elem)


class Bad(Exception):
    """A value the leaf cannot take; ``args[0]`` is the invalid kind."""


_WRONG = object()


def scalar(val: Any, which: str | None) -> Any:
    """A TypedValue's Python value (``_WRONG`` for kinds no leaf takes)."""
    if which in ("string_val", "uint_val", "int_val", "bool_val", "double_val", "float_val", "ascii_val"):
        return getattr(val, which)
    if which == "decimal_val":
        d = val.decimal_val
        return decimal(d.digits, d.precision)
    return _WRONG


def decimal(digits: int, precision: int) -> int | float:
    """A Decimal64 as an int when it is whole, else a float; the precision bounded first."""
    if precision == 0:
        return digits
    if precision > MAX_PRECISION:  # before 10**precision: a uint32 exponent is minutes of CPU
        raise Bad(OUT_OF_RANGE)
    scale: int = 10**precision
    whole, rest = divmod(digits, scale)
    if rest == 0:
        return whole  # exact, where digits / scale would round a 19-digit counter
    value = digits / scale
    if value.is_integer():  # a fraction below a float's resolution: not a whole number all the same
        raise Bad(NOT_A_NUMBER)
    return value


_DIGITS = re.compile(r"\+?[0-9]+")


def to_uint(value: Any) -> int:
    t = value.__class__
    if t is int:
        if value < 0:
            raise Bad(NEGATIVE)
        if value > U64_MAX:
            raise Bad(OUT_OF_RANGE)
        return int(value)
    if t is str:
        if 0 < len(value) < MAX_DIGITS and value.isascii() and value.isdigit():
            return int(value)  # the common form ("12345"): below 10^19, no sign, no spaces
        return to_uint(_text_int(value))
    if t is float:
        if not math.isfinite(value) or not value.is_integer():
            raise Bad(NOT_A_NUMBER)
        return to_uint(int(value))
    raise Bad(WRONG_TYPE)  # bool, bytes, lists, ...


def _text_int(value: str) -> int:
    """A decimal text's integer (spaces and a ``+`` allowed), its length bounded before ``int()``."""
    if len(value) > MAX_TEXT:
        raise Bad(TOO_LONG)
    text = value.strip()
    if _DIGITS.fullmatch(text):
        if len(text) > MAX_DIGITS:  # before int(): its cost grows with the digits (and it raises past 4300)
            text = text.lstrip("+").lstrip("0") or "0"
            if len(text) > MAX_DIGITS:
                raise Bad(OUT_OF_RANGE)
        return int(text)
    if text.startswith("-") and _DIGITS.fullmatch(text[1:]):
        raise Bad(NEGATIVE)
    raise Bad(NOT_A_NUMBER)


def to_status(value: Any) -> bool:
    if value.__class__ is bool:
        return bool(value)
    if value.__class__ is not str:
        raise Bad(WRONG_TYPE)
    if len(value) > MAX_TEXT:
        raise Bad(TOO_LONG)
    word = strip_module(value).strip().upper()
    if word == "UP":
        return True
    if word in _DOWN:
        return False
    raise Bad(BAD_ENUM)


def to_speed(value: Any, scale: int) -> int | None:
    if value.__class__ is str:
        if len(value) > MAX_TEXT:
            raise Bad(TOO_LONG)
        word = strip_module(value).strip().upper()
        match = _SPEED.fullmatch(word)
        if match:
            speed = int(match.group(1)) * _UNIT[match.group(2)]
        elif word == "SPEED_UNKNOWN":
            return None
        elif not _DIGITS.fullmatch(word):
            raise Bad(BAD_ENUM)
        else:
            speed = to_uint(value) * scale
    else:
        speed = to_uint(value) * scale
    if speed > MAX_SPEED:
        raise Bad(OUT_OF_RANGE)
    return speed


def to_text(value: Any) -> str:
    if value.__class__ in (str, int, float):
        text = str(value)  # a JSON int has at most 4300 digits (json.loads refuses more)
        if len(text) > MAX_TEXT:
            raise Bad(TOO_LONG)
        return text
    raise Bad(WRONG_TYPE)


def flatten(elems: tuple[Elem, ...], doc: Any, list_keys: Any, out: list[tuple[tuple[Elem, ...], Any]]) -> None:
    """A JSON value at ``elems`` as (leaf path, scalar) pairs.

    Objects nest containers (RFC 7951; module prefixes stripped), arrays of objects are YANG
    list entries keyed by ``list_keys``. A path with a wildcard element name carries its JSON
    rooted at that element (SONiC's virtual paths: ``COUNTERS/Ethernet*`` answers
    ``{"Ethernet0": {...}}``). Raises :class:`Bad` (TOO_DEEP) for objects nested deeper than
    :data:`MAX_DEPTH`; ``out`` then holds a part of the pairs.
    """
    for i, (name, _) in enumerate(elems):
        if "*" in name:
            elems = elems[:i]
            break
    _walk(elems, doc, list_keys, out, 0)


def _walk(
    elems: tuple[Elem, ...], doc: Any, list_keys: Any, out: list[tuple[tuple[Elem, ...], Any]], depth: int
) -> None:
    if not isinstance(doc, dict):
        out.append((elems, doc))
        return
    if depth >= MAX_DEPTH:
        raise Bad(TOO_DEEP)
    depth += 1
    for key, value in doc.items():
        name = strip_module(key)
        keynames = list_keys.get(name)
        if keynames and isinstance(value, list) and all(isinstance(e, dict) for e in value):
            for entry in value:
                plain = {strip_module(k): v for k, v in entry.items()}
                keys = tuple(sorted((k, str(plain[k])) for k in keynames if k in plain))
                rest = {k: v for k, v in entry.items() if strip_module(k) not in keynames}
                _walk((*elems, (name, keys)), rest, list_keys, out, depth)
        else:
            _walk((*elems, (name, ())), value, list_keys, out, depth)


# --- decoder building blocks -----------------------------------------------------------------

MAX_CACHE = 500_000
UNKNOWN = Leaf(Kind.IGNORE, field="<unknown>")  # the cached marker of an unknown path
MALFORMED_PATH = Leaf(Kind.IGNORE, field="<malformed>")  # the cached marker of path bytes protobuf refuses


class PortState:
    """What one switch port last reported that later readings carry (shared by its streams)."""

    __slots__ = ("last_change", "lldp", "oper", "pfc_rx", "pfc_tx", "speed")

    def __init__(self) -> None:
        self.oper: bool | None = None
        self.speed: int | None = None
        self.last_change: int | None = None
        self.pfc_rx: list[int | None] = [None] * 8
        self.pfc_tx: list[int | None] = [None] * 8
        self.lldp: dict[str, dict[str, str]] = {}


class Resolver:
    """Per-profile resolution caches, shared by every stream that uses the profile."""

    def __init__(self, profile: Profile) -> None:
        self.profile = profile
        self.shapes: dict[tuple[str, tuple[Elem, ...]], dict[bytes, int | Leaf]] = {}
        self.paths: dict[tuple[Elem, ...], tuple[str | None, int | Leaf]] = {}

    def leaf(self, elems: tuple[Elem, ...]) -> tuple[str | None, int | Leaf]:
        """(port, slot) of a full path: a row index for plain unsigned leaves, else the Leaf."""
        found = self.paths.get(elems)
        if found is None:
            port, leaf = self.profile.resolve(elems)
            found = (port, _slot(leaf))
            if len(self.paths) >= MAX_CACHE:
                self.paths.clear()
            self.paths[elems] = found
        return found


def _slot(leaf: Leaf | None) -> int | Leaf:
    if leaf is None:
        return UNKNOWN
    if leaf.kind in (Kind.COUNTER, Kind.TIMETICKS) and leaf.scale == 1 and leaf.index >= 0:
        return leaf.index
    return leaf


def lldp_neighbor(entry: dict[str, str]) -> LldpNeighborReading:
    """One remote-table entry's fields as a record ("" for what it did not report)."""
    return LldpNeighborReading(
        system_name=entry.get("system_name", ""),
        port_id=entry.get("port_id", ""),
        port_description=entry.get("port_description", ""),
        chassis_id=entry.get("chassis_id", ""),
    )


def neighbor_order(nid: str) -> tuple[int, str]:
    """Sort key of neighbour ids: numeric ids (ASCII, up to 18 digits) in numeric order first.

    Total on any string: ``'²'.isdigit()`` is true and ``int('²')`` raises; ``int()`` of more
    than 4300 digits raises too (issue 28: either disabled the stream for good).
    """
    if len(nid) <= 18 and nid.isascii() and nid.isdigit():
        return (int(nid), "")
    return (1 << 62, nid)


def pfc_row(values: list[int | None], last: list[int | None]) -> tuple[int, ...] | None:
    """The 8 priorities of this reading; missing ones carried from the last (None until all known)."""
    if values.count(None) == len(values):
        return None
    for i, v in enumerate(values):
        if v is None:
            values[i] = last[i]
        else:
            last[i] = v
    if None in values:
        return None
    return tuple(values)  # type: ignore[arg-type]

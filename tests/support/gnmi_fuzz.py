"""What the gNMI decoder's fuzz tests share: decoding with and without the C, and hostile inputs.

Used by tests/unit/collector/test_gnmi_fuzz.py (hypothesis and the corpus), tests/unit/collector/test_sanitizers.py
(the same under ASan/UBSan, in a child interpreter) and tests/fuzz/fuzz_gnmi_decode.py
(atheris). ``python -m tests.support.gnmi_fuzz`` writes the seed corpus (:data:`SEEDS`) to
tests/fixtures/fuzz/gnmi/. Sizes are bounded here, not times: every generated message stays below a few tens
of KiB, so a decoder whose work is linear in its input finishes each in milliseconds, and one
that is not (``10**precision``, ``int()`` of 4301 digits, unbounded recursion) is caught by the
reproductions in the corpus rather than by a clock.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from hypothesis import strategies as st
from pygnmi.spec.v080 import gnmi_pb2

import collector.gnmi_decode as gnmi_decode
from collector import speedups
from collector.gnmi_counters_fec import CountersFec
from collector.gnmi_decode import StreamDecoder
from collector.gnmi_values import PortState, Resolver
from collector.profile_load import load_profile
from tests.unit.collector.test_gnmi_decode import path
from wire.protobuf import varint

CORPUS = Path(__file__).resolve().parents[1] / "fixtures" / "fuzz" / "gnmi"
SW = "lf-g1-r1"
TS = 1_700_000_000_000_000_000
PROFILES = ("openconfig", "sonic", "srlinux")
PROBE = 424_242  # the value of the message after the hostile ones: the stream still decodes

IF = "/interfaces/interface[name=swp1]"
PFC = "/qos/interfaces/interface[interface-id=swp1]"
LLDP = "/lldp/interfaces/interface[name=swp1]"
SRL = "/interface[name=ethernet-1/1]"


# --- building messages ---------------------------------------------------------------------


def raw_update(path_bytes: bytes, typed_value: bytes) -> bytes:
    """A serialized Update{path, val} from already serialized parts (anything, well-formed or not)."""
    return b"\x0a" + varint(len(path_bytes)) + path_bytes + b"\x1a" + varint(len(typed_value)) + typed_value


def raw_response(prefix: bytes, *updates: bytes, ts: int = TS, deletes: Sequence[bytes] = ()) -> bytes:
    """A SubscribeResponse{update: Notification} around serialized prefix, updates and deletes."""
    body = b"\x08" + varint(ts) + b"\x12" + varint(len(prefix)) + prefix
    body += b"".join(b"\x22" + varint(len(u)) + u for u in updates)
    body += b"".join(b"\x2a" + varint(len(d)) + d for d in deletes)
    return b"\x0a" + varint(len(body)) + body


def prefix_bytes(text: str, target: str = SW) -> bytes:
    data: bytes = path(text, target).SerializeToString()
    return data


def path_bytes(text: str) -> bytes:
    data: bytes = path(text).SerializeToString()
    return data


def typed(**val: Any) -> bytes:
    data: bytes = gnmi_pb2.TypedValue(**val).SerializeToString()
    return data


def decimal(digits: int, precision: int) -> bytes:
    return typed(decimal_val=gnmi_pb2.Decimal64(digits=digits, precision=precision))


def one(prefix: str, leaf: str, value: bytes, ts: int = TS) -> bytes:
    """One notification with one update of ``leaf`` (below ``prefix``) whose TypedValue is ``value``."""
    return raw_response(prefix_bytes(prefix), raw_update(path_bytes(leaf), value), ts=ts)


def nested_json(depth: int) -> bytes:
    return b'{"a":' * depth + b"1" + b"}" * depth


def probe(profile: str) -> bytes:
    """A plain counter message of ``profile`` at a later time: decoded when the stream survived."""
    ts = TS + 10**12
    if profile == "sonic":
        return raw_response(
            prefix_bytes("COUNTERS/Ethernet0", "COUNTERS_DB"),
            raw_update(path_bytes("SAI_PORT_STAT_IF_IN_OCTETS"), typed(string_val=str(PROBE))),
            ts=ts,
        )
    if profile == "srlinux":
        return one(SRL, "statistics/in-octets", typed(uint_val=PROBE), ts)
    return one(IF, "state/counters/in-octets", typed(uint_val=PROBE), ts)


# --- decoding --------------------------------------------------------------------------------


@contextlib.contextmanager
def c_path(enabled: bool) -> Iterator[None]:
    """The decoder with its C fast path (``enabled``) or the Python alone, for the block."""
    module = vars(gnmi_decode)
    saved = module["_c_fast_values"]
    module["_c_fast_values"] = speedups.fast_values if enabled else None
    try:
        yield
    finally:
        module["_c_fast_values"] = saved


def _row(reading: Any) -> dict[str, Any]:
    row = {k: v for k, v in asdict(reading).items() if k != "received_ns"}
    if abs(row["time_ns"] - time.time_ns()) < 3600 * 10**9:  # a notification without a time: receive time
        row["time_ns"] = "received"
    return row


def decode(messages: Sequence[bytes], profile: str, *, c: bool, close_each: bool = True) -> dict[str, Any]:
    """Everything a fresh stream's decoder says about ``messages`` (with or without the C).

    ``close_each``: close the group and begin again (a resubscribe) after each message; else
    notifications of one timestamp gather into one reading, as on a live stream.

    ``failures`` counts exceptions the decoder caught itself (``decode_error``): a fuzz test
    expects none, as every input has an answer that is not a bug.
    """
    invalid: Counter[str] = Counter()
    ports: dict[str, PortState] = {}
    count = lambda what, n: invalid.update({what: n})  # noqa: E731
    loaded = load_profile(profile)
    # SONiC: FEC cut from COUNTERS; an interval no test spans, so what is kept never hangs on the wall clock
    fec = CountersFec(SW, count, every_s=1e6) if loaded.fec_in_counters else None
    with c_path(c):
        dec = StreamDecoder(SW, Resolver(loaded), ports, count, max_message_bytes=1 << 20, tap=fec)
        dec.begin()
        syncs = 0
        for m in messages:
            syncs += dec.feed(m)
            if close_each:
                dec.close_group()
                dec.begin()  # what a resubscribe does: it must never raise
        dec.close_group()
        port_rows, lldp = dec.take()
    return {
        "ports": [_row(r) for r in port_rows],
        "lldp": [_row(t) for t in lldp],
        "values": dec.values,
        "ignored": dec.ignored,
        "notifications": dec.notifications,
        "syncs": syncs,
        "invalid": dict(invalid),
        "failures": dec.failures + (fec.failures if fec is not None else 0),
        "fec": [(f.port, f.bins, f.corrected, f.uncorrectable) for f in fec.take()] if fec is not None else [],
    }


def check(messages: Sequence[bytes], profile: str, *, close_each: bool = True) -> dict[str, Any]:
    """Decode with and without the C; assert they agree, nothing failed and the probe after decoded."""
    seq = [*messages, probe(profile)]
    with_c = decode(seq, profile, c=True, close_each=close_each)
    without = decode(seq, profile, c=False, close_each=close_each)
    assert with_c == without, (with_c, without)
    assert without["failures"] == 0, without
    last = [r for r in without["ports"] if r["time_ns"] == TS + 10**12]
    assert last and last[-1]["in_octets"] == PROBE, without
    return without


def corpus() -> list[Path]:
    return sorted(p for p in CORPUS.iterdir() if p.suffix == ".bin")


# --- hypothesis strategies -------------------------------------------------------------------

LEAVES = {
    IF: [
        "state/counters/in-octets",
        "state/counters/out-octets",
        "state/counters/in-errors",
        "state/counters/last-clear",
        "state/oper-status",
        "ethernet/state/port-speed",
        "state/admin-status",
        "state/counters/no-such-counter",
        "",
        "state",
    ],
    PFC: [
        "switch-priority[priority=3]/state/counters/in-pause-pkts",
        "switch-priority[priority=\u00b2]/state/counters/in-pause-pkts",
        "switch-priority[priority=9]/state/counters/out-pause-pkts",
    ],
    LLDP: [
        "neighbors/neighbor[id=1]/state/system-name",
        "neighbors/neighbor[id=\u00b2]/state/port-id",
        "neighbors/neighbor[id=0012]/state/chassis-id",
        "neighbors/neighbor[id=x]",
        "neighbors",
    ],
    SRL: ["statistics/in-octets", "last-change", "ethernet/port-speed", "oper-state"],
    "COUNTERS/Ethernet0": ["SAI_PORT_STAT_IF_IN_OCTETS", "SAI_PORT_STAT_PFC_3_RX_PKTS", ""],
    "COUNTERS/Ethernet*": [""],
    "PORT_TABLE": ["", "Ethernet0/speed"],
    "LLDP_ENTRY_TABLE/Ethernet0": ["", "lldp_rem_sys_name"],
    "": ["interfaces/interface[name=swp2]/state/counters/in-octets", "no/such/path"],
}

_TEXT = st.text(st.sampled_from('0123456789 +-.:_eE\u00b2\u0664\uff11abcUPDOWNSPEED_GBMupdown\x00"{}[]'), max_size=40)
_LONG = st.builds(lambda c, n: c * n, st.sampled_from(["1", "0", "9", "\u00b2", "a"]), st.integers(0, 5000))
_STRINGS = st.one_of(
    _TEXT,
    _LONG,
    st.builds(lambda d: f"SPEED_{d}GB", _LONG),
    st.sampled_from(["2023-11-15T05:50:40.391Z", "9999-12-31T23:59:59Z", "0001-01-01T00:00:00Z", "UP", "SPEED_400GB"]),
)
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats() | _TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_TEXT, inner, max_size=3),
    max_leaves=12,
)


_I64 = st.integers(-(2**63), 2**63 - 1)
#: A serialized TypedValue of any kind, or bytes that only look like one.
TYPED_VALUES = st.one_of(
    st.builds(lambda v: typed(uint_val=v), st.integers(0, 2**64 - 1)),
    st.builds(lambda v: typed(int_val=v), _I64),
    st.builds(lambda v: typed(string_val=v), _STRINGS),
    st.builds(decimal, _I64, st.integers(0, 2**32 - 1)),
    st.builds(decimal, _I64, st.integers(0, 40)),
    st.builds(lambda v: typed(double_val=v), st.floats()),
    st.builds(lambda v: typed(bool_val=v), st.booleans()),
    st.builds(lambda v: typed(json_ietf_val=json.dumps(v).encode()), _JSON),
    st.builds(lambda d: typed(json_val=nested_json(d)), st.integers(0, 1200)),
    st.builds(lambda b: b"\x18" + b, st.binary(max_size=12)),  # the fast path's layout, or almost
    st.builds(lambda v: typed(ascii_val=v), _TEXT),
    st.builds(lambda v: typed(bytes_val=v), st.binary(max_size=8)),
    st.binary(max_size=16),
)


@st.composite
def update_bytes(draw: st.DrawFn, prefix: str) -> bytes:
    leaf = draw(st.sampled_from(LEAVES[prefix]))
    p = path(leaf)
    if draw(st.integers(0, 9)) == 0:
        p.element.append(draw(st.sampled_from(["interfaces", "x"])))  # the deprecated string path
    pb: bytes = p.SerializeToString()
    if draw(st.integers(0, 19)) == 0:
        pb = draw(st.binary(max_size=20))
    return raw_update(pb, draw(TYPED_VALUES))


@st.composite
def responses(draw: st.DrawFn) -> bytes:
    """A SubscribeResponse of a known family's prefix with hostile updates (or a sync_response)."""
    if draw(st.integers(0, 15)) == 0:
        data: bytes = gnmi_pb2.SubscribeResponse(sync_response=True).SerializeToString()
        return data
    prefix = draw(st.sampled_from(sorted(LEAVES)))
    target = "COUNTERS_DB" if prefix.startswith("COUNTERS") else "APPL_DB" if prefix.isupper() else SW
    ups = draw(st.lists(update_bytes(prefix), max_size=6))
    dels = draw(st.lists(st.sampled_from([path_bytes(x) for x in LEAVES[prefix]]), max_size=2))
    ts = draw(st.sampled_from([TS, TS + 1, 0, -5, 2**63 - 1]))
    return raw_response(prefix_bytes(prefix, target), *ups, ts=ts, deletes=dels)


@st.composite
def mutated(draw: st.DrawFn, seeds: Sequence[bytes]) -> bytes:
    """A seed (a corpus file or a generated response) with a few bytes flipped, cut, grown or moved."""
    from_seed: bool = bool(seeds) and draw(st.booleans())
    data = bytearray(draw(st.sampled_from(list(seeds))) if from_seed else draw(responses()))
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.integers(0, 4))
        at = draw(st.integers(0, len(data)))
        if op == 0 and at < len(data):
            data[at] = draw(st.integers(0, 255))
        elif op == 1:
            data[at:at] = draw(st.binary(min_size=1, max_size=4))
        elif op == 2:
            del data[at : at + draw(st.integers(1, 8))]
        elif op == 3:
            del data[at:]
        else:
            data[at:at] = data[max(0, at - 16) : at]
    return bytes(data)


# --- the seed corpus -------------------------------------------------------------------------

_IN = "state/counters/in-octets"
_OUT = "state/counters/out-octets"
_NBR = "neighbors/neighbor[id={}]/state/system-name"
_SONIC_DOC = {"Ethernet0": {"SAI_PORT_STAT_IF_IN_OCTETS": "1", "SAI_PORT_STAT_PFC_3_RX_PKTS": "4"}}


def _sonic(doc: Any, table: str = "COUNTERS/Ethernet*", db: str = "COUNTERS_DB") -> bytes:
    return raw_response(prefix_bytes(table, db), raw_update(b"", typed(json_ietf_val=json.dumps(doc).encode())))


def _element_path() -> bytes:
    p = path(_IN)
    p.element.extend(["interfaces", "interface", "swp1", "state", "counters", "in-octets"])
    data: bytes = p.SerializeToString()
    return data


def _lldp_many(n: int) -> bytes:
    ups = [raw_update(path_bytes(_NBR.format(i)), typed(string_val=f"peer{i}")) for i in range(n)]
    return raw_response(prefix_bytes(LLDP), *ups)


#: file name → one SubscribeResponse. ``issue28-*`` reproduce the campaign of issue 28 (each
#: once raised, stalled the worker, or was stored where protobuf refuses it); ``ok-*`` are the
#: shapes switches send; ``bad-*`` more hostile ones found while fixing it.
SEEDS: dict[str, bytes] = {
    "issue28-decimal-precision-uint32-max.bin": one(IF, _IN, decimal(5, 2**32 - 1)),
    "issue28-decimal-precision-10e7.bin": one(IF, _IN, decimal(5, 10**7)),
    "issue28-lldp-id-superscript-two.bin": one(LLDP, _NBR.format("\u00b2"), typed(string_val="peer")),
    "issue28-lldp-id-4301-digits.bin": one(LLDP, _NBR.format("1" * 4301), typed(string_val="peer")),
    "issue28-counter-4301-digits.bin": one(IF, _IN, typed(string_val="1" * 4301)),
    "issue28-speed-4301-digits.bin": one(IF, "ethernet/state/port-speed", typed(string_val=f"SPEED_{'4' * 4301}GB")),
    "issue28-pfc-priority-superscript-two.bin": one(
        PFC, "switch-priority[priority=\u00b2]/state/counters/in-pause-pkts", typed(uint_val=1)
    ),
    "issue28-json-ietf-nested-1100.bin": one(IF, "state/counters", typed(json_ietf_val=nested_json(1100))),
    "issue28-path-element-deprecated.bin": raw_response(prefix_bytes(IF), raw_update(_element_path(), b"\x18\x05")),
    "issue28-uint-empty-then-two-varints.bin": raw_response(
        prefix_bytes(IF), raw_update(path_bytes(_IN), b"\x18"), raw_update(path_bytes(_OUT), b"\x18\x05\x07")
    ),
    "ok-counters-proto.bin": raw_response(
        prefix_bytes(IF),
        raw_update(path_bytes(_IN), typed(uint_val=2**64 - 1)),
        raw_update(path_bytes(_OUT), typed(uint_val=7)),
        raw_update(path_bytes("state/oper-status"), typed(string_val="UP")),
        raw_update(path_bytes("ethernet/state/port-speed"), typed(string_val="openconfig-if-ethernet:SPEED_400GB")),
    ),
    "ok-counters-strings.bin": one(IF, _IN, typed(string_val="12345678901234567890")),
    "ok-decimal-whole.bin": one(IF, _IN, decimal(1200, 2)),
    "ok-decimal-zero-precision-30.bin": one(IF, _IN, decimal(0, 30)),
    "ok-pfc.bin": one(PFC, "switch-priority[priority=3]/state/counters/in-pause-pkts", typed(uint_val=9)),
    "ok-lldp.bin": one(LLDP, _NBR.format("1"), typed(string_val="spine-01")),
    "ok-sonic-counters.bin": _sonic(_SONIC_DOC),
    "ok-sonic-port-table.bin": _sonic({"Ethernet0": {"oper_status": "up", "speed": "400000"}}, "PORT_TABLE", "APPL_DB"),
    "ok-sonic-key-deleted.bin": _sonic({"Ethernet0": {}}, "PORT_TABLE", "APPL_DB"),
    "ok-srlinux-last-change.bin": one(SRL, "last-change", typed(string_val="2023-11-15T05:50:40.391Z")),
    "ok-sync-response.bin": gnmi_pb2.SubscribeResponse(sync_response=True).SerializeToString(),
    "ok-delete-interface.bin": raw_response(prefix_bytes(IF), deletes=[b""]),
    "bad-decimal-fraction.bin": one(IF, _IN, decimal(2**63 - 1, 1)),
    "bad-counter-unicode-digits.bin": one(IF, _IN, typed(string_val="\u0664\u0662")),
    "bad-counter-leading-zeros.bin": one(IF, _IN, typed(string_val="0" * 300 + "7")),
    "bad-counter-21-digits.bin": one(IF, _IN, typed(string_val="1" * 21)),
    "bad-speed-unicode-digits.bin": one(IF, "ethernet/state/port-speed", typed(string_val="SPEED_\u0664GB")),
    "bad-speed-above-bigint.bin": one(SRL, "ethernet/port-speed", typed(uint_val=2**64 - 1)),
    "bad-lldp-id-5000-chars.bin": one(LLDP, _NBR.format("x" * 5000), typed(string_val="peer")),
    "bad-lldp-text-5000-chars.bin": one(LLDP, _NBR.format("1"), typed(string_val="x" * 5000)),
    "bad-lldp-200-neighbours.bin": _lldp_many(200),
    "bad-json-nested-65.bin": one(IF, "state", typed(json_ietf_val=nested_json(65))),
    "bad-json-number-5000-digits.bin": one(IF, _IN, typed(json_ietf_val=b"1" * 5000)),
    "bad-sonic-nested-900.bin": _sonic({"Ethernet0": json.loads(nested_json(900))}),
    "bad-date-year-9999.bin": one(SRL, "last-change", typed(string_val="9999-12-31T23:59:59Z")),
    "bad-date-unicode-digits.bin": one(SRL, "last-change", typed(string_val="2023-11-15T05:50:40.\u0664Z")),
    "bad-varint-11-bytes.bin": raw_response(
        prefix_bytes(IF), raw_update(path_bytes(_IN), b"\x18" + b"\xff" * 10 + b"\x01")
    ),
    "bad-path-not-protobuf.bin": raw_response(prefix_bytes(IF), raw_update(b"\xff\xff", b"\x18\x05")),
    "bad-truncated.bin": one(IF, _IN, typed(uint_val=5))[:-3],
}


def main() -> None:
    CORPUS.mkdir(parents=True, exist_ok=True)
    for old in CORPUS.glob("*.bin"):
        old.unlink()
    for name, data in SEEDS.items():
        (CORPUS / name).write_bytes(data)
    print(f"gnmi: {len(SEEDS)} seeds in {CORPUS}")


if __name__ == "__main__":
    main()

"""Writes the fuzz seed corpora in tests/fixtures/fuzz/: ``python -m tests.support.fuzz_corpus``.

* ``snmp/ok-*.bin``: real SNMP responses, captured from snmpsim serving snmpsim-data's
  recordings of real switches (GETBULK of the columns the collector walks, GET of scalars);
  ``snmp/bad-*.bin``: datagrams that once broke a parser (see the README there).
* ``spool/ok-*.batch``: real version 2 batches (every value kind) and version 1 pickles;
  ``spool/bad-*.batch``: corrupted and hostile batches, each refused by the reader.

The files are committed; this script documents how they were made and remakes them.
"""

from __future__ import annotations

import hashlib
import json
import pickle
import shutil
import socket
import struct
import tempfile
import zlib
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

from simulator.snmp_ber import GET, GET_BULK
from store.records import LinkEvent, PortSample
from store.spool_format import MAGIC, encode
from tests.support.snmp_datagrams import request
from tests.support.snmpsim import recording, serving

FUZZ = Path(__file__).parents[1] / "fixtures" / "fuzz"
#: community → snmpsim-data recording of a real device
RECORDINGS = {
    "arista": "cloud/arista-dcs-7150s-52-cl.snmprec.bz2",
    "nx": "network/switch/cisco-n5000.snmprec.bz2",
    "hw": "network/switch/huawei-s12704.snmprec.bz2",
    "jn": "network/router/juniper-mx960-16-1r6-7-a.snmprec.bz2",
}
WALKED = ("1.3.6.1.2.1.1", "1.3.6.1.2.1.2", "1.3.6.1.2.1.31", "1.0.8802.1.1.2")
#: (name, pdu, oids, max-repetitions)
REQUESTS = [
    ("get-system", GET, ["1.3.6.1.2.1.1.3.0", "1.3.6.1.2.1.1.1.0", "1.3.6.1.2.1.1.5.0"], 0),
    ("bulk-ifname", GET_BULK, ["1.3.6.1.2.1.31.1.1.1.1"], 20),
    ("bulk-counters", GET_BULK, ["1.3.6.1.2.1.31.1.1.1.6", "1.3.6.1.2.1.31.1.1.1.10", "1.3.6.1.2.1.2.2.1.8"], 8),
    ("bulk-lldp", GET_BULK, ["1.0.8802.1.1.2.1.4.1.1.9", "1.0.8802.1.1.2.1.4.1.1.7"], 10),
    ("bulk-end", GET_BULK, ["1.3.6.1.2.1.31.1.1.1.19"], 5),  # past the walked subtrees: endOfMibView
]


def capture_snmp(out: Path) -> int:
    """Each recording's answers to :data:`REQUESTS`; the number of datagrams written."""
    paths = {c: recording(rel) for c, rel in RECORDINGS.items()}
    found = {c: p for c, p in paths.items() if p is not None}
    if not found:
        raise SystemExit("snmpsim and snmpsim-data are not installed")
    written = 0
    with tempfile.TemporaryDirectory() as tmp, serving(found, Path(tmp), subtrees=WALKED) as address:
        host, port = address.rsplit(":", 1)
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            sock.settimeout(5)
            for community in found:
                for i, (name, pdu, oids, reps) in enumerate(REQUESTS):
                    sock.sendto(request(pdu, community.encode(), 1000 + i, oids, reps), (host, int(port)))
                    answer = sock.recv(65535)
                    (out / f"ok-{community}-{name}.bin").write_bytes(answer)
                    written += 1
    return written


#: Datagrams that once broke a parser (plausible_snmp's IndexError), or frame nothing.
SNMP_BAD = {
    "bad-short-frame-1.bin": b"\x30\x81\x02\x02\x01",
    "bad-short-frame-2.bin": b"\x30\x82\x00\x02\x02\x01",
    "bad-bare-sequence.bin": b"\x30\x03\x02\x01\x01",
    "bad-empty.bin": b"",
    "bad-indefinite-length.bin": b"\x30\x80\x02\x01\x01\x00\x00",
    "bad-snmpv1.bin": b"\x30\x05\x02\x01\x00\x04\x00",
}

T = datetime(2024, 5, 17, 3, 4, 5, 123456, tzinfo=UTC)


def _v2(header: dict[str, object], payload: bytes) -> bytes:
    body = zlib.compress(payload)
    head = json.dumps(header).encode()
    out = MAGIC + (2).to_bytes(2, "big") + struct.pack(">IQ", len(head), len(body)) + head + body
    return out + hashlib.sha256(out).digest()


def spool_files() -> dict[str, bytes]:
    """Name → bytes of the spool corpus."""
    ports = [
        PortSample(T, "leaf-01", "Ethernet1/1", 1, 400_000_000_000, -5, (1 << 63) - 1, in_bps=3.2e11),
        PortSample(T.astimezone(timezone(timedelta(hours=2))), "spine-07", "swp64s3", None, None, -1, in_pps=-0.0),
    ]
    mixed = [(1, "a\x00b\udc80", None, T), ("x", float("nan"), True, 7), (None, float("-inf"), False, None)]
    good = encode(mixed, ["a", "b", "c", "d"])
    files = {
        "ok-v2-ports.batch": encode(ports, PortSample._fields),
        "ok-v2-mixed.batch": good,
        "ok-v2-no-columns.batch": encode([(), ()], None),
        "ok-v2-wide.batch": encode([tuple(range(40))] * 30, [f"c{i}" for i in range(40)]),
        "ok-v1-ports.batch": pickle.dumps(ports, protocol=5),
        "ok-v1-events.batch": pickle.dumps([LinkEvent(T, "leaf-01", "Ethernet1/1", "up", "down", None, "x", 1)], 4),
        "ok-v1-plain.batch": pickle.dumps([(1, "a", None, 1.5, True)], protocol=2),
        "bad-v1-memo-bomb.batch": b"\x80\x02]r" + struct.pack("<I", 10**8) + b".",
        "bad-v1-empty.batch": pickle.dumps([]),
        "bad-v1-global.batch": b"\x80\x04\x8c\x02os\x8c\x06system\x93\x8c\x04true\x85R.",
        "bad-v1-frame.batch": b"\x80\x04\x95\xff\xff\xff\xff\x00\x00\x00\x00].",
        "bad-v1-text-bomb.batch": (
            b"\x80\x04]\x94(X" + struct.pack("<I", 10_000) + b"x" * 10_000 + b"\x94\x85\x94" + b"h\x02" * 20_000 + b"e."
        ),
        "bad-v2-rows-claim.batch": _v2({"rows": 10**8, "types": [], "columns": None, "compression": "zlib"}, b"[]"),
        "bad-v2-zero-rows.batch": _v2({"rows": 0, "types": [], "columns": None, "compression": "zlib"}, b"[]"),
        "bad-v2-zlib-bomb.batch": _v2(
            {"rows": 1000, "types": ["scalar"] * 2, "columns": None, "compression": "zlib"}, b"0" * 10_000_000
        ),
        "bad-v2-truncated.batch": good[: len(good) // 2],
        "bad-v2-flipped.batch": good[:60] + bytes([good[60] ^ 0x04]) + good[61:],
        "bad-v2-padded.batch": good + b"\n",
    }
    return files


def write_spool(out: Path) -> int:
    for name, data in spool_files().items():
        (out / name).write_bytes(data)
    return len(spool_files())


def main() -> None:
    for kind in ("snmp", "spool"):
        d = FUZZ / kind
        for old in d.glob("*.b*"):
            old.unlink()
        d.mkdir(parents=True, exist_ok=True)
    n = capture_snmp(FUZZ / "snmp")
    for name, data in SNMP_BAD.items():
        (FUZZ / "snmp" / name).write_bytes(data)
    m = write_spool(FUZZ / "spool")
    shutil.copy(FUZZ.parent / "spool" / "v1" / "000000000000-3.batch", FUZZ / "spool" / "ok-v1-fixture.batch")
    print(f"snmp: {n} captured + {len(SNMP_BAD)} bad; spool: {m + 1} files")


if __name__ == "__main__":
    main()

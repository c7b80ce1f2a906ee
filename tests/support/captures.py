"""Recorded real-device telemetry as the SubscribeResponses a device sends.

The captures live in ``tests/fixtures/devices/gnmi``, a copy of the project's ``../shared/fixtures``.

* Telegraf's captures (``telegraf/<case>/responses.json``) are SubscribeResponses in the protobuf
  JSON mapping: parsed with ``json_format`` and serialized, they are the bytes the device sent.
* sonic-gnmi's ``testdata`` files are Redis hashes as JSON, not responses. :func:`sonic_response`
  builds what SONiC's gNMI server sends for them, per sonic-net/sonic-gnmi (commit 5ec1c20):
  ``sonic_data_client/db_client.go`` answers a table-key path (``COUNTERS/Ethernet68``, or the
  virtual ``COUNTERS/Ethernet*``) with one Update at the subscribed path whose value is a
  ``json_ietf_val`` (``Msi2TypedValue``): the port's hash itself for one key, ``{"Ethernet1":
  {...}, "Ethernet68": {...}}`` for a wildcard, and a single field (``.../SAI_PORT_STAT_PFC_7_RX_PKTS``)
  as ``string_val`` (``dbFieldSubscribe``); the prefix target names the database
  (``gnmi_server/server_test.go``: ``Update{Path: [COUNTERS_DB, COUNTERS, Ethernet*], Val: ...}``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from google.protobuf import json_format
from pygnmi.spec.v080 import gnmi_pb2

#: The captures, kept in the repository as published (tests/fixtures/devices/README.md names each
#: source and licence) so that a fresh clone tests them; the project's shared copy, when it sits
#: beside the repository, must be the same (tests/unit/collector/test_golden_captures.py checks).
DEVICES = Path(__file__).resolve().parents[1] / "fixtures" / "devices"
SHARED = Path(__file__).resolve().parents[2].parent / "shared" / "fixtures"
FIXTURES = DEVICES / "gnmi"
TELEGRAF = FIXTURES / "telegraf"
SONIC = FIXTURES / "sonic-gnmi"


def telegraf_case(case: str) -> list[Any]:
    """A Telegraf test case's responses, as ``gnmi_pb2.SubscribeResponse`` messages."""
    items = json.loads((TELEGRAF / case / "responses.json").read_text(encoding="utf-8"))
    return [json_format.ParseDict(item, gnmi_pb2.SubscribeResponse()) for item in items]


def serialized(responses: Sequence[Any]) -> list[bytes]:
    """The wire bytes of each response."""
    return [r.SerializeToString() for r in responses]


def sonic_file(name: str) -> bytes:
    """One sonic-gnmi testdata file (a Redis hash, or a table of them, as JSON)."""
    return (SONIC / name).read_bytes()


def sonic_response(
    target: str, path: str, ts: int, *, json_ietf: bytes | None = None, string: str | None = None
) -> Any:
    """What sonic-gnmi sends for ``path`` (``/``-separated element names) in database ``target``."""
    p = gnmi_pb2.Path()
    for name in path.split("/"):
        p.elem.add(name=name)
    val = (
        gnmi_pb2.TypedValue(json_ietf_val=json_ietf)
        if json_ietf is not None
        else gnmi_pb2.TypedValue(string_val=string)
    )
    note = gnmi_pb2.Notification(
        timestamp=ts, prefix=gnmi_pb2.Path(target=target), update=[gnmi_pb2.Update(path=p, val=val)]
    )
    return gnmi_pb2.SubscribeResponse(update=note)


def restamp(responses: Sequence[Any], last_ns: int, step_ns: int = 100_000_000) -> list[Any]:
    """Copies stamped as a device would send them now: in their order, ``step_ns`` apart, the last at ``last_ns``.

    The captures are years old (and up to a minute apart); the collector bounds device clocks
    against its own (issue 11 §3), so a replay moves them to the present. Notifications that
    shared a timestamp still share one.
    """
    stamps = sorted({r.update.timestamp for r in responses if r.HasField("update")})
    new = {ts: last_ns - (len(stamps) - 1 - i) * step_ns for i, ts in enumerate(stamps)}
    out = []
    for r in responses:
        copy = gnmi_pb2.SubscribeResponse()
        copy.CopyFrom(r)
        if copy.HasField("update"):
            copy.update.timestamp = new[copy.update.timestamp]
        out.append(copy)
    return out


def xr_sim_shape() -> list[Any]:
    """telegraf issue_14044 (IOS XR) with fuller containers: what ``fabricmon sim --nos xr`` sends.

    The capture's prefix (``origin: openconfig-interfaces`` only) and its update path
    (``interfaces/interface[name=FourHundredGigE0/2/0/3]/state``) with a state container that
    also has oper-status, a type identity and counters (uint64 as JSON strings, one at 2^64-1);
    beside it the port's ``ethernet/state`` container and its eight PFC priorities in the /qos
    family, as json_ietf containers in the same notification. Built on the capture's shape: the
    values are ours.
    """
    responses = telegraf_case("issue_14044")
    note = responses[0].update
    state = {
        "description": "to sp-r1-1",
        "oper-status": "UP",
        "type": "iana-if-type:ethernetCsmacd",
        "counters": {
            "in-octets": "18446744073709551615",
            "out-octets": "12",
            "in-pkts": "3",
            "carrier-transitions": "2",
        },
    }
    note.update[0].val.json_ietf_val = json.dumps(state).encode()
    eth = note.update.add()
    eth.CopyFrom(note.update[0])
    eth.path.elem[-1].name = "ethernet"
    eth.path.elem.add(name="state")
    speed = {"port-speed": "openconfig-if-ethernet:SPEED_400GB", "counters": {"in-mac-pause-frames": "4"}}
    eth.val.json_ietf_val = json.dumps(speed).encode()
    port = note.update[0].path.elem[1].key["name"]
    for prio in range(8):
        u = note.update.add()
        u.path.elem.add(name="qos")
        u.path.elem.add(name="interfaces")
        u.path.elem.add(name="interface", key={"interface-id": port})
        u.path.elem.add(name="switch-priority", key={"priority": str(prio)})
        u.path.elem.add(name="state")
        u.val.json_ietf_val = json.dumps({"counters": {"in-pause-pkts": str(prio), "out-pause-pkts": "0"}}).encode()
    return responses

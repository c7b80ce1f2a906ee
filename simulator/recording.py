"""Recordings of a switch's raw gNMI stream: the JSONL format, writing and reading.

A recording is JSON Lines. The first line is a header::

    {"format": "fabricmon-gnmi-recording", "version": 1, "switch": "lf-g1-r1",
     "address": "10.0.0.1:9339", "paths": ["/interfaces", ...], "started_ns": 1764460800000000000}

Every other line is one ``SubscribeResponse`` exactly as received, as protobuf's canonical JSON
mapping (``json_format.MessageToDict`` with proto field names: ``update`` or ``sync_response``),
plus ``recv_ns``, the local receive time. Protobuf maps uint64 to JSON strings, so no counter
loses precision. The same files feed ``fabricmon sim --replay`` and the tests.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from google.protobuf import json_format
from pygnmi.spec.v080 import gnmi_pb2

from fabric.errors import FabricmonError

FORMAT = "fabricmon-gnmi-recording"
VERSION = 1


class RecordingError(FabricmonError, ValueError):
    """A recording file that cannot be read."""


@dataclass(frozen=True, slots=True)
class Header:
    """What was recorded, from where, when."""

    switch: str
    address: str
    paths: list[str]
    started_ns: int


@dataclass(frozen=True, slots=True)
class Entry:
    """One recorded response and when it arrived."""

    recv_ns: int
    response: gnmi_pb2.SubscribeResponse


def write_header(out: IO[str], header: Header) -> None:
    """Write the header line."""
    line = {"format": FORMAT, "version": VERSION, **_header_dict(header)}
    out.write(json.dumps(line) + "\n")


def write_entry(out: IO[str], recv_ns: int, response: gnmi_pb2.SubscribeResponse) -> None:
    """Append one response."""
    data: dict[str, Any] = json_format.MessageToDict(response, preserving_proto_field_name=True)
    data["recv_ns"] = recv_ns
    out.write(json.dumps(data, separators=(",", ":")) + "\n")


def read_recording(path: str | Path) -> tuple[Header, Iterator[Entry]]:
    """The header and a lazy iterator over the entries; bad lines raise RecordingError with the line.

    The header is checked now; the file is opened again, and closed, by the iteration itself.
    """
    path = Path(path)
    try:
        with path.open(encoding="utf-8") as handle:
            first = handle.readline()
    except OSError as exc:
        raise RecordingError(f"{path}: cannot open recording: {exc.strerror}") from None
    return _parse_header(path, first), _entries(path)


def _parse_header(path: Path, first: str) -> Header:
    try:
        head = json.loads(first)
    except json.JSONDecodeError:
        raise RecordingError(f"{path}:1: not a fabricmon recording (no JSON header)") from None
    if not isinstance(head, dict) or head.get("format") != FORMAT:
        raise RecordingError(f"{path}:1: not a fabricmon recording (format is not {FORMAT!r})")
    if head.get("version") != VERSION:
        raise RecordingError(f"{path}:1: recording version {head.get('version')!r} is not supported")
    try:
        return Header(
            str(head["switch"]), str(head.get("address", "")), list(head.get("paths", [])), int(head["started_ns"])
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise RecordingError(f"{path}:1: bad header: {exc}") from None


def _entries(path: Path) -> Iterator[Entry]:
    with path.open(encoding="utf-8") as handle:
        handle.readline()
        for number, line in enumerate(handle, start=2):
            if not line.strip():
                continue
            try:
                data = json.loads(line)
                recv_ns = int(data.pop("recv_ns"))
                response = json_format.ParseDict(data, gnmi_pb2.SubscribeResponse())
            except (json.JSONDecodeError, KeyError, TypeError, ValueError, json_format.ParseError) as exc:
                raise RecordingError(f"{path}:{number}: bad entry: {exc}") from None
            yield Entry(recv_ns, response)


def _header_dict(header: Header) -> dict[str, Any]:
    return {"switch": header.switch, "address": header.address, "paths": header.paths, "started_ns": header.started_ns}

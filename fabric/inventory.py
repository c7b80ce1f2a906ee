"""Inventory files: a fabric as YAML, written by ``fabricmon topology``, an import, or by hand.

Two versions load: ``version: 1`` (:mod:`fabric.inventory_v1`, the AIPod's own ``swp``/``nic``
names) and ``version: 2`` (:mod:`fabric.inventory_v2`, a cabling plan in the devices' own names,
SPEC §10.1). :func:`dump_inventory` writes version 1 for a fabric that version 1 can hold and
version 2 otherwise.

Every problem is one :class:`~fabric.errors.TopologyError` naming the file, the entry and its
line. :func:`read_inventory` also returns the cables a version 2 file had to leave out, for
``fabricmon inventory check``; :func:`load_inventory` refuses a file that has any.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any

import yaml

from fabric.anomaly import Anomaly
from fabric.errors import TopologyError
from fabric.inventory_fields import EntryError
from fabric.inventory_v1 import LINK_FIELDS as V1_LINK_FIELDS
from fabric.inventory_v1 import build_v1, data_v1, is_legacy
from fabric.inventory_v2 import LINK_FIELDS as V2_LINK_FIELDS
from fabric.inventory_v2 import build_v2, data_v2
from fabric.model import Fabric

try:  # libyaml makes a 16K-GPU inventory several times faster to read and write
    from yaml import CSafeDumper as _Dumper
    from yaml import CSafeLoader as _Loader
except ImportError:  # pragma: no cover - depends on how PyYAML was built
    from yaml import SafeDumper as _Dumper  # type: ignore[assignment]
    from yaml import SafeLoader as _Loader  # type: ignore[assignment]

PathOrStream = str | os.PathLike[str] | IO[str]
VERSIONS = (1, 2)


def inventory_data(fabric: Fabric) -> dict[str, Any]:
    """The plain-data form of an inventory (what :func:`dump_inventory` writes as YAML)."""
    return data_v1(fabric) if is_legacy(fabric) else data_v2(fabric)


def dump_inventory(fabric: Fabric, path_or_stream: PathOrStream) -> None:
    """Write ``fabric`` as an inventory YAML file (or to an open text stream)."""
    summary = fabric.summary()
    fields = V1_LINK_FIELDS if is_legacy(fabric) else V2_LINK_FIELDS
    header = (
        f"# fabricmon inventory: {summary['gpus']} GPUs, {summary['rails']} rails, "
        f"{summary['switches']} switches, {summary['tiers']} tiers\n"
        f"# links: {fields}, lower tier first\n"
    )
    data = inventory_data(fabric)
    if isinstance(path_or_stream, str | os.PathLike):
        with open(path_or_stream, "w", encoding="utf-8") as stream:
            _write(stream, header, data)
    else:
        _write(path_or_stream, header, data)


def _write(stream: IO[str], header: str, data: dict[str, Any]) -> None:
    stream.write(header)
    # default_flow_style=None: one line per switch, server and link, block style above them
    yaml.dump(data, stream, Dumper=_Dumper, sort_keys=False, default_flow_style=None, width=200)


def write_inventory(fabric: Fabric, out: str | os.PathLike[str] | None) -> None:
    """Write ``fabric`` to ``out`` atomically (beside it, then renamed), or to stdout when None."""
    if out is None:
        dump_inventory(fabric, sys.stdout)
        return
    target = Path(out)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    except OSError as exc:
        raise TopologyError(f"cannot write {target}: {exc.strerror or exc}") from exc
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as stream:
            dump_inventory(fabric, stream)
        os.replace(tmp, target)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise TopologyError(f"cannot write {target}: {exc.strerror or exc}") from exc


def load_inventory(path_or_stream: PathOrStream) -> Fabric:
    """Read and check an inventory file; every problem is a TopologyError naming the entry."""
    fabric, anomalies = read_inventory(path_or_stream)
    if anomalies:
        first = anomalies[0]
        more = f" (and {len(anomalies) - 1} more: see fabricmon inventory check)" if len(anomalies) > 1 else ""
        raise TopologyError(f"{_source(path_or_stream)}: {first}{more}")
    return fabric


def read_inventory(path_or_stream: PathOrStream) -> tuple[Fabric, list[Anomaly]]:
    """Read an inventory file: its fabric, and the cables it had to leave out (version 2)."""
    source = _source(path_or_stream)
    if isinstance(path_or_stream, str | os.PathLike):
        try:
            with open(path_or_stream, encoding="utf-8") as stream:
                content = stream.read()
        except OSError as exc:
            raise TopologyError(f"{source}: cannot read inventory: {exc.strerror or exc}") from exc
        except UnicodeDecodeError as exc:
            raise TopologyError(f"{source}: not UTF-8 text at byte {exc.start}") from exc
    else:
        content = path_or_stream.read()
    return parse_inventory(content, source)


def parse_inventory(content: str, source: str = "<inventory>") -> tuple[Fabric, list[Anomaly]]:
    """An inventory document's fabric and left-out cables; ``source`` names it in errors."""
    try:
        raw = yaml.load(content, Loader=_Loader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or exc
        raise TopologyError(f"{source}: not valid YAML{where}: {problem}") from exc
    try:
        if not isinstance(raw, Mapping):
            raise EntryError(f"inventory: expected a mapping, got {type(raw).__name__}")
        version = raw.get("version")
        if version == 1:
            return build_v1(raw), []
        if version == 2:
            fabric, anomalies = build_v2(raw)
            lines = _Lines(content)
            return fabric, [_placed(a, lines) for a in anomalies]
        raise EntryError(f"version: expected one of {', '.join(map(str, VERSIONS))}, got {version!r}", ("version",))
    except EntryError as exc:
        line = _Lines(content).line(exc.at)
        place = f" (line {line})" if line is not None else ""
        raise TopologyError(f"{source}{place}: {exc}") from None
    except TopologyError as exc:
        raise TopologyError(f"{source}: {exc}") from None


def _source(path_or_stream: PathOrStream) -> str:
    if isinstance(path_or_stream, str | os.PathLike):
        return os.fspath(path_or_stream)
    return str(getattr(path_or_stream, "name", "<inventory>"))


def _placed(anomaly: Anomaly, lines: _Lines) -> Anomaly:
    line = lines.line(anomaly.at)
    if line is None:
        return anomaly
    return Anomaly(anomaly.kind, anomaly.message, anomaly.nodes, anomaly.where, line, anomaly.at)


class _Lines:
    """Finds the line of an entry: the document composed once, on the first question (errors only)."""

    def __init__(self, content: str) -> None:
        self._content = content
        self._root: yaml.Node | None = None
        self._composed = False

    def line(self, at: tuple[str | int, ...]) -> int | None:
        """The 1-based line of the node at ``at`` (keys and indexes from the root), or None."""
        if not at:
            return None
        if not self._composed:
            self._composed = True
            try:
                self._root = yaml.compose(io.StringIO(self._content), Loader=_Loader)
            except yaml.YAMLError:
                self._root = None
        node = self._root
        for step in at:
            if isinstance(node, yaml.MappingNode) and isinstance(step, str):
                node = next((v for k, v in node.value if k.value == step), None)
            elif isinstance(node, yaml.SequenceNode) and isinstance(step, int) and step < len(node.value):
                node = node.value[step]
            else:
                return None
        return None if node is None else node.start_mark.line + 1

"""A cabling plan exported from a spreadsheet (``fabricmon inventory import csv``, SPEC §10.2).

Columns ``a_node,a_port,b_node,b_port[,speed_gbps]`` under a header row naming them (any order;
``speed`` and ``speed_gbps`` both name the speed). Each row is one cable, lower tier first
(server then leaf, leaf then spine, spine then superspine), unless ``--role-pattern`` names the
roles. Blank lines and lines starting with ``#`` are skipped.

Every bad row is one error naming the row (its line in the file) and what is wrong with it: an
unknown column, a missing value, a speed that is no number, a port used twice, a cable from a
node to itself. Up to :data:`MAX_ERRORS` are reported together, so one pass fixes a sheet.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Mapping

from fabric.errors import TopologyError
from fabric.inventory_fields import EntryError
from fabric.inventory_v2 import build_v2
from fabric.model import Endpoint, Fabric
from fabric.plan import Cable, PlanReport, decide_roles, plan_document

COLUMNS = ("a_node", "a_port", "b_node", "b_port", "speed_gbps")
_ALIASES = {"speed": "speed_gbps"}
MAX_ERRORS = 20


def import_csv(
    text: str,
    *,
    source: str = "<csv>",
    patterns: Mapping[str, re.Pattern[str]] | None = None,
    name: str | None = None,
    speed: int | None = None,
) -> tuple[Fabric, PlanReport]:
    """The fabric a CSV cabling plan describes, and what the plan could not decide.

    Raises one :class:`TopologyError` listing every bad row (at most :data:`MAX_ERRORS`).
    """
    cables, errors = read_cables(text, source)
    if errors:
        more = f"\n  ... and {len(errors) - MAX_ERRORS} more" if len(errors) > MAX_ERRORS else ""
        raise TopologyError(f"{source}: {len(errors)} bad row(s):\n  " + "\n  ".join(errors[:MAX_ERRORS]) + more)
    if not cables:
        raise TopologyError(f"{source}: no cables (expected a header {','.join(COLUMNS)} and one row per cable)")
    report = PlanReport()
    roles = decide_roles(cables, patterns or {}, None, report)
    doc = plan_document(cables, roles, name=name, default_speed=speed, report=report)
    if speed is None and any(len(link) == 4 for link in doc["links"]):
        rows = [c.source for c in cables if c.speed_gbps is None]
        raise TopologyError(f"{source}: {rows[0]} gives no speed_gbps (give one, or --speed-gbps for all such rows)")
    kept = [c for c in cables if c.a_node in roles and c.b_node in roles]  # plan_document's links, in order
    try:
        fabric, anomalies = build_v2(doc)
    except EntryError as exc:
        raise TopologyError(f"{source}: {_by_row(str(exc), exc.at, kept)}") from None
    if anomalies:
        lines = [_by_row(a.message, a.at, kept) for a in anomalies]
        raise TopologyError(f"{source}: {len(lines)} bad row(s):\n  " + "\n  ".join(lines[:MAX_ERRORS]))
    return fabric, report


def _by_row(message: str, at: tuple[str | int, ...], kept: list[Cable]) -> str:
    """A message of the v2 loader about ``links[i]`` told by the CSV row instead."""
    if len(at) == 2 and at[0] == "links" and isinstance(at[1], int) and at[1] < len(kept):
        return f"{kept[at[1]].source}: {message.partition(': ')[2] or message}"
    return message


def read_cables(text: str, source: str = "<csv>") -> tuple[list[Cable], list[str]]:
    """The rows as cables, and one error per bad row (``row 12 (line 13): ...``)."""
    lines = [(n, ln) for n, ln in enumerate(text.splitlines(), 1) if ln.strip() and not ln.lstrip().startswith("#")]
    if not lines:
        return [], []
    header_line, header = lines[0]
    columns = [_ALIASES.get(c.strip().lower(), c.strip().lower()) for c in next(csv.reader([header]))]
    unknown = [c for c in columns if c not in COLUMNS]
    if unknown:
        return [], [f"line {header_line}: unknown column {unknown[0]!r} (expected {','.join(COLUMNS)})"]
    missing = [c for c in COLUMNS[:4] if c not in columns]
    if missing:
        return [], [f"line {header_line}: no column {missing[0]!r} (expected {','.join(COLUMNS)})"]
    cables: list[Cable] = []
    errors: list[str] = []
    used: dict[Endpoint, str] = {}
    body = io.StringIO("\n".join(line for _, line in lines[1:]))
    for (line_no, _), values in zip(lines[1:], csv.reader(body), strict=False):
        row = f"row {len(cables) + len(errors) + 1} (line {line_no})"
        if len(values) > len(columns):
            errors.append(f"{row}: {len(values)} values for {len(columns)} columns (an unquoted comma?)")
            continue
        cells = dict(zip(columns, (v.strip() for v in values), strict=False))
        if empty := [c for c in COLUMNS[:4] if not cells.get(c)]:
            errors.append(f"{row}: {empty[0]} is empty")
            continue
        a, b = Endpoint(cells["a_node"], cells["a_port"]), Endpoint(cells["b_node"], cells["b_port"])
        if a.node == b.node:
            errors.append(f"{row}: a cable from {a.node} to itself ({a.port} -> {b.port})")
            continue
        if twice := [e for e in (a, b) if e in used]:
            e = twice[0]
            errors.append(f"{row}: port {e.node} {e.port} is used twice (first by {used[e]})")
            continue
        raw_speed = cells.get("speed_gbps") or ""
        speed: int | None = None
        if raw_speed:
            try:
                speed = int(float(raw_speed.upper().removesuffix("G")))
            except ValueError:
                errors.append(f"{row}: speed_gbps {raw_speed!r} is not a number of Gbit/s")
                continue
            if speed <= 0:
                errors.append(f"{row}: speed_gbps must be > 0, got {raw_speed}")
                continue
        used[a] = used[b] = row
        cables.append(Cable(a.node, a.port, b.node, b.port, speed, row))
    return cables, errors

"""``fabricmon inventory``: check a cabling plan, import one from a spreadsheet, or discover one (SPEC §10).

* ``inventory check FILE``: the design a file describes and its anomalies; exit 0 for a
  rail-optimized non-blocking design, 1 when it has anomalies, 2 on a bad file;
* ``inventory import csv FILE``: a spreadsheet's cables (``a_node,a_port,b_node,b_port[,speed_gbps]``,
  lower tier first) as a version 2 inventory, one error per bad row;
* ``inventory import netbox --url URL``: a NetBox site's cables (:mod:`cli.commands.inventory_netbox`);
* ``inventory discover``: the cabling plan read from the switches' LLDP tables
  (:mod:`cli.commands.inventory_discover`).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from cli.commands import inventory_discover, inventory_netbox
from cli.output import emit, table
from fabric.csv_import import import_csv
from fabric.design import DesignReport, design_report
from fabric.errors import TopologyError
from fabric.inventory import read_inventory, write_inventory
from fabric.plan import parse_role_patterns

#: Exit codes of ``inventory check`` (SPEC §10.1).
CLEAN, ANOMALIES, BAD_FILE = 0, 1, 2


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser) -> None:
    """Add ``inventory`` and its sub-commands to the command line."""
    p = sub.add_parser(
        "inventory",
        parents=[common],
        help="check, import or discover a real fabric's cabling plan",
        description="A real fabric's inventory: check a cabling plan, import one, or discover one over LLDP.",
    )
    inner = p.add_subparsers(dest="inventory_command", metavar="ACTION", required=True)
    check = inner.add_parser("check", parents=[common], help="the design an inventory describes, and its anomalies")
    check.add_argument("file", metavar="FILE", help="an inventory file (version 1 or 2)")
    check.set_defaults(handler=run_check)
    imp = inner.add_parser("import", parents=[common], help="an inventory from another source")
    sources = imp.add_subparsers(dest="import_source", metavar="SOURCE", required=True)
    csv = sources.add_parser(
        "csv",
        parents=[common],
        help="a cabling plan exported from a spreadsheet",
        description="Columns a_node,a_port,b_node,b_port[,speed_gbps] with a header row; each cable lower tier "
        "first (server, then leaf; leaf, then spine; spine, then superspine), or roles from --role-pattern.",
    )
    csv.add_argument("file", metavar="FILE", help="the CSV file ('-' for standard input)")
    csv.add_argument("--out", metavar="FILE", help="write the inventory here instead of stdout")
    csv.add_argument("--name", metavar="NAME", help="the fabric's name in the inventory")
    csv.add_argument("--speed-gbps", type=int, metavar="G", help="speed of rows that give none")
    csv.add_argument(
        "--role-pattern",
        action="append",
        default=[],
        metavar="ROLE=REGEX",
        help="nodes whose name matches REGEX have ROLE (server, leaf, spine, superspine); repeatable",
    )
    csv.set_defaults(handler=run_import_csv)
    inventory_netbox.register(sources, common)
    inventory_discover.register(inner, common)


def run_check(args: argparse.Namespace) -> int:
    """Report the design and its anomalies; exit 0, 1 or 2 (SPEC §10.1)."""
    try:
        fabric, anomalies = read_inventory(args.file)
    except TopologyError as exc:
        print(f"fabricmon inventory check: {exc}", file=sys.stderr)
        return BAD_FILE
    report = design_report(fabric, anomalies)
    emit(args.json, report.as_dict(), lambda: _human(report))
    return CLEAN if report.clean else ANOMALIES


def _human(report: DesignReport) -> str:
    d = report.as_dict()
    rows: list[tuple[str, Any]] = [
        ("fabric", d["fabric"]),
        ("tiers", d["tiers"]),
        ("rails", d["rails"]),
        ("groups", d["groups"]),
        ("servers", d["servers"]),
        ("gpus", d["gpus"]),
        ("switches", ", ".join(f"{n} {role}" for role, n in d["switches"].items())),
        ("links", d["links"]),
        ("capacity (down:up)", ", ".join(f"{r['role']} {r['ratios']}" for r in d["capacity"])),
        ("rail-optimized", "yes" if d["rail_optimized"] else "no"),
        ("non-blocking", "yes" if d["non_blocking"] else "no"),
    ]
    out = [table(rows)]
    if report.anomalies:
        out.append(f"\n{len(report.anomalies)} anomal{'y' if len(report.anomalies) == 1 else 'ies'}:")
        out += [f"  {a.kind}: {a}" for a in report.anomalies]
    else:
        out.append("\nno anomalies: a rail-optimized, non-blocking design")
    return "\n".join(out)


def run_import_csv(args: argparse.Namespace) -> int:
    """Read the CSV, write a version 2 inventory; the first bad rows are one error each."""
    patterns = parse_role_patterns(args.role_pattern)
    text = sys.stdin.read() if args.file == "-" else _read(args.file)
    fabric, report = import_csv(text, source=args.file, patterns=patterns, name=args.name, speed=args.speed_gbps)
    write_inventory(fabric, args.out)
    for line in report.undecided + report.problems:
        print(f"note: {line}", file=sys.stderr)
    if args.out is not None:
        summary = fabric.summary()
        print(
            f"wrote {args.out}: {summary['switches']} switches, {summary['servers']} servers, {summary['links']} links",
            file=sys.stderr,
        )
    return 0


def _read(path: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8-sig")  # spreadsheets often write a BOM
    except OSError as exc:
        raise TopologyError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise TopologyError(f"{path}: not UTF-8 text at byte {exc.start}") from exc

"""``fabricmon topology``: build the AIPod fabric (SPEC §6) and write its inventory or its counts.

``--naming`` picks the port names (:mod:`fabric.naming`): ``swp`` writes a version 1 inventory,
a NOS naming or ``mixed`` a version 2 one. Without ``--summary`` the inventory YAML goes to
``--out`` (written atomically) or stdout; with ``--summary`` the fabric's counts are printed (a
table, or the summary dict with ``--json``). With ``--out`` and ``--json``, stdout gets ``{"out": FILE, **summary}``.
Notes go to stderr, so stdout stays a clean YAML or JSON document.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from cli.output import emit, table
from fabric.inventory import write_inventory
from fabric.model import FabricParams
from fabric.naming import NAMINGS
from fabric.topology import build_aipod


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser) -> None:
    """Add ``topology`` to the command line."""
    p = sub.add_parser(
        "topology",
        parents=[common],
        help="build the AIPod fabric and write its inventory (YAML) or its counts",
        description="Build a 3-tier, rail-optimised, non-blocking AIPod fabric (SPEC section 6).",
    )
    add = p.add_argument
    add("--gpus", type=int, required=True, metavar="N", help="GPUs in the fabric (a multiple of --rails)")
    add("--rails", type=int, default=8, metavar="R", help="rails = GPUs per server (8)")
    add("--radix", type=int, default=128, metavar="P", help="ports per switch (128, i.e. 51.2T at 400G)")
    add("--speed-gbps", type=int, default=400, metavar="G", help="port speed in Gbit/s (400)")
    add(
        "--naming",
        default="swp",
        choices=NAMINGS,
        help="port names: swp (swp1.., nic1..), one NOS's (Ethernet1/1, et-0/0/0:0.., NICs mlx5_0..) or mixed",
    )
    add("--summary", action="store_true", help="print the fabric's counts instead of its inventory")
    add("--out", metavar="FILE", help="write the inventory here instead of stdout")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Build the fabric, then print its summary or write its inventory; 0 on success."""
    params = FabricParams(gpus=args.gpus, rails=args.rails, radix=args.radix, speed_gbps=args.speed_gbps)
    fabric = build_aipod(params, args.naming)
    if args.summary:
        summary = fabric.summary()
        emit(args.json, summary, lambda: _human_summary(summary))
        return 0
    if args.out is None:
        write_inventory(fabric, None)
        return 0
    write_inventory(fabric, args.out)
    summary = fabric.summary()
    counts = f"{summary['switches']} switches, {summary['servers']} servers, {summary['links']} links"
    print(f"wrote {args.out}: {counts}", file=sys.stderr)
    if args.json:
        emit(True, {"out": args.out, **summary})
    return 0


def _human_summary(summary: dict[str, Any]) -> str:
    rows = [(k, f"{v:,}" if isinstance(v, int) else f"{v:.2f}") for k, v in summary.items()]
    width = max(len(v) for _, v in rows)
    return table([(key, f"{value:>{width}}") for key, value in rows])

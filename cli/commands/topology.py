"""``fabricmon topology``: build the AIPod fabric (SPEC §6) and write its inventory or its counts.

Without ``--summary`` the inventory YAML goes to ``--out`` (written atomically) or stdout;
with ``--summary`` the fabric's counts are printed (a table, or the summary dict with
``--json``). With ``--out`` and ``--json``, stdout gets ``{"out": FILE, **summary}``.
Notes go to stderr, so stdout stays a clean YAML or JSON document.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from cli.output import emit, table
from fabric.errors import TopologyError
from fabric.inventory import dump_inventory
from fabric.model import Fabric, FabricParams
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
    add("--summary", action="store_true", help="print the fabric's counts instead of its inventory")
    add("--out", metavar="FILE", help="write the inventory here instead of stdout")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Build the fabric, then print its summary or write its inventory; 0 on success."""
    params = FabricParams(gpus=args.gpus, rails=args.rails, radix=args.radix, speed_gbps=args.speed_gbps)
    fabric = build_aipod(params)
    if args.summary:
        summary = fabric.summary()
        emit(args.json, summary, lambda: _human_summary(summary))
        return 0
    if args.out is None:
        dump_inventory(fabric, sys.stdout)
        return 0
    _write_atomically(fabric, Path(args.out))
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


def _write_atomically(fabric: Fabric, out: Path) -> None:
    """Write beside the target, then rename: a reader never sees half an inventory."""
    directory = out.parent if str(out.parent) else Path(".")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".tmp", dir=directory)
    except OSError as exc:
        raise TopologyError(f"cannot write {out}: {exc.strerror or exc}") from exc
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as stream:
            dump_inventory(fabric, stream)
        os.replace(tmp, out)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise TopologyError(f"cannot write {out}: {exc.strerror or exc}") from exc
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise

"""``fabricmon inventory import netbox``: the cabling plan NetBox holds, as a version 2 inventory (SPEC §10.2).

Reads a site's devices, cabled interfaces and cables over NetBox's REST API
(:mod:`discovery.netbox`, the token from ``$NETBOX_TOKEN``), converts them
(:mod:`fabric.netbox_import`: roles from the device role slugs and ``--role-map``), and writes
the inventory to ``--out`` (atomically) or stdout. What was left out (power and circuit cables,
management links, devices of no fabric role) goes to stderr as notes. Exit 0 when written, 2 on
bad input or when NetBox cannot be read.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable

from cli import context
from discovery.netbox import NetboxSource, fetch
from fabric.inventory import write_inventory
from fabric.netbox_import import import_netbox, parse_role_map

#: The environment variable holding NetBox's API token.
TOKEN_ENV = "NETBOX_TOKEN"


def register(sources: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser) -> None:
    """Add ``inventory import netbox``."""
    p = sources.add_parser(
        "netbox",
        parents=[common],
        help="devices, interfaces and cables from NetBox's REST API",
        description="Read a site's devices, cabled interfaces and cables from NetBox (token from "
        f"${TOKEN_ENV}) and write a version 2 inventory. Roles come from the device role slugs: --role-map "
        "ROLE=SLUG, else their words (leaf/tor, spine, superspine, server/gpu/compute); only connected "
        "interface-to-interface cables are the fabric, the others are named on stderr.",
    )
    p.add_argument("--url", required=True, metavar="URL", help="NetBox's address (https://netbox.example.com)")
    p.add_argument("--site", metavar="SLUG", help="only this site's devices and cables (its slug)")
    p.add_argument("--out", metavar="FILE", help="write the inventory here (atomically) instead of stdout")
    p.add_argument("--name", metavar="NAME", help="the fabric's name in the inventory (default: the site)")
    p.add_argument(
        "--role-map",
        action="append",
        default=[],
        metavar="ROLE=SLUG[,...]",
        help="devices whose role slug is SLUG have ROLE (server, leaf, spine, superspine); repeatable",
    )
    p.add_argument("--speed-gbps", type=_positive(int), metavar="G", help="speed of cables whose interfaces give none")
    p.add_argument(
        "--timeout-s", type=_positive(float), default=30.0, metavar="S", help="time limit of each request (30)"
    )
    p.set_defaults(handler=run)


def _positive(kind: type[int] | type[float]) -> Callable[[str], float]:
    def parse(text: str) -> float:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a {kind.__name__}: {text!r}") from None
        if value <= 0:
            raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
        return value

    return parse


def run(args: argparse.Namespace) -> int:
    """Read NetBox, write the inventory, name what was left out; exit 0 (errors raise, exit 2)."""
    role_map = parse_role_map(args.role_map)
    source = NetboxSource(args.url, os.environ.get(TOKEN_ENV) or None, args.site, timeout_s=args.timeout_s)
    data = context.run(fetch(source))
    fabric, report = import_netbox(data, role_map=role_map, site=args.site, name=args.name, speed=args.speed_gbps)
    write_inventory(fabric, args.out)
    for line in report.lines():
        print(f"note: {line}", file=sys.stderr)
    summary = fabric.summary()
    where = args.out or "stdout"
    print(
        f"wrote {where}: {summary['switches']} switches, {summary['servers']} servers, {summary['links']} links "
        f"from {len(data.devices)} devices and {len(data.cables)} cables",
        file=sys.stderr,
    )
    return 0

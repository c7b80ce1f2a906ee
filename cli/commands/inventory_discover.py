"""``fabricmon inventory discover``: the cabling plan read from the switches' LLDP tables (SPEC §10.2)."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser) -> None:
    """Add ``inventory discover`` (not yet built: it says so)."""
    p = sub.add_parser("discover", parents=[common], help="read the cabling plan from the switches' LLDP tables")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Placeholder until discovery lands."""
    raise NotImplementedError("inventory discover")

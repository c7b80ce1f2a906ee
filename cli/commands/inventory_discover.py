"""``fabricmon inventory discover``: the cabling plan read from the switches' LLDP tables (SPEC §10.2).

Reads every switch the config's ``targets`` reach (gNMI or SNMP, as each entry says), crawling
from the seeds (the configured inventory, the exact names in ``targets``, ``--switches``) to
every switch-like neighbour a target matches; builds the cable graph, decides roles, groups and
rails, and writes a version 2 inventory to ``--out`` (atomically) or stdout.

The report says what discovery could not decide and what breaks the rail plan: human on stderr,
JSON with ``--json`` (on stdout when the inventory goes to ``--out``, else on stderr) and in
``--report FILE``. Progress goes to stderr at most once a second. Exit 0: an inventory written
and nothing to report; 1: an inventory written and a report to read; 2: bad input, or no cable
found (nothing written).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from cli import context
from discovery.build import DiscoveryReport, build, pattern_switch
from discovery.errors import NothingToPoll
from discovery.run import Crawl, CrawlOptions, CrawlResult
from discovery.seeds import Targets, inventory_switches, read_switches_file, seed_names
from fabric.errors import TopologyError
from fabric.inventory import write_inventory
from fabric.plan import parse_role_patterns

CLEAN, REPORTED, FAILED = 0, 1, 2


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser) -> None:
    """Add ``inventory discover``."""
    p = sub.add_parser(
        "discover",
        parents=[common],
        help="read the cabling plan from the switches' LLDP tables",
        description="Read LLDP from every switch the config's targets reach (gNMI or SNMP), crawling from the "
        "seeds (fabric.inventory, exact names in targets, --switches) to every switch-like neighbour a target "
        "matches; write a version 2 inventory and a report of what could not be decided. Exit 0: nothing to "
        "report, 1: a report to read, 2: bad input or nothing found.",
    )
    p.add_argument("--out", metavar="FILE", help="write the inventory here (atomically) instead of stdout")
    p.add_argument("--report", metavar="FILE", help="also write the report here, as JSON")
    p.add_argument(
        "--role-pattern",
        action="append",
        default=[],
        metavar="ROLE=REGEX",
        help="nodes whose name matches REGEX have ROLE (server, leaf, spine, superspine); repeatable",
    )
    p.add_argument("--switches", metavar="FILE", help="more seed switches: one name per line, # comments")
    p.add_argument("--timeout-s", type=_positive, default=30.0, metavar="S", help="per-switch time limit (30)")
    p.add_argument("--concurrency", type=_count, default=64, metavar="N", help="switches read at once (64)")
    p.add_argument("--name", metavar="NAME", help="the fabric's name in the inventory")
    p.add_argument(
        "--speed-gbps", type=_count, metavar="G", help="speed of cables no end reports (default: the most common)"
    )
    p.set_defaults(handler=run)


def _positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0 < value <= 3600:
        raise argparse.ArgumentTypeError(f"must be in (0, 3600], got {text}")
    return value


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if not 0 < value <= 100_000:
        raise argparse.ArgumentTypeError(f"must be in 1..100000, got {text}")
    return value


class _Progress:
    """``polled 120/640 switches`` on stderr, at most once a second, and the last line always."""

    def __init__(self, every_s: float = 1.0) -> None:
        self.every_s = every_s
        self.started = self.last = time.monotonic()

    def __call__(self, done: int, scheduled: int, failed: int) -> None:
        now = time.monotonic()
        if done < scheduled and now - self.last < self.every_s:
            return
        if done == scheduled and now - self.started < self.every_s:
            return  # a short run needs no progress line
        self.last = now
        bad = f" ({failed} not answering)" if failed else ""
        print(f"polled {done}/{scheduled} switches{bad}", file=sys.stderr, flush=True)


def run(args: argparse.Namespace) -> int:
    """Discover, write the inventory and the report; exit 0, 1 or 2."""
    config = context.config_of(args)
    patterns = parse_role_patterns(args.role_pattern)
    known, notes = inventory_switches(config)
    listed = read_switches_file(args.switches) if args.switches else []
    seeds = seed_names(config.targets, known, listed)
    if not config.targets:
        raise NothingToPoll("the config has no targets: nothing says how to reach a switch")
    if not seeds:
        raise NothingToPoll(
            "no switch to start from: give fabric.inventory, an exact switch name in targets, or --switches FILE"
        )
    options = CrawlOptions(args.timeout_s, args.concurrency, config.collector.gnmi_transport)
    crawl = Crawl(Targets(config.targets, known), options, is_switch=pattern_switch(patterns), progress=_Progress())
    result: CrawlResult = context.run(crawl.run(seeds))
    report = build(result, patterns, name=args.name, speed_gbps=args.speed_gbps, known=known)
    report.notes[:0] = notes
    if report.fabric is not None:
        write_inventory(report.fabric, args.out)
    _emit(args, report)
    if report.fabric is None:
        return FAILED
    return CLEAN if report.clean else REPORTED


def _emit(args: argparse.Namespace, report: DiscoveryReport) -> None:
    data: dict[str, Any] = report.as_dict()
    if args.out is not None:
        data["out"] = args.out
    text = json.dumps(data, indent=2, default=str) + "\n"
    if args.report:
        try:
            Path(args.report).write_text(text, encoding="utf-8")
        except OSError as exc:
            raise TopologyError(f"--report {args.report}: cannot write: {exc.strerror or exc}") from exc
    if args.json:
        (sys.stdout if args.out is not None else sys.stderr).write(text)
    else:
        print(report.human(), file=sys.stderr)

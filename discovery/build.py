"""From the crawl to a version 2 inventory and the report of what discovery could not decide.

The tables become cables (:mod:`discovery.graph`); roles, rails and NIC numbering are decided
by :mod:`fabric.plan` (switches with server neighbours are leaves, above them spines, above
those superspines; ``--role-pattern`` overrides), groups and leaf rails by the version 2 loader
(:func:`fabric.inventory_v2.build_v2`), and the result is judged as ``inventory check`` judges a
file (:func:`fabric.design.design_report`): a NIC on another rail's leaf, a leaf with uneven
uplinks, a server missing a rail.

The report (:class:`DiscoveryReport`) names every switch that did not answer, every neighbour
no target reaches, every LLDP entry that became no cable and why, every disagreement between
the two ends of a cable, what the plan could not decide and every design anomaly. It is
``clean`` only when there is none of these.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from discovery.graph import CableGraph, GraphReport, cable_graph
from discovery.run import CrawlResult
from fabric.anomaly import Anomaly
from fabric.design import design_report
from fabric.inventory_v2 import build_v2
from fabric.model import Fabric, Role, Switch, natural_key
from fabric.plan import Cable, PlanReport, decide_roles, plan_document

#: Lines per section of the human report (the JSON report has every one).
HUMAN_LINES = 40
#: The speed of cables no end reported one for, when nothing else says (SPEC §6's default).
FALLBACK_SPEED_GBPS = 400
_SWITCH_ROLES = frozenset(r.value for r in Role)
_SUMMARY = ("switches", "leaves", "spines", "superspines", "servers", "links")


def pattern_switch(patterns: Mapping[str, re.Pattern[str]]) -> Callable[[str], bool]:
    """A predicate: does a role pattern name this node a switch (leaf, spine or superspine)?"""

    def is_switch(name: str) -> bool:
        return any(role in _SWITCH_ROLES and p.search(name) for role, p in patterns.items())

    return is_switch


@dataclass(slots=True)
class DiscoveryReport:
    """Everything discovery could not decide or found wrong (see the module docstring)."""

    crawl: CrawlResult
    graph: GraphReport = field(default_factory=GraphReport)
    plan: PlanReport = field(default_factory=PlanReport)
    anomalies: list[Anomaly] = field(default_factory=list)
    #: Switches that answered (or were sought) but are in no cable of the inventory.
    missing: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    fabric: Fabric | None = None

    @property
    def clean(self) -> bool:
        """Nothing undecided, nothing wrong: every switch answered and the design is rail-optimized."""
        g, c = self.graph, self.crawl
        return not (
            c.failed or c.not_targeted or g.conflicts or g.unresolved or g.mac_port_ids or g.one_sided
            or self.plan.undecided or self.plan.problems or self.anomalies or self.missing
        )  # fmt: skip

    def as_dict(self) -> dict[str, Any]:
        """The JSON form (``--json``, ``--report``)."""
        c, g = self.crawl, self.graph
        summary = self.fabric.summary() if self.fabric is not None else {}
        return {
            "clean": self.clean,
            "switches": {
                "polled": len(c.polled),
                "answered": len(c.tables),
                "failed": len(c.failed),
                "seeds": len(c.seeds),
            },
            "seconds": round(c.seconds, 3),
            "inventory": {k: summary[k] for k in _SUMMARY if k in summary},
            "unreachable": [c.failed[n].as_dict() for n in sorted(c.failed, key=natural_key)],
            "not_targeted": [{"name": n, "seen": c.not_targeted[n]} for n in sorted(c.not_targeted, key=natural_key)],
            "missing": self.missing,
            "conflicts": g.conflicts,
            "mac_port_ids": g.mac_port_ids,
            "mac_port_ids_matched": g.mac_matched,
            "unresolved": g.unresolved,
            "one_sided": g.one_sided,
            "undecided": self.plan.undecided,
            "problems": self.plan.problems,
            "anomalies": [a.as_dict() for a in self.anomalies],
            "notes": [*self.notes, *g.notes],
        }

    def human(self) -> str:
        """The report for a person (stderr)."""
        c = self.crawl
        lines = [self._headline()]
        sections: list[tuple[str, list[str]]] = [
            ("switches did not answer", [str(c.failed[n]) for n in sorted(c.failed, key=natural_key)]),
            ("switch-like neighbours no targets entry reaches (not read)",
             [f"{n} ({c.not_targeted[n]})" for n in sorted(c.not_targeted, key=natural_key)]),
            ("switches in no cable of the inventory", self.missing),
            ("ends that disagree", self.graph.conflicts),
            ("port ids given as a MAC, cable left out", self.graph.mac_port_ids),
            ("port ids given as a MAC, matched through the switch's own LLDP table",
             [f"{n}: {k} port(s)" for n, k in sorted(self.graph.mac_matched_by.items())]),
            ("LLDP entries that became no cable", self.graph.unresolved),
            ("cables seen from one end only", self.graph.one_sided),
            ("undecided", self.plan.undecided),
            ("problems", self.plan.problems),
            ("what breaks the rail plan or the 1:1 design", [f"{a.kind}: {a}" for a in self.anomalies]),
            ("notes", [*self.notes, *self.graph.notes]),
        ]  # fmt: skip
        for title, items in sections:
            if items:
                lines.append(f"{title} ({len(items)}):")
                lines.extend(f"  {item}" for item in items[:HUMAN_LINES])
                if len(items) > HUMAN_LINES:
                    lines.append(f"  ... and {len(items) - HUMAN_LINES} more (all of them: --json or --report FILE)")
        if self.clean:
            lines.append("nothing undecided: every switch answered, every cable agrees, a rail-optimized 1:1 design")
        return "\n".join(lines)

    def _headline(self) -> str:
        c = self.crawl
        read = f"{len(c.tables)} of {len(c.polled)} switches answered in {c.seconds:.1f} s"
        if self.fabric is None:
            return f"discovered nothing: {read}"
        s = self.fabric.summary()
        roles = ", ".join(f"{s[k]} {k}" for k in ("leaves", "spines", "superspines") if s.get(k))
        return f"discovered {s['switches']} switches ({roles}), {s['servers']} servers, {s['links']} cables; {read}"


def build(
    crawl: CrawlResult,
    patterns: Mapping[str, re.Pattern[str]],
    *,
    name: str | None = None,
    speed_gbps: int | None = None,
    known: Mapping[str, Switch] | None = None,
) -> DiscoveryReport:
    """The inventory the crawl describes (``report.fabric``, None when no cable was found) and its report.

    ``known`` (the configured inventory's switches) adds what it says of a switch (``nos``,
    ``mgmt_address``); ``speed_gbps`` is the speed of cables no end reported one for (default:
    the most common reported speed).
    """
    is_switch = pattern_switch(patterns)
    named = {n for t in crawl.tables.values() for es in t.neighbors.values() for x in es if (n := x.system_name)}
    extra = set(crawl.failed) | {n for n in named if is_switch(n)}
    graph = cable_graph(crawl.tables, extra)
    report = DiscoveryReport(crawl, graph.report)
    if not graph.cables:
        report.notes.append("no cable found: no switch answered with an LLDP neighbour")
        return report
    roles = decide_roles(graph.cables, patterns, graph.switches, report.plan)
    speed = speed_gbps or _common_speed(graph, report)
    doc = plan_document(
        graph.cables, roles, name=name, switch_facts=_facts(crawl, known or {}), default_speed=speed, report=report.plan
    )
    kept = [c for c in graph.cables if c.a_node in roles and c.b_node in roles]  # plan_document's links, in order
    fabric, left_out = build_v2(doc)
    report.fabric = fabric
    report.anomalies = list(design_report(fabric, [_by_cable(a, kept) for a in left_out]).anomalies)
    sought = set(crawl.tables) | set(crawl.failed)
    report.missing = [
        f"{n}: {'answered' if n in crawl.tables else 'did not answer'}, and no cable of the plan reaches it"
        for n in sorted(sought - set(fabric.switches), key=natural_key)
    ]
    return report


def _common_speed(graph: CableGraph, report: DiscoveryReport) -> int:
    speeds = Counter(c.speed_gbps for c in graph.cables if c.speed_gbps)
    if not speeds:
        report.notes.append(f"no switch reported a port speed: cables taken as {FALLBACK_SPEED_GBPS}G (--speed-gbps)")
        return FALLBACK_SPEED_GBPS
    unknown = sum(1 for c in graph.cables if not c.speed_gbps)
    common = speeds.most_common(1)[0][0]
    if unknown:
        report.notes.append(f"{unknown} cable(s) with no reported speed taken as {common}G, the most common speed")
    return common


def _facts(crawl: CrawlResult, known: Mapping[str, Switch]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for n in crawl.tables.keys() | crawl.failed.keys():
        sw, table = known.get(n), crawl.tables.get(n)
        nos = (sw.nos if sw else None) or (table.nos if table else None)
        out[n] = {"nos": nos, "mgmt_address": sw.mgmt_address if sw else None}
    return out


def _by_cable(anomaly: Anomaly, kept: list[Cable]) -> Anomaly:
    """A loader anomaly about ``links[i]`` told by the LLDP entry the cable came from."""
    at = anomaly.at
    if len(at) == 2 and at[0] == "links" and isinstance(at[1], int) and at[1] < len(kept):
        message = f"{kept[at[1]].source}: {anomaly.message.partition(': ')[2] or anomaly.message}"
        return Anomaly(anomaly.kind, message, anomaly.nodes, None, None, anomaly.at)
    return anomaly

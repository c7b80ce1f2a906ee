"""Every rule in one table: which check makes it, where its incident is, how it ranks, what it explains.

The engine (:data:`analyzer.engine.RULES_OF`), the correlation (:mod:`analyzer.correlation`,
:mod:`analyzer.silence`) and the actions (:mod:`analyzer.actions`) read their lookups from
:data:`RULES`, derived once below; adding a rule is one row here (and its check in
:data:`analyzer.engine.CHECKS`; ``tests/unit/analyzer/test_rules.py`` keeps the two in step).

Columns:

* ``check``: the name of the check function that produces it (``None``: the correlation makes it);
* ``place``: the kind of place an incident rooted on it sits at (``link_outage`` keyed by a switch
  alone is that switch's: a switch incident). ``capacity`` and ``other`` rules are *derived*: a
  symptom of whatever root explains them, a root only when none does;
* precedence: the table's order. When several findings share an incident, the first rule here
  is its root;
* ``silence``: the finding is a switch (or some of its ports) not heard from: a collection failure
  makes it (the ``collection`` incident takes it);
* ``symptom_of``: the kinds of incident that take it in as a symptom when they explain it
  (a link finding on a failed switch's link, a drift on a switch an incident touches);
* ``cuts_path``: the link carries nothing now (down, or flapping: no path NCCL can use): many of
  one switch at once are that switch's fault, and on an uplink the efficiency model counts it lost;
* ``evidence``: the typed evidence the correlation and the actions read (:mod:`analyzer.evidence`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from analyzer.evidence import (
    CapacityEvidence,
    CollectionEvidence,
    DegradingEvidence,
    Evidence,
    MiswireEvidence,
    OutageEvidence,
    StaleEvidence,
    StormEvidence,
)
from analyzer.findings import Finding

Place = Literal["collection", "switch", "link", "miswire", "capacity", "other"]

#: Kinds of place, in the order a symptom that several incidents could explain prefers them.
PLACES: tuple[Place, ...] = ("collection", "switch", "link", "miswire", "capacity", "other")

#: Incidents that can explain a derived finding (the collection incident takes silence only).
_ROOTS: frozenset[Place] = frozenset({"switch", "link", "miswire", "capacity"})
#: A link finding is its switch's symptom when that switch failed.
_SWITCH: frozenset[Place] = frozenset({"switch"})


@dataclass(frozen=True, slots=True)
class Rule:
    """One row of :data:`RULES` (see the module docstring for the columns)."""

    name: str
    check: str | None
    place: Place
    silence: bool = False
    symptom_of: frozenset[Place] = frozenset()
    cuts_path: bool = False
    evidence: type[Evidence] = Evidence

    @property
    def derived(self) -> bool:
        """A symptom of something else, never a root cause on its own when a root explains it."""
        return self.place in ("capacity", "other")


#: Every rule, in precedence order (the first names an incident's root).
RULES: tuple[Rule, ...] = (
    Rule("collection", None, "collection", evidence=CollectionEvidence),
    Rule("link_outage", "check_outages", "link", symptom_of=_SWITCH, cuts_path=True, evidence=OutageEvidence),
    Rule("switch_flapping", "check_flaps", "switch"),
    Rule("stale_switch", "check_freshness", "switch", silence=True, evidence=StaleEvidence),
    Rule("link_flapping", "check_flaps", "link", symptom_of=_SWITCH, cuts_path=True),
    Rule("pfc_storm", "check_pfc_storms", "link", symptom_of=_SWITCH, evidence=StormEvidence),
    Rule("miswire", "check_cabling", "miswire", evidence=MiswireEvidence),
    Rule("link_degrading", "check_link_health", "link", symptom_of=_SWITCH, evidence=DegradingEvidence),
    Rule("error_rate", "check_errors", "link", symptom_of=_SWITCH),
    Rule("oversubscription_drift", "check_oversubscription", "capacity", symptom_of=_ROOTS, evidence=CapacityEvidence),
    Rule("rail_capacity_asymmetry", "check_rail_capacity", "other", symptom_of=_ROOTS, evidence=CapacityEvidence),
    Rule("rail_load_straggler", "check_rail_load", "other", symptom_of=_ROOTS, evidence=CapacityEvidence),
    Rule("ecmp_imbalance", "check_ecmp", "other", symptom_of=_ROOTS),
    Rule("ports_unreported", "check_unreported_ports", "other", silence=True, symptom_of=_ROOTS | {"collection"}),
)

BY_NAME: dict[str, Rule] = {r.name: r for r in RULES}
#: Rules that are always symptoms of something else when a root explains them.
DERIVED: frozenset[str] = frozenset(r.name for r in RULES if r.derived)
#: Rules whose findings root a switch incident.
SWITCH_RULES: frozenset[str] = frozenset(r.name for r in RULES if r.place == "switch")
#: Rules about one link (a switch incident takes them when its switch is an end).
LINK_RULES: frozenset[str] = frozenset(r.name for r in RULES if r.place == "link")
#: The findings of silence: what a collection failure produces.
SILENCE: frozenset[str] = frozenset(r.name for r in RULES if r.silence)
#: Rules whose link carries nothing now.
CUTS_PATH: frozenset[str] = frozenset(r.name for r in RULES if r.cuts_path)
#: Which rule names an incident's root when several findings share its place (first wins).
ROOT_ORDER: tuple[str, ...] = tuple(r.name for r in RULES)
#: Kind of place -> preference when a symptom could join several incidents (lower first).
KIND_ORDER: dict[str, int] = {kind: i for i, kind in enumerate(PLACES)}
#: Check function name -> the rules it can produce.
RULES_BY_CHECK: dict[str, frozenset[str]] = {
    check: frozenset(r.name for r in RULES if r.check == check) for check in {r.check for r in RULES if r.check}
}


def precedence(rule: str) -> int:
    """The rule's precedence (unknown rules last)."""
    return ROOT_ORDER.index(rule) if rule in BY_NAME else len(ROOT_ORDER)


def explains(kind: str, rule: str) -> bool:
    """Whether an incident of ``kind`` may take a finding of ``rule`` in as a symptom."""
    r = BY_NAME.get(rule)
    return kind in (r.symptom_of if r is not None else _ROOTS)


def evidence_of(f: Finding) -> Evidence:
    """``f``'s evidence, parsed into its rule's type (the base :class:`Evidence` for others)."""
    r = BY_NAME.get(f.rule)
    return (r.evidence if r is not None else Evidence).parse(f.details)

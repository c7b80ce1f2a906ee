"""What a firing incident is remembered by across rounds, and how long a quiet one is held.

A PFC storm's origin and a rebooting switch's links are named anew every round from samples taken
at other instants; the correlation continues a firing incident by what it held
(:func:`ongoing_storms`, :func:`held_links`) rather than open a second one. The memory is a table
of its own (``incident_memory``, :mod:`store.incident_memory`), not the alert's payload.
:func:`hold_unconfirmed` keeps incidents of symptoms only pending until their root had time to show.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace
from datetime import datetime

from analyzer.evidence import CollectionEvidence, StaleEvidence, StormEvidence
from analyzer.findings import Finding
from analyzer.incident_model import Incident
from analyzer.rules import DERIVED, evidence_of
from store.incident_memory import IncidentMemory


def storm_ports(findings: Iterable[Finding]) -> list[str]:
    """Every port the pause trees among ``findings`` hold (what a firing incident is remembered by)."""
    out: set[str] = set()
    for f in findings:
        ev = evidence_of(f)
        if isinstance(ev, StormEvidence):
            out.update(ev.affected_ports)
    return sorted(out)


def ongoing_storms(memory: Iterable[IncidentMemory]) -> dict[str, frozenset[str]]:
    """Incident key -> the ports its pause trees hold, from the firing incidents' memory
    (:func:`store.incident_memory.read_memory`); incidents without storms are left out."""
    return {m.incident_key: frozenset(m.storm_ports) for m in memory if m.storm_ports}


def memory_of(inc: Incident, alert_id: int) -> IncidentMemory:
    """What a firing ``inc`` (alert ``alert_id``) is remembered by (read back by
    :func:`ongoing_storms` and :func:`held_links`): its storms' ports (this round's trees) and a
    switch's links (:func:`store.incident_memory.remember` adds them to those it held before)."""
    links = inc.links if inc.kind == "switch" else ()
    return IncidentMemory(alert_id, inc.key, tuple(storm_ports(inc.findings)), tuple(sorted(links)))


def held_links(memory: Iterable[IncidentMemory]) -> dict[str, frozenset[str]]:
    """Switch incident key -> the links it holds (naming ends), from the firing incidents' memory;
    incidents without links are left out."""
    return {
        m.incident_key: frozenset(m.switch_links)
        for m in memory
        if m.incident_key.startswith("switch:") and m.switch_links
    }


def hold_unconfirmed(
    incidents: Sequence[Incident], first_seen: dict[str, datetime], now: datetime, confirm_s: float
) -> list[Incident]:
    """Incidents that ask nothing of a scheduler yet wait ``confirm_s`` before they are sent:
    symptoms only (a rail asymmetry, an ECMP imbalance no root explains), uplink or capacity
    incidents whose action is ``observe``, and a switch silent while its peers see it forward (when
    many are at once, the collection incident takes them in, rather than a burst of switch
    incidents sent and then resolved). Their root cause is often found a round or two later (a
    PFC storm counts as one only once it has lasted; a rebooting spine shows as a few of its links
    first), and it must take them in rather than leave a second incident behind. An incident whose
    action is drain or checkpoint is never held. ``first_seen`` (fingerprint -> time) is the
    caller's memory across rounds; entries of incidents no longer present are dropped."""
    present = {i.fingerprint for i in incidents}
    for fp in [fp for fp in first_seen if fp not in present]:
        del first_seen[fp]
    out: list[Incident] = []
    for inc in incidents:
        quiet = inc.action == "observe" and not inc.needs_review
        ev = evidence_of(inc.root)
        lag = inc.kind == "collection" and isinstance(ev, CollectionEvidence) and ev.lag_only
        # a switch silent while it forwards: one of many at once is our collection, which takes
        # them in once it counts them (analyzer/silence.py); alone it waits as long, asking nothing
        stale = evidence_of(inc.root) if inc.root.rule == "stale_switch" else None
        silent = inc.kind == "switch" and isinstance(stale, StaleEvidence) and stale.forwarding
        if lag or (quiet and (silent or (inc.kind == "other" and inc.root.rule in DERIVED)
                              or inc.kind in ("link", "capacity"))):  # fmt: skip
            seen = first_seen.setdefault(inc.fingerprint, now)
            if (now - seen).total_seconds() < confirm_s:
                inc = replace(inc, pending=True)
        out.append(inc)
    return out

"""What a firing incident is remembered by across rounds, and how long a quiet one is held.

A PFC storm's origin and a rebooting switch's links are named anew every round from samples taken
at other instants; the correlation continues a firing incident by what it held
(:func:`ongoing_storms`, :func:`held_links`) rather than open a second one.
:func:`hold_unconfirmed` keeps incidents of symptoms only pending until their root had time to show.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

from analyzer.findings import Finding
from analyzer.incident_model import DERIVED, Incident


def storm_ports(findings: Iterable[Finding]) -> list[str]:
    """Every port the pause trees among ``findings`` hold (what a firing incident is remembered by)."""
    out: set[str] = set()
    for f in findings:
        ports = f.details.get("affected_ports") if f.rule == "pfc_storm" else None
        if isinstance(ports, list):
            out.update(str(p) for p in ports)
    return sorted(out)


def ongoing_storms(firing: Iterable[Mapping[str, Any]]) -> dict[str, frozenset[str]]:
    """Incident key -> the ports its pause trees hold, from the ``details`` of firing alerts
    (``incident_key``, ``storm_ports``); alerts stored without them are left out."""
    out: dict[str, frozenset[str]] = {}
    for details in firing:
        key, ports = details.get("incident_key"), details.get("storm_ports")
        if isinstance(key, str) and isinstance(ports, list) and ports:
            out[key] = frozenset(str(p) for p in ports)
    return out


def memory_details(inc: Incident, stored: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """What a firing ``inc`` is remembered by in its alert's ``details`` (read back by
    :func:`ongoing_storms` and :func:`held_links`): its key, its storms' ports (this round's trees),
    a switch's links (with those ``stored`` before: every link it held while it fired)."""
    out: dict[str, Any] = {"incident_key": inc.key}
    if ports := storm_ports(inc.findings):
        out["storm_ports"] = ports
    if inc.kind == "switch":
        before = (stored or {}).get("switch_links") if (stored or {}).get("incident_key") == inc.key else None
        links = set(inc.links) | ({str(x) for x in before} if isinstance(before, list) else set())
        if links:
            out["switch_links"] = sorted(links)
    return out


def held_links(firing: Iterable[Mapping[str, Any]]) -> dict[str, frozenset[str]]:
    """Switch incident key -> the links it holds (naming ends), from the ``details`` of firing
    alerts (``incident_key``, ``switch_links``); alerts stored without them are left out."""
    out: dict[str, frozenset[str]] = {}
    for details in firing:
        key, links = details.get("incident_key"), details.get("switch_links")
        if isinstance(key, str) and key.startswith("switch:") and isinstance(links, list) and links:
            out[key] = frozenset(str(x) for x in links)
    return out


def hold_unconfirmed(
    incidents: Sequence[Incident], first_seen: dict[str, datetime], now: datetime, confirm_s: float
) -> list[Incident]:
    """Incidents that ask nothing of a scheduler yet wait ``confirm_s`` before they are sent:
    symptoms only (a rail asymmetry, an ECMP imbalance no root explains), and uplink or capacity
    incidents whose action is ``observe``. Their root cause is often found a round or two later (a
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
        lag = inc.kind == "collection" and inc.root.details.get("lag_only") is True
        if lag or (quiet and ((inc.kind == "other" and inc.root.rule in DERIVED) or inc.kind in ("link", "capacity"))):
            seen = first_seen.setdefault(inc.fingerprint, now)
            if (now - seen).total_seconds() < confirm_s:
                inc = replace(inc, pending=True)
        out.append(inc)
    return out

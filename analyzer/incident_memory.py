"""What a firing incident is remembered by across rounds, and how long a quiet one is held.

A PFC storm's origin and a rebooting switch's links are named anew every round from samples taken
at other instants; the correlation continues a firing incident by what it held
(:func:`ongoing_storms`, :func:`held_links`) rather than open a second one. The memory is a table
of its own (``incident_memory``, :mod:`store.incident_memory`), not the alert's payload.
:func:`hold_unconfirmed` keeps incidents of symptoms only pending until their root had time to show,
remembering their waits (:class:`Waits`) across the rounds that could not see them (:func:`blind`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime

from analyzer.evidence import StaleEvidence, StormEvidence
from analyzer.findings import Finding
from analyzer.incident_model import Incident, Observation
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


@dataclass(frozen=True, slots=True)
class Wait:
    """One held incident's or finding's wait: when it was first and last seen, and on which switches."""

    since: datetime
    last: datetime
    switches: frozenset[str]


@dataclass(slots=True)
class Waits:
    """What :func:`hold_unconfirmed` remembers across rounds: incident fingerprint, or ``finding:``
    and a finding's fingerprint -> its :class:`Wait`."""

    by_key: dict[str, Wait] = field(default_factory=dict)

    def clear(self) -> None:
        self.by_key.clear()


def blind(findings: Iterable[Finding], observation: Observation) -> frozenset[str]:
    """The switches a round could not judge: stale (``stale_switch``, whether or not an incident
    came of it: one switch late in our own pipeline makes none) or behind a collector fabricmon
    cannot observe."""
    stale = (f.key for f in findings if f.rule == "stale_switch")  # its key is the switch
    return observation.unobserved | frozenset(stale)


def hold_unconfirmed(
    incidents: Sequence[Incident],
    waits: Waits,
    now: datetime,
    confirm_s: float,
    blind: frozenset[str] = frozenset(),
) -> list[Incident]:
    """Incidents that ask nothing of a scheduler yet wait ``confirm_s`` before they are sent:
    symptoms only (a rail asymmetry, an ECMP imbalance no root explains), and link, capacity or
    switch incidents whose action is ``observe`` (a lost uplink ECMP carries, a spine whose first
    links are in, a switch silent while its peers see it forward: when many are at once, the
    collection incident takes them in, rather than a burst of switch incidents sent and then
    resolved), and collection incidents (fabricmon's own blindness: a collector restarting, or
    replaying its spool after a database blip, is back within seconds; one still blind after the
    wait is sent). Their root cause, or their full extent, is often found a round or two later (a PFC
    storm counts as one only once it has lasted; a rebooting spine shows as a few of its links
    first, from whichever peer reported first), and the first delivery must carry the action it
    comes to, not an observe followed by an escalation, nor a second incident left behind. An
    incident whose action is drain or checkpoint, or that needs review, is never held; nor is a
    switch incident inside a maintenance window (observe whatever comes next; a planned reboot's
    evidence may not outlast the wait), unless it is silent while it forwards.

    The wait is the fault's, not its key's: an incident waits from the earliest time any of its
    findings was first seen in a held incident, so a fault whose place is named anew (a leaf's
    links gathered into the leaf one round, not the next) does not start its wait over.
    ``waits`` is the caller's memory across rounds. A wait no held incident of this round has is
    dropped (the fault passed: it waits anew if it comes back), unless one of its switches is in
    ``blind`` (stale this round, or behind a collector fabricmon cannot observe) and it was last
    seen no more than ``confirm_s`` ago: a finding the round could not compute for want of its
    switch's samples has not gone (the 300-fault drill's f132: a spine's CRC burst, its collector
    lagging, absent every third round and never sent)."""
    out: list[Incident] = []
    kept: set[str] = set()
    by_key = waits.by_key
    for inc in incidents:
        quiet = inc.action == "observe" and not inc.needs_review
        ev = evidence_of(inc.root)
        derived = inc.kind == "other" and inc.root.rule in DERIVED
        # a switch: silent while it forwards (mass silence), or first seen in part (a rebooting
        # spine's first links); one inside a maintenance window is observed whatever comes next
        silent = inc.root.rule == "stale_switch" and isinstance(ev, StaleEvidence) and ev.forwarding
        switch = inc.kind == "switch" and (silent or not inc.maintenance)
        if quiet and (derived or switch or inc.kind in ("link", "capacity", "collection")):
            where = {f"finding:{f.fingerprint}": frozenset(f.scope.switches) for f in inc.findings}
            where[inc.fingerprint] = frozenset(s for switches in where.values() for s in switches)
            seen = min((by_key[k].since for k in where if k in by_key), default=now)
            for k, switches in where.items():
                by_key[k] = Wait(seen if k not in by_key else by_key[k].since, now, switches)
            kept.update(where)
            if (now - seen).total_seconds() < confirm_s:
                inc = replace(inc, pending=True)
        out.append(inc)
    for k, w in list(by_key.items()):
        if k not in kept and not (w.switches & blind and (now - w.last).total_seconds() <= confirm_s):
            del by_key[k]
    return out

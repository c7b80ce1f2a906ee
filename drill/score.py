"""Scoring a drill: what fabricmon sent, against what the drill injected.

The truth is one :class:`Injected` per event (a fault, or a benign event that must lead to no
checkpoint and no drain); what fabricmon did is one :class:`Seen` per incident, as a webhook
receiver saw it (:func:`seen_from`). :func:`score` pairs them and measures:

* **precision**: incidents that match an injected fault, out of all incidents sent. An incident
  matches a fault when it fired while the fault was on (or within ``grace_s`` after it was
  cleared) and its places (root cause and scope) touch the fault's places. Each fault is matched
  once, by an incident that localizes it if one does (else by the first that touches it): a
  second incident for it is a *duplicate*, and an incident matching only benign events or
  nothing is *false*;
* **recall**: faults that must be detected and were, out of those injected;
* **top-1 localization**: matched faults whose root cause names the faulted switch and port (or
  either end of the faulted cable), the faulted switch, or the miswired server and rail;
* **detection time**: fault start to the first firing delivery; **resolution time**: fault
  cleared to the resolved delivery; **deliveries per fault**;
* **false actions**: a drain or checkpoint on a benign event or on no fault, and a drain of a
  host outside the fault's blast radius; **missed actions**: a fault that needed a drain or a
  checkpoint and got neither.

Everything here is pure: the drill's runner and the unit tests feed it the same way.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

#: Actions that change what a scheduler runs; ``observe`` does not.
ACTING = frozenset({"drain", "checkpoint"})


@dataclass(frozen=True, slots=True)
class Injected:
    """One injected event and what a correct fabricmon does about it."""

    id: str
    kind: str
    benign: bool
    #: Seconds since the drill started: applied, and cleared.
    start_s: float
    end_s: float
    #: Switch and server names the event touches: an incident there, then, may be about it.
    places: frozenset[str]
    #: Root causes that localize it: ``(switch, port)`` (either end of a cable), ``(switch, None)``
    #: (the switch itself) or ``(server, "rail:N")``.
    roots: frozenset[tuple[str, str | None]] = frozenset()
    #: The blast radius: the only hosts a drain about it may name.
    hosts: frozenset[str] = frozenset()
    #: Acceptable recommended actions; a fault whose set lacks ``observe`` must be acted on.
    actions: frozenset[str] = frozenset({"observe"})
    #: False for events fabricmon may or may not report (a slow SNMP agent, a benign event).
    must_detect: bool = True
    #: The simulator fault (or benign event) as applied, to replay it.
    spec: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Seen:
    """One incident as its webhook deliveries showed it."""

    fingerprint: str
    alert_id: str | None
    rule: str
    summary: str
    #: The root cause's place: ``switch``, ``port``, ``server``, ``rail`` (None where it has none).
    root: Mapping[str, Any]
    places: frozenset[str]
    #: Seconds since the drill started: first ``alert.firing``, ``alert.resolved`` (None: never).
    fired_s: float
    resolved_s: float | None
    deliveries: int
    #: ``(recommended_action, action_hosts)`` of each delivery, in order.
    actions: tuple[tuple[str, tuple[str, ...]], ...]
    #: Sent as inside a maintenance window (SPEC §10.4): announced work, observed, not an alarm.
    maintenance: bool = False


@dataclass(frozen=True, slots=True)
class Finding:
    """One line of the report's lists: a miss, a false incident, a false or missed action."""

    what: str
    event: str | None
    incident: str | None
    detail: str


@dataclass(slots=True)
class Score:
    """A drill's figures and everything that went wrong, by id."""

    faults: int = 0
    benign: int = 0
    incidents: int = 0
    #: Incidents sent as inside a maintenance window that matched no fault: not counted as false.
    maintenance: int = 0
    matched: int = 0
    detected: int = 0
    must_detect: int = 0
    localized: int = 0
    detection_s: list[float] = field(default_factory=list)
    resolution_s: list[float] = field(default_factory=list)
    deliveries: int = 0
    false_drains: int = 0
    false_checkpoints: int = 0
    misses: list[Finding] = field(default_factory=list)
    false_incidents: list[Finding] = field(default_factory=list)
    false_actions: list[Finding] = field(default_factory=list)
    missed_actions: list[Finding] = field(default_factory=list)
    #: event id → the incident fingerprint matched to it
    pairs: dict[str, str] = field(default_factory=dict)
    #: fault kind → how it fared (where misses and slow detections come from)
    by_kind: dict[str, KindFigures] = field(default_factory=dict)

    @property
    def precision(self) -> float:
        judged = self.incidents - self.maintenance
        return self.matched / judged if judged else 1.0

    @property
    def recall(self) -> float:
        return self.detected / self.must_detect if self.must_detect else 1.0

    @property
    def localization(self) -> float:
        return self.localized / len(self.pairs) if self.pairs else 1.0

    @property
    def deliveries_per_fault(self) -> float:
        return self.deliveries / len(self.pairs) if self.pairs else 0.0


@dataclass(slots=True)
class KindFigures:
    """One fault kind's share of a score: injected, found, localized, detection times."""

    faults: int = 0
    must_detect: int = 0
    detected: int = 0
    localized: int = 0
    detection_s: list[float] = field(default_factory=list)
    deliveries: int = 0


def percentile(values: Sequence[float], q: float) -> float | None:
    """The nearest-rank ``q``-th percentile (0 < q <= 100), None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


def seen_from(deliveries: Iterable[tuple[float, str, Mapping[str, Any]]]) -> list[Seen]:
    """Incidents from webhook deliveries ``(seconds since start, event, fabricmon body)``, in the
    order they first fired; an incident never sent as firing is not one.

    A fingerprint names a root cause, as Alertmanager's names an alert's labels: one that fires
    again after it was resolved is a new incident (the same place failing again), told apart by
    its alert id (a new ``alerts`` row; an escalation keeps its id). The second is
    ``<fingerprint>#2``, and so on, in the order they first fired."""
    episodes: dict[tuple[str, str], list[tuple[float, str, Mapping[str, Any]]]] = {}
    for d in sorted(deliveries, key=lambda d: d[0]):
        alert = d[2].get("alert", {})
        fp = alert.get("fingerprint")
        if isinstance(fp, str):
            episodes.setdefault((fp, str(alert.get("id"))), []).append(d)
    out: list[Seen] = []
    count: dict[str, int] = {}
    for (fp, _), ds in sorted(episodes.items(), key=lambda e: _first_fired(e[1])):
        n = count.get(fp, 0) + 1
        seen = _seen(fp if n == 1 else f"{fp}#{n}", ds)
        if seen is not None:
            count[fp] = n
            out.append(seen)
    return out


def _first_fired(ds: list[tuple[float, str, Mapping[str, Any]]]) -> float:
    return min((d[0] for d in ds if d[1] == "alert.firing"), default=float("inf"))


def _seen(name: str, ds: list[tuple[float, str, Mapping[str, Any]]]) -> Seen | None:
    """One incident's deliveries as the scorer reads them; None when none fired."""
    firing = [d for d in ds if d[1] == "alert.firing"]
    if not firing:
        return None
    alert = firing[0][2].get("alert", {})
    root = alert.get("root_cause") or {}
    scope = alert.get("scope") or {}
    places = {str(p) for p in (*scope.get("switches", ()), *scope.get("servers", ()))}
    places |= {str(root[k]) for k in ("switch", "server") if root.get(k)}
    resolved = next((d[0] for d in ds if d[1] == "alert.resolved"), None)
    actions = tuple(
        (str(body.get("recommended_action")), tuple(str(h) for h in body.get("action_hosts") or ()))
        for _, _, body in ds
    )
    maintenance = any(bool(body.get("maintenance") or body.get("alert", {}).get("maintenance"))
                      for _, _, body in ds)  # fmt: skip
    return Seen(name, None if alert.get("id") is None else str(alert["id"]), str(alert.get("rule")),
                str(alert.get("summary", "")), dict(root), frozenset(places), firing[0][0], resolved,
                len(ds), actions, maintenance)  # fmt: skip


def localizes(seen: Seen, event: Injected) -> bool:
    """Whether the incident's root cause names the event's place (top-1)."""
    return names_place(seen.root, event.roots)


def names_place(root: Mapping[str, Any], roots: frozenset[tuple[str, str | None]]) -> bool:
    """Whether a root cause (``switch``, ``port``, ``server``, ``rail``) is one of ``roots``."""
    switch, port, server, rail = root.get("switch"), root.get("port"), root.get("server"), root.get("rail")
    if server is not None and rail is not None and (str(server), f"rail:{rail}") in roots:
        return True
    if switch is None:
        return False
    return (str(switch), None if port is None else str(port)) in roots


def _candidates(seen: Seen, events: Sequence[Injected], grace_s: float) -> list[Injected]:
    return [e for e in events if e.start_s <= seen.fired_s <= e.end_s + grace_s and seen.places & e.places]


def score(events: Sequence[Injected], seen: Sequence[Seen], *, grace_s: float) -> Score:
    """Pair incidents with injected events and measure (see the module's docstring)."""
    s = Score(faults=sum(not e.benign for e in events), benign=sum(e.benign for e in events), incidents=len(seen))
    s.must_detect = sum(e.must_detect and not e.benign for e in events)
    ordered = sorted(seen, key=lambda i: i.fired_s)
    matched_to = _pair(s, events, ordered, grace_s)
    for inc in ordered:
        cands = _candidates(inc, events, grace_s)
        faults = [e for e in cands if not e.benign]
        if inc.fingerprint not in matched_to:
            if inc.maintenance and (not faults or _announced_root(inc, cands)):
                s.maintenance += 1  # announced work, said so: its actions are still judged below
            else:
                s.false_incidents.append(_unmatched(inc, cands))
        # a duplicate's actions are judged against the fault it repeats
        _judge_actions(s, inc, matched_to.get(inc.fingerprint) or (faults[0] if faults else None), cands)
    seen_by_fp = {i.fingerprint: i for i in seen}
    for e in events:
        if not e.benign:
            _per_fault(s, e, seen_by_fp.get(s.pairs.get(e.id, "")))
    return s


def _pair(s: Score, events: Sequence[Injected], ordered: Sequence[Seen], grace_s: float) -> dict[str, Injected]:
    """Match each fault to one incident: first the incidents that name their fault's place, in
    the order they fired, then the others for the faults still unmatched (a rail-wide symptom
    that fired first does not take the place of the incident that names the cable)."""
    matched_to: dict[str, Injected] = {}  # incident fingerprint → its fault
    for localizing in (True, False):
        for inc in ordered:
            cands = _candidates(inc, events, grace_s)
            if inc.fingerprint in matched_to or (inc.maintenance and _announced_root(inc, cands)):
                continue
            free = [e for e in cands
                    if not e.benign and e.id not in s.pairs and localizes(inc, e) is localizing]  # fmt: skip
            if free:
                best = max(free, key=lambda e: e.start_s)  # the one that started last before it fired
                s.pairs[best.id] = inc.fingerprint
                matched_to[inc.fingerprint] = best
                s.matched += 1
    return matched_to


def _announced_root(inc: Seen, cands: Sequence[Injected]) -> bool:
    """Whether a maintenance incident's root cause is on a benign event's own switch (a planned
    reboot's): announced work, whatever fault its blast radius also touches. Only the root counts,
    as for the windows themselves (:mod:`analyzer.coverage`): a rebooting spine's scope holds every
    server of its rail, and so the servers of a storm elsewhere on the fabric."""
    switch = inc.root.get("switch")
    return switch is not None and any(e.benign and e.spec.get("switch") == switch for e in cands)


def _unmatched(inc: Seen, cands: Sequence[Injected]) -> Finding:
    """Why an incident matched no fault: a duplicate of one, or false."""
    faults = [e.id for e in cands if not e.benign]
    if faults:
        detail = f"{inc.rule}: {inc.summary} (a second incident for {', '.join(faults)})"
        return Finding("duplicate", faults[0], inc.fingerprint, detail)
    benign = [e.id for e in cands]
    why = f"during benign {', '.join(benign)}" if benign else "matching no injected event"
    return Finding(
        "false_incident", benign[0] if benign else None, inc.fingerprint, f"{inc.rule}: {inc.summary} ({why})"
    )


def _per_fault(s: Score, e: Injected, inc: Seen | None) -> None:
    """A fault's detection, localization, times and action."""
    kind = s.by_kind.setdefault(e.kind, KindFigures())
    kind.faults += 1
    kind.must_detect += e.must_detect
    if inc is not None:
        kind.detected += e.must_detect
        kind.localized += localizes(inc, e)
        kind.detection_s.append(inc.fired_s - e.start_s)
        kind.deliveries += inc.deliveries
    if inc is None:
        if e.must_detect:
            s.misses.append(Finding("miss", e.id, None, f"{e.kind} {_where(e)}: no incident"))
        if "observe" not in e.actions:
            s.missed_actions.append(Finding("missed_action", e.id, None, f"{e.kind}: no incident, no action"))
        return
    s.detected += e.must_detect
    s.localized += localizes(inc, e)
    s.detection_s.append(inc.fired_s - e.start_s)
    if inc.resolved_s is not None:
        s.resolution_s.append(max(0.0, inc.resolved_s - e.end_s))
    s.deliveries += inc.deliveries
    if "observe" not in e.actions and not any(a in e.actions for a, _ in inc.actions):
        got = ", ".join(dict.fromkeys(a for a, _ in inc.actions))
        detail = f"{e.kind}: wanted {'/'.join(sorted(e.actions))}, got {got}"
        s.missed_actions.append(Finding("missed_action", e.id, inc.fingerprint, detail))


def _judge_actions(s: Score, inc: Seen, fault: Injected | None, cands: Sequence[Injected]) -> None:
    """Count the incident's drain and checkpoint (once each) that no fault justifies."""
    for action in ("drain", "checkpoint"):
        hosts = sorted({h for a, hs in inc.actions if a == action for h in hs})
        if not any(a == action for a, _ in inc.actions):
            continue
        reason = None
        if fault is None:
            benign = [e.id for e in cands if e.benign]
            reason = f"on benign {', '.join(benign)}" if benign else "on no injected fault"
        elif action == "drain" and not set(hosts) <= fault.hosts:
            outside = sorted(set(hosts) - fault.hosts)
            reason = f"{len(outside)} host(s) outside {fault.id}'s blast radius: {', '.join(outside[:8])}"
        if reason is None:
            continue
        if action == "drain":
            s.false_drains += 1
        else:
            s.false_checkpoints += 1
        event = fault.id if fault is not None else next((e.id for e in cands), None)
        s.false_actions.append(Finding(f"false_{action}", event, inc.fingerprint, f"{inc.rule}: {reason}"))


def _where(e: Injected) -> str:
    spec = e.spec
    parts = [str(spec[k]) for k in ("switch", "port", "server") if spec.get(k)]
    return ":".join(parts) if parts else ",".join(sorted(e.places))

"""Silence that is ours: the ``collection`` incident's findings (see :mod:`analyzer.correlation`).

Switches fabricmon cannot observe (a collector silent, behind or replaying), switches silent that
their collector still calls connected (samples late in our own pipeline), many switches silent at
once while their peers see their links up, or (no heartbeats at all) half the fabric silent at
once: that silence is fabricmon's own collection, not the switches'. Silence of switches whose
collector is still starting is not judged at all.
"""

from __future__ import annotations

from dataclasses import replace

from analyzer.evidence import StaleEvidence
from analyzer.findings import Finding, Scope
from analyzer.incident_model import Observation
from analyzer.rules import SILENCE, evidence_of
from fabric.model import Fabric

#: Switches silent that their collector calls connected (samples late in our own pipeline) make a
#: collection incident from this share of the fabric; fewer are not judged at all.
LAGGING_SHARE = 0.1
#: Without collector heartbeats, this share of the fabric's switches silent at once is our collection.
SILENT_SHARE = 0.5
#: This many switches silent at once while their peers see every link of theirs up (they forward:
#: not gone) have a common cause on our side of the wire, a collector or its host too busy, or the
#: management network: one collection incident, whatever the collector calls their state. Fewer
#: are each the switch's own (a management-plane fault). The share of the fabric, at least the count.
MASS_SILENCE_SHARE = 0.1
MASS_SILENCE_MIN = 5


def collection(findings: list[Finding], fabric: Fabric, obs: Observation) -> tuple[list[Finding] | None, list[Finding]]:
    """The ``collection`` incident's findings (its root first, then the silence it explains), or
    None when there is none, and the findings left for the other incidents."""
    findings = [f for f in findings if not _blind(f, obs.starting)]  # not judged yet
    silent = [f for f in findings if f.rule in SILENCE]
    lagging = [f for f in silent if _ours(f) and f.key not in obs.unobserved]
    if fabric.switches and len(lagging) < LAGGING_SHARE * len(fabric.switches):
        # a few samples late in our own pipeline: not the switches' fault, too little to page about
        late = {id(f) for f in lagging}
        findings = [f for f in findings if id(f) not in late]
        silent = [f for f in silent if id(f) not in late]
        lagging = []
    ours = [f for f in silent if f.key in obs.unobserved or _ours(f)]
    # a link or capacity finding read from switches we cannot observe is stale data, not a fault
    ours += [f for f in findings if f.rule not in SILENCE and _blind(f, obs.unobserved)]
    lag_only = not obs.problems and bool(lagging) and all(_ours(f) for f in ours)
    taken = {id(f) for f in ours}
    forwarding = [f for f in silent if id(f) not in taken and _forwarding(f)]
    if fabric.switches and len(forwarding) >= max(MASS_SILENCE_MIN, MASS_SILENCE_SHARE * len(fabric.switches)):
        ours += forwarding
        lag_only = False
        problem = f"{len(forwarding)} switches silent at once while their peers see their links up"
        obs = replace(obs, problems=(*obs.problems, problem))
    if not obs.known:
        stale = [f for f in silent if f.rule == "stale_switch"]
        if fabric.switches and len(stale) >= max(2, SILENT_SHARE * len(fabric.switches)):
            ours = silent
    if not ours and not obs.problems:
        return None, findings
    if lagging:
        obs = replace(
            obs,
            problems=(
                *obs.problems,
                f"{len(lagging)} switch(es) connected to their collector but with no sample stored lately",
            ),
        )
    taken = {id(f) for f in ours}
    root = _collection_finding(fabric, obs, ours, lag_only)
    return [root, *ours], [f for f in findings if id(f) not in taken]


def _ours(f: Finding) -> bool:
    """A silent switch its collector still calls connected: the samples are late in our own
    pipeline (a busy poller, a wedged writer), not missing at the switch, which would have made the
    collector call it stale, unreachable or in error. Unless its peers see its links down: then
    the switch is gone, whatever the collector's session says."""
    ev = evidence_of(f)
    return isinstance(ev, StaleEvidence) and ev.state == "connected" and not ev.gone


def _forwarding(f: Finding) -> bool:
    """A silent switch whose peers see its links up, and none down: it forwards, we do not hear it."""
    ev = evidence_of(f)
    return isinstance(ev, StaleEvidence) and ev.forwarding


def _blind(f: Finding, switches: frozenset[str]) -> bool:
    """Whether everything ``f`` was read from is among ``switches`` (silence: the switch itself)."""
    if f.rule in SILENCE:
        return f.key in switches
    return bool(f.scope.switches) and set(f.scope.switches) <= switches


def _collection_finding(fabric: Fabric, obs: Observation, silent: list[Finding], lag_only: bool) -> Finding:
    switches = sorted({f.key for f in silent} | set(obs.unobserved))
    share = len(switches) / len(fabric.switches) if fabric.switches else 0.0
    what = "; ".join(obs.problems) if obs.problems else f"{len(switches)} switches silent at once"
    return Finding(
        rule="collection",
        key="collection",
        severity="critical" if share >= 0.1 else "warning",
        summary=(
            f"fabricmon's own telemetry collection is impaired ({what}): {len(switches)} of "
            f"{len(fabric.switches)} switches unobserved. Not a fabric fault: nothing to drain or checkpoint"
        ),
        scope=Scope(switches=tuple(switches)),
        details={
            "unobserved_switches": len(switches),
            "unobserved_share": round(share, 4),
            "problems": list(obs.problems),
            "heartbeats_known": obs.known,
            **({"lag_only": True} if lag_only else {}),
        },
    )

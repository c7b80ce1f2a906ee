"""The ``link_degrading`` rule's action (analyzer/actions.py, issue 26): checkpoint within the lead,
observe beyond it, a drain only once the link actually fails; one incident with its symptoms."""

from __future__ import annotations

from datetime import UTC, datetime

from analyzer.actions import ActionPolicy, decide
from analyzer.correlation import correlate
from analyzer.findings import Finding, blast_radius
from analyzer.incident_model import Incident
from analyzer.links import links_scope
from fabric.model import Endpoint, FabricParams
from fabric.topology import build_aipod

FABRIC = build_aipod(FabricParams(gpus=512))
NOW = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)
LEAF = "lf-g1-r1"
DOWN = next(p.name for p in FABRIC.ports(LEAF) if p.peer is not None and p.direction == "down")
UP = next(p.name for p in FABRIC.ports(LEAF) if p.peer is not None and p.direction == "up")
HOST = FABRIC.peer(Endpoint(LEAF, DOWN)).node  # type: ignore[union-attr]


def degrading(port: str, ttf: float, confidence: float = 0.9) -> Finding:
    details = {"time_to_failure_s": ttf, "confidence": confidence, "basis": "rx_power", "evidence": {}}
    scope = blast_radius(FABRIC, ports=[(LEAF, port)])
    return Finding("link_degrading", f"{LEAF}:{port}", "warning", "degrading", scope, details, NOW)


def outage(port: str) -> Finding:
    details = {"down_now": True, "down_for_s": 30.0, "longest_completed_s": 0.0}
    return Finding("link_outage", f"{LEAF}:{port}", "critical", "down", links_scope(FABRIC, [(LEAF, port)]), details)


def only(findings: list[Finding], policy: ActionPolicy | None = None) -> Incident:
    (incident,) = correlate(findings, FABRIC)
    return decide(incident, FABRIC, policy)


def test_a_server_link_failing_within_the_lead_checkpoints_its_host() -> None:
    i = only([degrading(DOWN, 3000.0)])
    assert (i.action, i.action_hosts, i.severity) == ("checkpoint", (HOST,), "critical")
    assert "50 min" in i.reason and "90% sure" in i.reason and "2026-12-03T12:50:00" in i.reason


def test_beyond_the_lead_it_is_observed() -> None:
    assert only([degrading(DOWN, 3 * 3600.0)]).action == "observe"
    assert only([degrading(DOWN, 3 * 3600.0)], ActionPolicy(checkpoint_lead_s=4 * 3600.0)).action == "checkpoint"


def test_the_failure_itself_drains_in_the_same_incident() -> None:
    i = only([degrading(DOWN, 0.0), outage(DOWN)])
    assert i.root.rule == "link_outage" and {f.rule for f in i.findings} == {"link_outage", "link_degrading"}
    assert (i.action, i.action_hosts) == ("drain", (HOST,))


def test_an_uplink_is_judged_as_a_lost_uplink() -> None:
    i = only([degrading(UP, 600.0)])
    assert i.action == "observe" and "once it fails" in i.reason  # ECMP carries a lost uplink at ~1 %
    assert only([degrading(UP, 600.0)], ActionPolicy(checkpoint_efficiency_loss=0.0)).action == "checkpoint"

"""The analyzer's verdict as a document: what ``fabricmon check`` prints, ``analyzer_runs`` keeps
and the API serves (``/v1/health``, ``/v1/rails``, ``/v1/oversubscription``, ``/v1/slo``)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from analyzer.engine import Evaluation
from analyzer.findings import Finding
from analyzer.objectives import Objective
from analyzer.round_data import Ratio
from analyzer.verdict import OpenIncident, check_statuses, status_of


def finding_dict(f: Finding) -> dict[str, Any]:
    """A finding for JSON."""
    return {
        "rule": f.rule,
        "key": f.key,
        "fingerprint": f.fingerprint,
        "severity": f.severity,
        "summary": f.summary,
        "scope": f.scope.as_dict(),
        "details": f.details,
    }


def _ratio(r: Ratio) -> dict[str, Any]:
    return {
        "scope": r.scope,
        "name": r.name,
        "down_gbps": r.down_gbps,
        "up_gbps": r.up_gbps,
        "ratio": None if r.up_gbps == 0 else round(r.ratio, 4),
        "design_ratio": r.design_ratio,
        "drift": None if r.up_gbps == 0 else round(r.drift, 4),
    }


def build_report(
    ev: Evaluation, objectives: list[Objective], jobs: list[dict[str, Any]], incidents: list[OpenIncident]
) -> dict[str, Any]:
    """The whole verdict of one evaluation: statuses from the open ``incidents`` (analyzer.verdict),
    every finding still listed under its check."""
    statuses = check_statuses(incidents)
    ratios = ev.results.ratios
    switch_ratios = [r for r in ratios if r.scope == "switch"]
    worst = sorted(switch_ratios, key=lambda r: -r.ratio if r.up_gbps else float("-inf"))[:10]
    caps = ev.results.rail_capacity
    loads = ev.results.rail_load
    best = max((c.bottleneck_fraction for c in caps), default=1.0)
    return {
        "status": status_of(incidents),
        "updated_at": ev.at,
        "duration_s": round(ev.duration_s, 3),
        "checks": {
            name: {"status": statuses.get(name, "healthy"), "findings": [finding_dict(f) for f in found]}
            for name, found in ev.findings.items()
        },
        "incidents": [o.as_dict() for o in incidents],
        "rails": [
            {
                "rail": c.rail,
                "design_gbps": c.design_gbps,
                "live_gbps": c.live_gbps,
                "bottleneck": c.bottleneck,
                "bottleneck_fraction": round(c.bottleneck_fraction, 4),
                "asymmetry": round(best - c.bottleneck_fraction, 4),
                "load_gbps": round(load, 1) if (load := loads.get(c.rail)) is not None else None,
            }
            for c in caps
        ],
        "oversubscription": {
            "design_ratio": 1.0,
            "worst": [_ratio(r) for r in worst],
            "rollups": [_ratio(r) for r in ratios if r.scope != "switch"],
        },
        "slo": [o.as_dict() for o in objectives],
        "jobs": jobs,
        "errors": ev.results.errors,
    }


def human(report: dict[str, Any]) -> str:
    """The report for a terminal."""
    lines = [f"fabric: {report['status'].upper()}  (evaluated {_at(report['updated_at'])} in {report['duration_s']} s)"]
    for name, check in report["checks"].items():
        lines.append(f"  {name:<17} {check['status']}")
    for o in report.get("incidents", []):
        review = ", needs review" if o["needs_review"] else ""
        pending = " (pending confirmation)" if o["pending"] else ""
        hosts = f" {len(o['action_hosts'])} host(s)" if o["action_hosts"] else ""
        lines.append(
            f"  incident [{o['severity']}] {o['summary']}  ({o['gpus']} GPUs) → {o['recommended_action']}"
            f"{hosts}{review}{pending}"
        )
    if report["rails"]:
        caps = "  ".join(f"r{r['rail']} {r['bottleneck_fraction']:.1%}" for r in report["rails"])
        lines.append(f"  rail capacity (bottleneck vs design): {caps}")
    for o in report["slo"]:
        lines.append(
            f"  SLO {o['name']}: {o['current']:.6f} (target {o['target']}), "
            f"budget left {o['error_budget_remaining']:.1%}, {o['status']}"
        )
    for j in report["jobs"]:
        lines.append(
            f"  job {j['id']}: {j['status']}, {len(j['faults'])} fault(s) under it, "
            f"efficiency loss {j['efficiency_loss']:.1%}, P(interrupt) {j['interruption_probability']:.2%}"
        )
    for e in report["errors"]:
        lines.append(f"  analyzer error: {e}")
    return "\n".join(lines)


def _at(value: Any) -> str:
    return value.isoformat(timespec="seconds") if isinstance(value, datetime) else str(value)

"""One severity: a rail or switch shows the severity of the sent incidents that hold its findings."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from api.cache import held_severity, index


def finding(rule: str, key: str, severity: str, rail: int, switch: str) -> dict[str, Any]:
    return {"rule": rule, "key": key, "severity": severity, "summary": f"{rule} {key}",
            "scope": {"switches": [switch], "rails": [rail], "groups": [1], "servers": [], "gpus": 8}}  # fmt: skip


def incident(severity: str, members: list[str], *, pending: bool = False) -> dict[str, Any]:
    return {"severity": severity, "pending": pending, "members": members}


REPORT = {
    "checks": {
        "stability": {"findings": [
            finding("link_outage", "lf-g1-r3:Ethernet1/33", "critical", 3, "lf-g1-r3"),  # held by a warning
            finding("pfc_storm", "lf-g1-r5:et-0/0/3:0:3", "critical", 5, "lf-g1-r5"),  # held by nothing yet
            finding("link_flapping", "lf-g1-r6:Ethernet8", "warning", 6, "lf-g1-r6"),  # held by a critical
            finding("error_rate", "lf-g1-r7:Ethernet9", "critical", 7, "lf-g1-r7"),  # held by a pending one
        ]},
    },
    "incidents": [
        incident("warning", ["oversubscription_drift|lf-g1-r3", "link_outage|lf-g1-r3:Ethernet1/33"]),
        incident("critical", ["link_flapping|lf-g1-r6:Ethernet8"]),
        incident("critical", ["error_rate|lf-g1-r7:Ethernet9"], pending=True),
        incident("warning", ["link_flapping|lf-g1-r6:Ethernet8"]),  # the worst of two holders wins
    ],
}  # fmt: skip


def test_rails_and_switches_take_the_severity_of_the_incidents_holding_their_findings() -> None:
    v = index(datetime(2026, 12, 3, tzinfo=UTC), REPORT)
    assert {r: v.status(v.by_rail[r]) for r in (3, 5, 6, 7)} == {
        3: "degraded",  # a critical finding in a warning incident: the incident's severity
        5: "healthy",  # a finding no incident holds colours nothing
        6: "critical",  # a warning finding in a critical incident
        7: "healthy",  # a pending incident is not sent, and colours nothing either
    }
    assert v.status(v.by_switch["lf-g1-r3"]) == "degraded" and v.status(v.by_cell[(6, 1)]) == "critical"
    assert v.status([]) == "healthy"


def test_held_severity_skips_pending_and_unknown_severities() -> None:
    held = held_severity({"incidents": [incident("bogus", ["a|b"]), incident("warning", ["c|d"], pending=True),
                                        incident("warning", ["e|f"])]})  # fmt: skip
    assert held == {"e|f": "warning"}

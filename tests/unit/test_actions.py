"""recommended_action: drain when a host lost its only path on a rail, checkpoint past thresholds, else observe."""

from __future__ import annotations

from typing import Any

import pytest

from analyzer.actions import ActionPolicy, Placement, recommended_action

HOST_PORT: dict[str, Any] = {
    "switches": ["lf-g1-r1"],
    "ports": ["lf-g1-r1:swp3"],
    "rails": [1],
    "groups": [1],
    "servers": ["srv-g1-003"],
    "gpus": 1,
}
UPLINK: dict[str, Any] = {
    "switches": ["lf-g1-r1"],
    "ports": ["lf-g1-r1:swp40"],
    "rails": [1],
    "groups": [1],
    "servers": [f"srv-g1-{i:03d}" for i in range(1, 33)],
    "gpus": 32,
}
LEAF: dict[str, Any] = {**UPLINK, "ports": []}
SPINE: dict[str, Any] = {**LEAF, "switches": ["sp-r1-1"], "groups": [1, 2]}


@pytest.mark.parametrize(
    ("rule", "severity", "scope", "details", "placement", "expected"),
    [
        ("link_outage", "warning", HOST_PORT, {}, None, "drain"),
        ("link_outage", "warning", HOST_PORT, {"down_now": False}, None, "observe"),
        ("link_outage", "critical", UPLINK, {}, None, "checkpoint"),
        ("link_outage", "warning", UPLINK, {}, None, "observe"),
        # the inventory overrides the shape: this one-GPU port is an uplink
        ("link_outage", "warning", HOST_PORT, {}, Placement({"lf-g1-r1": "leaf"}, {"lf-g1-r1:swp3": "up"}), "observe"),
        ("link_outage", "info", UPLINK, {}, Placement({"lf-g1-r1": "leaf"}, {"lf-g1-r1:swp40": "down"}), "drain"),
        ("stale_switch", "warning", LEAF, {}, None, "drain"),
        ("stale_switch", "warning", SPINE, {}, None, "observe"),
        ("stale_switch", "warning", LEAF, {}, Placement({"lf-g1-r1": "spine"}), "observe"),
        ("miswire", "critical", HOST_PORT, {"expected_leaf": "lf-g1-r2", "actual_leaf": "lf-g1-r1"}, None, "drain"),
        ("miswire", "warning", HOST_PORT, {"expected_leaf": "lf-g1-r1", "actual_leaf": "lf-g1-r1"}, None, "observe"),
        ("miswire", "critical", UPLINK, {"spine": "sp-r2-1"}, None, "checkpoint"),
        ("rail_load_straggler", "info", UPLINK, {"host_path_lost": True}, None, "drain"),
        ("oversubscription_drift", "warning", LEAF, {"efficiency_loss": 0.05}, None, "checkpoint"),
        ("oversubscription_drift", "warning", LEAF, {"efficiency_loss": 0.049}, None, "observe"),
        ("link_flapping", "warning", HOST_PORT, {"interruption_probability": 0.5}, None, "checkpoint"),
        ("link_flapping", "warning", HOST_PORT, {"interruption_probability": "high"}, None, "observe"),
        ("error_rate", "warning", UPLINK, {"efficiency_loss": float("nan")}, None, "observe"),
        ("error_rate", "info", UPLINK, {}, None, "observe"),
    ],
)
def test_rules(
    rule: str,
    severity: str,
    scope: dict[str, Any],
    details: dict[str, Any],
    placement: Placement | None,
    expected: str,
) -> None:
    assert recommended_action(rule, severity, scope, details, placement=placement) == expected


def test_thresholds_are_configurable() -> None:
    strict = ActionPolicy(checkpoint_efficiency_loss=0.01, checkpoint_interruption_probability=0.1)
    assert recommended_action("rail_capacity_asymmetry", "warning", LEAF, {"efficiency_loss": 0.02}) == "observe"
    assert (
        recommended_action("rail_capacity_asymmetry", "warning", LEAF, {"efficiency_loss": 0.02}, policy=strict)
        == "checkpoint"
    )
    assert recommended_action("x", "info", LEAF, {"interruption_probability": 0.2}, policy=strict) == "checkpoint"

"""The rules table (analyzer/rules.py) and the typed evidence the correlation and actions read.

The table is the one place a rule is declared: the engine's checks, the correlation's kinds and
precedence and the actions' lookups all come from it, so it must name exactly the checks the
engine runs and the rules they make. Evidence parses what checks write, and a malformed detail
never crosses a threshold.
"""

from __future__ import annotations

import math
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from analyzer.engine import CHECKS, RULES_OF
from analyzer.evidence import (
    CapacityEvidence,
    Evidence,
    MiswireEvidence,
    OutageEvidence,
    StaleEvidence,
    StormEvidence,
    max_loss,
)
from analyzer.findings import Finding, Scope
from analyzer.rules import (
    BY_NAME,
    DERIVED,
    KIND_ORDER,
    LINK_RULES,
    PLACES,
    ROOT_ORDER,
    RULES,
    RULES_BY_CHECK,
    SILENCE,
    SWITCH_RULES,
    evidence_of,
    explains,
    precedence,
)

ANALYZER = Path(__file__).resolve().parents[3] / "analyzer"


def test_the_table_names_exactly_the_checks_the_engine_runs() -> None:
    ran = {c.__name__ for checks in CHECKS.values() for c in checks}
    assert set(RULES_BY_CHECK) == ran
    assert all(RULES_OF[c] for checks in CHECKS.values() for c in checks)  # every check makes a rule
    made = set().union(*RULES_OF.values())
    assert made == {r.name for r in RULES if r.check is not None}
    assert [r.name for r in RULES if r.check is None] == ["collection"]  # the correlation's own


def test_the_lookups_are_the_ones_the_correlation_was_written_with() -> None:
    """The derived sets equal the hand-written ones they replaced (commit 044919e)."""
    assert {
        "oversubscription_drift",
        "rail_capacity_asymmetry",
        "rail_load_straggler",
        "ecmp_imbalance",
        "ports_unreported",
    } == DERIVED
    assert {"stale_switch", "switch_flapping"} == SWITCH_RULES
    assert {"stale_switch", "ports_unreported"} == SILENCE
    assert {"link_outage", "link_flapping", "error_rate", "pfc_storm", "link_degrading"} == LINK_RULES
    assert ROOT_ORDER[:4] == ("collection", "link_outage", "switch_flapping", "stale_switch")
    assert ROOT_ORDER[-1] == "ports_unreported"
    assert KIND_ORDER == {"collection": 0, "switch": 1, "link": 2, "miswire": 3, "capacity": 4, "other": 5}
    assert len(BY_NAME) == len(RULES)
    assert all(r.place in PLACES and r.symptom_of <= set(PLACES) for r in RULES)


def test_precedence_and_explains() -> None:
    assert precedence("link_outage") < precedence("pfc_storm") < precedence("ecmp_imbalance")
    assert precedence("no_such_rule") == len(RULES)
    assert explains("switch", "link_flapping") and not explains("link", "link_flapping")
    assert explains("collection", "ports_unreported") and not explains("collection", "ecmp_imbalance")
    assert not explains("other", "oversubscription_drift")
    assert explains("capacity", "no_such_rule")  # an unknown derived finding is still explained


def test_no_details_get_in_the_incident_and_action_modules() -> None:
    """They read findings through analyzer.evidence only (issue 27 item 4)."""
    modules = ("correlation", "silence", "incident_model", "incident_memory", "actions")
    offenders = [
        m for m in modules if "details.get(" in (text := (ANALYZER / f"{m}.py").read_text()) or "details[" in text
    ]
    assert offenders == []


def finding(rule: str, **details: object) -> Finding:
    return Finding(rule, "leaf-1-1:Ethernet1", "warning", "", Scope(), dict(details))


def test_each_rule_parses_into_its_own_evidence() -> None:
    storm = evidence_of(
        finding("pfc_storm", origin={"port": "a:1", "peer": "b:2"}, affected_ports=["a:1", "c:3"], efficiency_loss=0.2)
    )
    assert storm == StormEvidence(
        efficiency_loss=0.2, origin_port="a:1", origin_peer="b:2", affected_ports=("a:1", "c:3")
    )
    outage = evidence_of(
        finding(
            "link_outage", links=[{"link": "s:E1 (to x:E2)", "down_now": True}, {"link": "s:E3", "down_now": False}]
        )
    )
    assert isinstance(outage, OutageEvidence) and outage.links_down == (("s", "E1"),) and not outage.up_again
    assert outage.fatal_outage_s == math.inf and outage.longest_completed_s == -math.inf
    wire = evidence_of(finding("miswire", server="srv-1", expected_leaf="l1", actual_leaf="l2"))
    assert isinstance(wire, MiswireEvidence) and wire.wrong_rail and wire.leaves == ("l1", "l2")
    stale = evidence_of(finding("stale_switch", state="connected", peer_links_up=0, peer_links_down=3))
    assert isinstance(stale, StaleEvidence) and stale.gone and not stale.forwarding
    rail = evidence_of(finding("rail_capacity_asymmetry", rail=3, lost_ports=["a:1"], bottleneck="sp-1"))
    assert rail == CapacityEvidence(rail=3, bottleneck="sp-1", lost_ports=("a:1",))
    assert type(evidence_of(finding("ecmp_imbalance"))) is Evidence


junk = st.one_of(
    st.none(),
    st.booleans(),
    st.floats(allow_nan=True),
    st.integers(),
    st.text(max_size=5),
    st.lists(st.one_of(st.text(max_size=5), st.integers(), st.none()), max_size=3),
    st.dictionaries(st.text(max_size=5), st.one_of(st.text(max_size=5), st.booleans(), st.none()), max_size=3),
)
FIELDS = (
    "efficiency_loss", "interruption_probability", "server", "down_now", "longest_completed_s", "fatal_outage_s",
    "links", "state", "peer_links_up", "peer_links_down", "origin", "affected_ports", "expected_leaf",
    "actual_leaf", "rail", "lost_ports", "uplinks_lost", "time_to_failure_s", "confidence", "basis", "lag_only",
)  # fmt: skip


@given(
    rule=st.sampled_from([r.name for r in RULES]),
    details=st.fixed_dictionaries({}, optional=dict.fromkeys(FIELDS, junk)),
)
def test_malformed_details_parse_without_crossing_a_threshold(rule: str, details: dict[str, object]) -> None:
    ev = evidence_of(finding(rule, **details))
    assert ev.efficiency_loss >= 0 and not math.isnan(ev.efficiency_loss)
    assert not math.isnan(ev.interruption_probability)
    good = isinstance(details.get("interruption_probability"), int | float) and not isinstance(
        details.get("interruption_probability"), bool
    )
    if not good:
        assert ev.interruption_probability == -math.inf
    assert max_loss([details]) == ev.efficiency_loss

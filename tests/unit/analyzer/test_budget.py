"""The fleet limits' arithmetic (analyzer/budget.py): what is admitted, what is held back and why."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from analyzer.actions import ActionPolicy
from analyzer.budget import CHECKPOINT_BREAKER, FleetLimits, FleetUse


def test_held_hosts_count_first_and_a_second_incident_over_the_budget_is_refused() -> None:
    use = FleetUse(FleetLimits(drain=2, checkpoint=3))
    use.hold("drain", ["a"])
    assert use.admit("drain", ["b"]) is None
    why = use.admit("drain", ["c"])
    assert why is not None and "drain budget" in why and "more than 2" in why and "3 hosts drained" in why
    assert use.held["drain"] == {"a", "b"}  # a refusal counts nothing
    assert use.admit("drain", ["a", "b"]) is None  # hosts already held cost nothing more


def test_checkpoint_and_drain_are_counted_apart_and_observe_is_always_admitted() -> None:
    use = FleetUse(FleetLimits(drain=1, checkpoint=2))
    assert use.admit("drain", ["a"]) is None and use.admit("checkpoint", ["a", "b"]) is None
    why = use.admit("checkpoint", ["c"])
    assert why is not None and why.startswith(CHECKPOINT_BREAKER)
    assert use.admit("observe", ["x", "y", "z"]) is None


def test_budgets_from_the_policy_take_the_smaller_and_never_fall_below_one() -> None:
    p = ActionPolicy()
    assert (p.drain_budget(128), p.drain_budget(10_000), p.drain_budget(4)) == (6, 16, 1)
    assert (p.checkpoint_budget(128), p.checkpoint_budget(10_000), p.checkpoint_budget(1)) == (128, 256, 1)
    assert ActionPolicy(max_checkpoint_fraction=0.5).checkpoint_budget(128) == 64


@given(
    limit=st.integers(0, 8),
    requests=st.lists(st.lists(st.sampled_from("abcdefghijkl"), max_size=5), max_size=12),
)
def test_what_is_admitted_never_exceeds_the_limit(limit: int, requests: list[list[str]]) -> None:
    use = FleetUse(FleetLimits(drain=limit, checkpoint=limit))
    for hosts in requests:
        before = set(use.held["drain"])
        why = use.admit("drain", hosts)
        assert (why is None) == (len(before | set(hosts)) <= limit)
        assert len(use.held["drain"]) <= limit

"""Which orphaned shards a collector claims: every collector, from one view, agrees."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from collector.shard_assign import orphans_for, surplus


def test_a_standby_takes_a_dead_collectors_shard_first() -> None:
    # b died holding shard 1; a holds shard 0; c stands by
    assert orphans_for("c", 2, {0: "a"}, ["a", "c"]) == [1]
    assert orphans_for("a", 2, {0: "a"}, ["a", "c"]) == []


def test_with_no_standby_the_survivors_carry_the_orphans() -> None:
    assert orphans_for("a", 4, {0: "a", 1: "b"}, ["a", "b"]) == [2]
    assert orphans_for("b", 4, {0: "a", 1: "b"}, ["a", "b"]) == [3]
    # the last one alive carries every shard
    assert orphans_for("a", 3, {}, ["a"]) == [0, 1, 2]


def test_collectors_started_together_share_the_shards() -> None:
    members = ["c", "a", "b"]
    assert [orphans_for(m, 2, {}, members) for m in ("a", "b", "c")] == [[0], [1], []]


def test_a_member_not_listed_yet_counts_itself() -> None:
    assert orphans_for("z", 1, {}, []) == [0]


@given(
    shards=st.integers(1, 12),
    members=st.sets(st.sampled_from("abcdefgh"), min_size=1),
    held=st.dictionaries(st.integers(0, 11), st.sampled_from("abcdefghxy")),
)
def test_every_orphan_goes_to_exactly_one_live_member(shards: int, members: set[str], held: dict[int, str]) -> None:
    holders = {s: h for s, h in held.items() if s < shards}
    claims = {m: orphans_for(m, shards, holders, members) for m in members}
    taken = sorted(s for mine in claims.values() for s in mine)
    assert taken == sorted(set(range(shards)) - set(holders))
    # shared evenly: whoever took an orphan ends at most one shard above the lightest member
    load = {m: sum(1 for h in holders.values() if h == m) + len(claims[m]) for m in members}
    assert all(load[m] <= min(load.values()) + 1 for m in members if claims[m])


def test_the_first_collector_up_hands_shards_to_those_that_join() -> None:
    assert surplus("a", 2, {0: "a", 1: "a"}, ["a", "b", "c"]) == [1]
    assert surplus("a", 5, {i: "a" for i in range(5)}, ["a", "b"]) == [4, 3]
    assert surplus("a", 2, {0: "a", 1: "b"}, ["a", "b", "c"]) == []
    assert surplus("a", 2, {0: "a", 1: "a"}, ["a"]) == []  # alone, it carries all


@given(
    shards=st.integers(1, 12),
    members=st.sets(st.sampled_from("abcdefgh"), min_size=1),
    held=st.dictionaries(st.integers(0, 11), st.sampled_from("abcdefgh")),
)
def test_after_giving_back_and_claiming_nothing_moves_again(
    shards: int, members: set[str], held: dict[int, str]
) -> None:
    holders = {s: h for s, h in held.items() if s < shards and h in members}
    for m in sorted(members):  # give back
        for s in surplus(m, shards, holders, members):
            del holders[s]
    for m in sorted(members):  # claim
        for s in orphans_for(m, shards, holders, members):
            holders[s] = m
    assert set(holders) == set(range(shards))
    assert all(not surplus(m, shards, holders, members) for m in members)
    assert all(not orphans_for(m, shards, holders, members) for m in members)

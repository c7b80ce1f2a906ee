"""Which orphaned shards this collector claims (``collector.shard: auto``): pure, so that every
collector, from the same tick's view, comes to the same answer.

An orphan is a shard with no live lease. Orphans, lowest first, go one at a time to the live
member holding the fewest shards, ties broken by name: a standby (holding none) takes over a dead
collector's shard first, and with no standby left the survivors share the orphans, so the last
collector alive carries every shard. A collector claims only the orphans this gives it; a claim
another collector won first is simply not taken. A collector holding more than its fair share
(a collector that started first, and took every shard) gives the surplus back, so the shards
spread over the members that joined after it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping


def orphans_for(me: str, shards: int, holders: Mapping[int, str], members: Iterable[str]) -> list[int]:
    """The orphaned shards of ``shards`` that ``me`` should claim. ``holders``: shard → live
    holder (shards without a live lease absent); ``members``: the live members (``me`` is one
    whether listed or not)."""
    load = {m: 0 for m in {*members, me}}
    for shard, holder in holders.items():
        if 0 <= shard < shards and holder in load:
            load[holder] += 1
    mine: list[int] = []
    for shard in range(shards):
        if shard in holders:
            continue
        taker = min(load, key=lambda m: (load[m], m))
        load[taker] += 1
        if taker == me:
            mine.append(shard)
    return mine


def surplus(me: str, shards: int, holders: Mapping[int, str], members: Iterable[str]) -> list[int]:
    """The shards ``me`` should give back: those beyond its fair share (``ceil(shards / live
    members)``), highest first. A collector that started first and took every shard hands them
    to those that joined after it; once nobody is above the fair share, nothing moves."""
    live = {*members, me}
    fair = -(-shards // len(live))
    mine = sorted((s for s, h in holders.items() if h == me and 0 <= s < shards), reverse=True)
    return mine[: max(0, len(mine) - fair)]

"""What fabricmon can observe this round: the collectors' heartbeats turned into an
:class:`~analyzer.incident_model.Observation` for the correlation.

A switch is unobserved while its collector is silent, behind, or replaying its spool, and for
one staleness window after that collector is healthy again: samples of every switch must have
had the time to arrive before silence can be blamed on a switch ("no judgment of staleness
until ingest has caught up"). The analyzer service keeps a :class:`CollectionMemory` across
rounds for that window; a one-shot check, which has no past, judges what it sees.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from analyzer.collection import CollectionState, read_collection
from analyzer.context import CheckContext
from analyzer.incident_model import Observation
from store.db import Connection


@dataclass(slots=True)
class CollectionMemory:
    """When each collector was last seen unhealthy, and the switches it then had."""

    last_bad: dict[str, tuple[datetime, frozenset[str]]] = field(default_factory=dict)

    def recovering(self, state: CollectionState, now: datetime, grace_s: float) -> dict[str, frozenset[str]]:
        """Record this round's unhealthy collectors; return the healthy ones still inside their
        catch-up grace, with their switches."""
        out: dict[str, frozenset[str]] = {}
        for c in state.collectors:
            if not c.healthy and not c.stopped:
                self.last_bad[c.collector] = (now, c.switches)
        for name, (at, switches) in list(self.last_bad.items()):
            if now - at > timedelta(seconds=grace_s):
                del self.last_bad[name]
            elif not any(c.collector == name and not c.healthy for c in state.collectors):
                out[name] = switches
        return out


def observation_of(
    state: CollectionState, recovering: dict[str, frozenset[str]], switches: Iterable[str] | None = None
) -> Observation:
    """The correlation's view of our own collection (``switches``: the fabric's, so that a switch no
    live collector is assigned counts as unobserved).

    A collector that is starting or catching up (its samples are arriving, not yet for every
    switch) is no problem to report, but its switches' silence is not judged yet either.
    """
    problems = [
        f"collector {c.collector}: {c.problem}"
        for c in state.collectors
        if c.problem and not c.stopped and not c.catching_up
    ]
    starting = {s for c in state.collectors if c.catching_up for s in c.switches}
    starting |= set().union(*recovering.values()) if recovering else set()
    unobserved = set(state.unobserved(switches)) - starting
    if state.known and switches is not None:
        listed = set().union(*(c.switches for c in state.live)) if state.live else set()
        if orphans := set(switches) - listed:
            problems.append(f"{len(orphans)} switch(es) assigned to no running collector")
    return Observation(frozenset(unobserved), tuple(problems), state.known, frozenset(starting))


async def observe(conn: Connection, ctx: CheckContext, memory: CollectionMemory | None = None) -> Observation:
    """Read the heartbeats and build this round's observation."""
    stale_after = ctx.thresholds.stale_intervals * ctx.collect_interval_s
    state = await read_collection(conn, ctx.now, stale_after)
    recovering = memory.recovering(state, ctx.now, stale_after) if memory is not None else {}
    return observation_of(state, recovering, ctx.fabric.switches)

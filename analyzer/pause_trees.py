"""PFC pause trees: which port a tree of paused ports grew from (:mod:`analyzer.pfc` reads them).

**The origin** of a pause tree: pauses travel upstream. A switch that receives pauses
on one port backs up and sends pauses on its others, so a port's sent pauses are *explained*
when its switch receives pauses. The causal graph runs sender -> the switch at the other end
(which receives them) -> that switch's senders. Received pauses whose sender is a monitored
switch port that shows none (its samples lag, or fell just below threshold) count as sent by
it; those from outside (a server NIC, an unmonitored device) enter through the receiving port.
The origin is the strongest root of that graph (a strongly connected component nothing else
feeds, so parallel links that carry pauses back to the origin's own switch make no loop without
a root): the deepest sender, e.g. the leaf port facing a stuck receiver, or the port facing an
outside source. A sender is judged by both ends of its link: its own sent pauses and its
peer's received ones count the same frames, but the two switches are sampled at different
instants (gNMI leaves, SNMP spines), so either end may still show a partial first sample, or
nothing yet; the stronger of the two is the link's. A sender seen only by its peer is still
named as the sender. One finding per tree (weakly connected component), keyed by the origin;
every other paused port is in its scope and details.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any, Literal

from analyzer.links import PortKey, port_order

#: Priority of per-interface totals (IEEE8021-PFC-MIB): matches any priority.
ALL_PRIORITIES = -1

Direction = Literal["tx", "rx"]


def compatible(a: int, b: int) -> bool:
    """Same priority, or either is the all-priorities total."""
    return a == b or ALL_PRIORITIES in (a, b)


@dataclass(frozen=True, slots=True)
class Pausing:
    """A port pausing (``tx``: sending pauses) or paused (``rx``) on one priority, now."""

    switch: str
    port: str
    priority: int
    direction: Direction
    ratio: float  # latest sample
    peak: float
    sustained_s: float
    pps: float
    load: float = 0.0  # latest, before the ratio's cap at 1: tells saturated ports apart

    @property
    def key(self) -> PortKey:
        return (self.switch, self.port)

    def as_dict(self) -> dict[str, Any]:
        return {
            "port": f"{self.switch}:{self.port}",
            "priority": self.priority,
            "direction": self.direction,
            "ratio": round(self.ratio, 4),
            "peak_ratio": round(self.peak, 4),
            "sustained_s": self.sustained_s,
            "pause_pps": self.pps,
        }


@dataclass(frozen=True, slots=True)
class Storm:
    """One pause tree: its origin, how the origin is known, and everything paused in it.

    A ``sender`` origin is the sending port as both ends of its link see it (``seen``: its own
    sent pauses, its peer's received ones; see :func:`_link_view`); a ``facing_source`` origin is
    the receiving port's own sample."""

    origin: Pausing
    kind: Literal["sender", "facing_source"]  # the deepest sender, or the port facing an outside source
    members: tuple[Pausing, ...]
    other_origins: tuple[Pausing, ...]
    seen: tuple[Pausing, ...] = ()  # the members the origin is known by


Node = tuple[str, ...]
Peer = Callable[[str, str], PortKey | None]


class _Graph:
    """The causal graph of a pause tree under construction (see :func:`pause_trees`)."""

    def __init__(self, peer: Peer) -> None:
        self.peer = peer
        self.edges: dict[Node, set[Node]] = defaultdict(set)
        self.hubs: dict[str, list[tuple[Node, int]]] = defaultdict(list)  # switch -> its (hub, priority)
        self.sends: list[tuple[str, int, Node]] = []  # (switch, priority, sender node)

    def hub(self, switch: str, prio: int) -> Node:
        """The node of ``switch`` receiving pauses on ``prio``."""
        node = ("hub", switch, str(prio))
        if node not in self.edges:
            self.hubs[switch].append((node, prio))
            self.edges[node] = set()
        return node

    def sender(self, switch: str, port: str, prio: int) -> Node:
        """The node of ``switch:port`` sending pauses on ``prio``, feeding the switch at the other end."""
        node: Node = ("tx", switch, port, str(prio))
        if node not in self.edges:
            self.edges[node] = set()
            self.sends.append((switch, prio, node))
            if (other := self.peer(switch, port)) is not None:
                self.edges[node].add(self.hub(other[0], prio))
        return node

    def outside(self, switch: str, port: str, prio: int) -> Node:
        """Pauses entering ``switch:port`` from outside what is monitored."""
        node: Node = ("ext", switch, port, str(prio))
        self.edges[node].add(self.hub(switch, prio))
        return node

    def close(self) -> dict[Node, set[Node]]:
        """Connect each switch's receiving hubs to its senders of a compatible priority."""
        for switch, prio, node in self.sends:
            for h, p in self.hubs.get(switch, ()):
                if compatible(p, prio):
                    self.edges[h].add(node)
        return self.edges


def pause_trees(pausing: Iterable[Pausing], peer: Peer) -> list[Storm]:
    """Group pausing ports into trees and name each tree's origin (see the module docstring).

    ``peer(switch, port)`` is the monitored switch end at the other side of the cable, or None.
    Received pauses whose monitored sender shows none (its samples lag, or fell below threshold)
    are taken as sent by that peer port all the same; only pauses from outside (a server NIC, an
    unmonitored device) enter through an outside node.
    """
    items = list(pausing)
    graph = _Graph(peer)
    attach: dict[Pausing, Node] = {}
    tx_at: dict[PortKey, list[Pausing]] = defaultdict(list)
    for x in items:
        if x.direction == "tx":
            attach[x] = graph.sender(x.switch, x.port, x.priority)
            tx_at[x.key].append(x)
    for r in items:
        if r.direction != "rx":
            continue
        if (other := peer(r.switch, r.port)) is None:
            attach[r] = graph.outside(r.switch, r.port, r.priority)
            continue
        cause = next((s for s in tx_at.get(other, ()) if compatible(s.priority, r.priority)), None)
        attach[r] = attach[cause] if cause is not None else graph.sender(other[0], other[1], r.priority)
    return _storms(items, attach, graph.close())


def _storms(items: list[Pausing], attach: dict[Pausing, Node], edges: dict[Node, set[Node]]) -> list[Storm]:
    comp = _sccs(edges)
    fed = {comp[b] for a, bs in edges.items() for b in bs if comp[a] != comp[b]}
    by_node: dict[Node, list[Pausing]] = defaultdict(list)
    for x in items:
        by_node[attach[x]].append(x)
    roots: dict[int, tuple[Pausing, Node]] = {}  # root SCC -> its strongest sender or outside-facing receiver
    for node, xs in by_node.items():
        c = comp[node]
        if c in fed or node[0] == "hub":
            continue
        x = _link_view(node, xs)
        if c not in roots or _strength(x) > _strength(roots[c][0]):
            roots[c] = (x, node)
    tree_of = {n: i for i, tree in enumerate(_weak_components(edges)) for n in tree}
    members: dict[int, list[Pausing]] = defaultdict(list)
    for x in items:
        members[tree_of[attach[x]]].append(x)
    origins: dict[int, list[tuple[Pausing, Node]]] = defaultdict(list)
    for x, node in roots.values():
        origins[tree_of[node]].append((x, node))
    storms: list[Storm] = []
    for i, xs in sorted(members.items(), key=lambda kv: min(_order(x) for x in kv[1])):
        if not origins[i]:
            continue
        (o, node), *others = sorted(origins[i], key=lambda xn: _strength(xn[0]), reverse=True)
        kind: Literal["sender", "facing_source"] = "facing_source" if node[0] == "ext" else "sender"
        seen = tuple(sorted(by_node[node], key=_order))
        storms.append(Storm(o, kind, tuple(sorted(xs, key=_order)), tuple(x for x, _ in others), seen))
    return storms


def _link_view(node: Node, xs: list[Pausing]) -> Pausing:
    """The pauses of a root node as the port they start from: an outside source's by the receiving
    port's sample; a sender's by the stronger end of its link, named as the sender.

    The sender's sent pauses and its peer's received ones are the same frames, sampled at other
    instants: while a storm starts, one end may show a partial first sample, or (its samples lag,
    or fell just below threshold) nothing at all, when the other already shows the full rate.
    """
    if node[0] != "tx":
        return max(xs, key=_strength)
    own = next((x for x in xs if x.direction == "tx"), None)
    best = max(xs, key=lambda x: (x.ratio, x.load, x.sustained_s, x is own))  # the sender's own on a tie
    if best is own:
        return replace(own, peak=max(x.peak for x in xs), sustained_s=max(x.sustained_s for x in xs))
    return Pausing(
        node[1], node[2], own.priority if own is not None else best.priority, "tx", best.ratio,
        max(x.peak for x in xs), max(x.sustained_s for x in xs), best.pps, best.load,
    )  # fmt: skip


def _strength(x: Pausing) -> tuple[float, float, float, str, str]:
    return (x.ratio, x.load, x.sustained_s, x.switch, x.port)


def _order(x: Pausing) -> tuple[str, tuple[tuple[int, int | str], ...], int, str]:
    return (x.switch, port_order(x.port), x.priority, x.direction)


def _sccs(edges: dict[Node, set[Node]]) -> dict[Node, int]:
    """Strongly connected components (iterative Tarjan): node -> component number."""
    index: dict[Node, int] = {}
    low: dict[Node, int] = {}
    comp: dict[Node, int] = {}
    stack: list[Node] = []
    on_stack: set[Node] = set()
    count = 0
    for start in edges:
        if start in index:
            continue
        work: list[tuple[Node, list[Node]]] = [(start, sorted(edges[start]))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, todo = work[-1]
            if todo:
                nxt = todo.pop()
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, sorted(edges.get(nxt, ()))))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    comp[top] = count
                    if top == node:
                        break
                count += 1
    return comp


def _weak_components(edges: dict[Node, set[Node]]) -> list[set[Node]]:
    parent: dict[Node, Node] = {n: n for n in edges}

    def find(n: Node) -> Node:
        while parent[n] != n:
            parent[n] = parent[parent[n]]
            n = parent[n]
        return n

    for a, bs in edges.items():
        for b in bs:
            parent.setdefault(b, b)
            ra, rb = find(a), find(b)
            if ra != rb:
                parent[ra] = rb
    groups: dict[Node, set[Node]] = defaultdict(set)
    for n in parent:
        groups[find(n)].add(n)
    return list(groups.values())

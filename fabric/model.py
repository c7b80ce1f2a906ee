"""The fabric model: switches, servers and links, plus the lookups every package needs.

A :class:`Fabric` is plain data (what :func:`fabric.topology.build_aipod` builds or
:func:`fabric.inventory.load_inventory` reads) with indexes built once, on first use:
per-port views, peers, the servers under a switch and design capacity ratios. Treat a
fabric as immutable once built; the indexes are not refreshed after a change.

Tiers, from the bottom: server (0) < leaf (1) < spine (2) < superspine (3). A
:class:`Link` always has its lower-tier end in ``a``. Port names are free text, as the
device reports them (``Ethernet1/1``, ``et-0/0/1:2``, ``mlx5_0``): nothing here parses a
port number. A switch's ports are the names it lists (:attr:`Switch.ports`) or, for a
fabric written before names were free, ``swp1..swp{radix}``. A port faces down when it is
the upper end of a cable and up when it is the lower end; an uncabled port of a listed plan
faces down in the lower half of the list and up in the upper half, and every port of the top
tier faces down. A server's rail NICs are named per rail (:attr:`Server.nics`); an older
server without names has ``nic{k}`` for rail ``k``.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Literal, NamedTuple

from fabric.errors import TopologyError
from fabric.params import FabricParams as FabricParams  # where every package has imported it from
from fabric.params import max_gpus as max_gpus

SWITCH_PORT_PREFIX = "swp"
LEGACY_NIC_PREFIX = "nic"


class Role(StrEnum):
    """The tier a switch sits in."""

    LEAF = "leaf"
    SPINE = "spine"
    SUPERSPINE = "superspine"


class LinkKind(StrEnum):
    """Which two tiers a link joins, lower tier first."""

    SERVER_LEAF = "server-leaf"
    LEAF_SPINE = "leaf-spine"
    SPINE_SUPERSPINE = "spine-superspine"


#: Tier of each switch role; servers are tier 0.
TIER: dict[Role, int] = {Role.LEAF: 1, Role.SPINE: 2, Role.SUPERSPINE: 3}

#: The (lower, upper) roles each link kind joins; ``None`` stands for a server.
LINK_ENDS: dict[LinkKind, tuple[Role | None, Role]] = {
    LinkKind.SERVER_LEAF: (None, Role.LEAF),
    LinkKind.LEAF_SPINE: (Role.LEAF, Role.SPINE),
    LinkKind.SPINE_SUPERSPINE: (Role.SPINE, Role.SUPERSPINE),
}


@dataclass(frozen=True, slots=True)
class Switch:
    """One switch; ``index`` is its 1-based ordinal within its role, in build order.

    ``ports`` lists the switch's port names in the design's order; empty means the legacy plan
    ``swp1..swp{radix}``. ``radix`` is the number of ports the design knows, ``speed_gbps`` the
    speed of a port no cable names, and ``nos`` the operating system it runs, when known.
    """

    name: str
    role: Role
    index: int
    group: int | None
    rail: int | None
    plane: int | None
    radix: int
    speed_gbps: int
    mgmt_address: str | None = None
    nos: str | None = None
    ports: tuple[str, ...] = ()

    def port_names(self) -> tuple[str, ...]:
        """The switch's port names in design order."""
        return self.ports or tuple(legacy_port_name(n) for n in range(1, self.radix + 1))


@dataclass(frozen=True, slots=True)
class Server:
    """One GPU server: ``index`` is 1-based within its group.

    ``nics`` pairs each rail NIC's name with its rail (``(("mlx5_0", 1), ...)``); empty means
    the legacy names ``nic1..nic{gpus}`` for rails 1..gpus.
    """

    name: str
    group: int
    index: int
    gpus: int
    nics: tuple[tuple[str, int], ...] = ()

    def nic_rails(self) -> tuple[tuple[str, int], ...]:
        """(NIC name, rail) for every rail NIC of the server."""
        return self.nics or tuple((f"{LEGACY_NIC_PREFIX}{k}", k) for k in range(1, self.gpus + 1))


class Endpoint(NamedTuple):
    """One end of a link: a switch or server name and its port name."""

    node: str
    port: str


@dataclass(frozen=True, slots=True)
class Link:
    """A cable between two tiers; ``a`` is always the lower tier."""

    a: Endpoint
    b: Endpoint
    kind: LinkKind
    rail: int | None
    speed_gbps: int


Direction = Literal["down", "up"]


@dataclass(frozen=True, slots=True)
class PortInfo:
    """A switch port as the design sees it; ``peer`` is None for an unconnected port.

    ``number`` is the port's 1-based position in its switch's list: an order, not a name.
    """

    switch: str
    name: str
    number: int
    direction: Direction
    speed_gbps: int
    peer: Endpoint | None
    link_kind: LinkKind | None


def legacy_port_name(number: int) -> str:
    """Port ``number`` (1-based) of a switch that lists no port names: ``swp{number}``."""
    return f"{SWITCH_PORT_PREFIX}{number}"


def natural_key(name: str) -> tuple[tuple[int, int | str], ...]:
    """A sort key that orders ``Ethernet2`` before ``Ethernet10`` and ``et-0/0/1:2`` before ``et-0/0/10``."""
    return tuple((0, int(part)) if part.isdigit() else (1, part) for part in _PARTS.findall(name))


_PARTS = re.compile(r"\d+|\D+")


class _Index:
    """Lookups computed once from a fabric's links."""

    __slots__ = ("below", "capacity", "nic_of", "peers", "port_cache", "rail_of", "servers_cache", "top_tier")

    def __init__(self, fabric: Fabric) -> None:
        self.peers: dict[Endpoint, tuple[Endpoint, Link]] = {}
        self.below: dict[str, list[str]] = {name: [] for name in fabric.switches}
        # per switch: [down gbps, up gbps]
        self.capacity: dict[str, list[int]] = {name: [0, 0] for name in fabric.switches}
        self.port_cache: dict[str, list[PortInfo]] = {}
        self.servers_cache: dict[str, frozenset[str]] = {}
        self.nic_of: dict[tuple[str, int], str] = {}
        self.rail_of: dict[Endpoint, int] = {}
        for server in fabric.servers.values():
            for nic, rail in server.nic_rails():
                self.nic_of.setdefault((server.name, rail), nic)
                self.rail_of[Endpoint(server.name, nic)] = rail
        # an AIPod (generated, or a version 1 file) has three tiers by design, whatever it lists;
        # a cabling plan has the tiers its switches are in
        present = (TIER[sw.role] for sw in fabric.switches.values())
        self.top_tier = (
            TIER[Role.SUPERSPINE] if fabric.params is not None else max(present, default=TIER[Role.SUPERSPINE])
        )
        peers, below, capacity = self.peers, self.below, self.capacity
        for link in fabric.links:
            a, b = link.a, link.b
            peers[a] = (b, link)
            peers[b] = (a, link)
            if b.node in below:
                below[b.node].append(a.node)
                capacity[b.node][0] += link.speed_gbps
            if a.node in capacity:
                capacity[a.node][1] += link.speed_gbps


class Fabric:
    """A whole fabric: switches, servers and links, with lazily built lookups.

    ``params`` holds the AIPod parameters of a generated fabric (or a version 1 inventory); a
    fabric read from a cabling plan has none, and its figures (:attr:`rails`, :attr:`gpus`,
    :attr:`gpu_speed_gbps`...) come from its servers and cables instead.
    """

    __slots__ = ("_index", "_rails", "links", "name", "params", "servers", "switches")

    def __init__(
        self,
        params: FabricParams | None,
        switches: dict[str, Switch],
        servers: dict[str, Server],
        links: list[Link],
        *,
        name: str | None = None,
        rails: int | None = None,
    ) -> None:
        self.params = params
        self.switches = switches
        self.servers = servers
        self.links = links
        self.name = name
        self._rails = rails
        self._index: _Index | None = None

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Fabric):
            return NotImplemented
        return (
            self.params == other.params
            and self.name == other.name
            and self.rails == other.rails
            and self.switches == other.switches
            and self.servers == other.servers
            and self.links == other.links
        )

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (
            f"Fabric({self.params or self.name!r}, {len(self.switches)} switches, "
            f"{len(self.servers)} servers, {len(self.links)} links)"
        )

    @property
    def _ix(self) -> _Index:
        if self._index is None:
            self._index = _Index(self)
        return self._index

    # -- figures ------------------------------------------------------------------------

    @property
    def rails(self) -> int:
        """Rails: GPUs (and rail NICs) per server."""
        if self._rails is not None:
            return self._rails
        if self.params is not None:
            return self.params.rails
        return max((len(s.nic_rails()) for s in self.servers.values()), default=1)

    @property
    def gpus(self) -> int:
        """GPUs in the fabric: one per rail NIC of every server."""
        return sum(s.gpus for s in self.servers.values())

    @property
    def gpu_speed_gbps(self) -> int:
        """The speed of one GPU's NIC: the most common server cable speed (the params' port speed)."""
        if self.params is not None:
            return self.params.speed_gbps
        speeds = Counter(ln.speed_gbps for ln in self.links if ln.kind is LinkKind.SERVER_LEAF)
        if speeds:
            return speeds.most_common(1)[0][0]
        return max((sw.speed_gbps for sw in self.switches.values()), default=400)

    @property
    def group_gpus(self) -> int:
        """GPUs in the largest aggregation group (512 in a full AIPod group at radix 128)."""
        if self.params is not None:
            return self.params.group_gpus
        per_group = Counter[int]()
        for s in self.servers.values():
            per_group[s.group] += s.gpus
        return max(per_group.values(), default=0)

    @property
    def label(self) -> str:
        """A short name for the fabric: its own, else ``aipod-{gpus}``."""
        return self.name or f"aipod-{self.gpus}"

    @property
    def top_role(self) -> Role:
        """The highest tier present: superspine in a 3-tier fabric, spine in a 2-tier one."""
        return {tier: role for role, tier in TIER.items()}[self._ix.top_tier]

    def _switch(self, name: str) -> Switch:
        try:
            return self.switches[name]
        except KeyError:
            raise TopologyError(f"unknown switch {name!r}") from None

    # -- ports ----------------------------------------------------------------------------

    def ports(self, switch: str) -> list[PortInfo]:
        """All the design's ports of a switch in its order; unconnected ones have peer None."""
        cached = self._ix.port_cache.get(switch)
        if cached is None:
            sw = self._switch(switch)
            peers = self._ix.peers
            top = TIER[sw.role] >= self._ix.top_tier
            names = sw.port_names()
            half = len(names) // 2
            cached = []
            for number, name in enumerate(names, 1):
                hit = peers.get(Endpoint(switch, name))
                peer, link = hit if hit is not None else (None, None)
                direction: Direction
                if link is not None:
                    direction = "down" if link.b == (switch, name) else "up"
                else:
                    direction = "down" if top or number <= half else "up"
                cached.append(
                    PortInfo(
                        switch=switch,
                        name=name,
                        number=number,
                        direction=direction,
                        speed_gbps=link.speed_gbps if link is not None else sw.speed_gbps,
                        peer=peer,
                        link_kind=link.kind if link is not None else None,
                    )
                )
            self._ix.port_cache[switch] = cached
        return list(cached)

    def all_ports(self) -> Iterator[PortInfo]:
        """Every port of every switch, switch by switch in the fabric's order."""
        for name in self.switches:
            yield from self.ports(name)

    def peer(self, endpoint: Endpoint) -> Endpoint | None:
        """The other end of the link at ``endpoint``, or None when nothing is cabled there."""
        hit = self._ix.peers.get(endpoint)
        return hit[0] if hit is not None else None

    def link_at(self, endpoint: Endpoint) -> Link | None:
        """The cable at ``endpoint``, or None."""
        hit = self._ix.peers.get(endpoint)
        return hit[1] if hit is not None else None

    # -- servers --------------------------------------------------------------------------

    def nic(self, server: str, rail: int) -> str | None:
        """The name of ``server``'s NIC on ``rail`` (GPU ``rail``), or None when it has none."""
        return self._ix.nic_of.get((server, rail))

    def nic_rail(self, server: str, nic: str) -> int | None:
        """The rail (and GPU index) of ``server``'s NIC ``nic``, or None when it is no rail NIC."""
        return self._ix.rail_of.get(Endpoint(server, nic))

    def leaf_for(self, server: str, gpu: int) -> str:
        """The leaf that GPU ``gpu`` (1-based, its rail) of ``server`` is cabled to."""
        if server not in self.servers:
            raise TopologyError(f"unknown server {server!r}")
        nic = self.nic(server, gpu)
        peer = None if nic is None else self.peer(Endpoint(server, nic))
        if peer is None:
            raise TopologyError(f"{server} GPU {gpu} is not cabled to a leaf")
        return peer.node

    def servers_on(self, switch: str) -> set[str]:
        """Servers whose traffic can cross ``switch``: cabled to a leaf, or anywhere below a spine."""
        return set(self._servers_below(switch))

    def _servers_below(self, switch: str) -> frozenset[str]:
        cache = self._ix.servers_cache
        found = cache.get(switch)
        if found is None:
            self._switch(switch)
            acc: set[str] = set()
            for node in self._ix.below[switch]:
                if node in self.servers:
                    acc.add(node)
                elif node in self.switches:
                    acc |= self._servers_below(node)
            found = cache[switch] = frozenset(acc)
        return found

    # -- design figures -------------------------------------------------------------------

    def capacity(self, switch: str) -> tuple[int, int]:
        """Design (down, up) capacity of a switch in Gbit/s, from its links."""
        self._switch(switch)
        down, up = self._ix.capacity[switch]
        return down, up

    def design_ratio(self, switch: str) -> float:
        """Design down:up capacity ratio: 1.0 is non-blocking; the top tier is 1.0.

        A leaf or spine below the top with downlinks and no uplink is infinitely
        oversubscribed (``inf``).
        """
        sw = self._switch(switch)
        down, up = self._ix.capacity[switch]
        if TIER[sw.role] >= self._ix.top_tier or down == up:
            return 1.0
        if up == 0:
            return math.inf
        return down / up

    def summary(self) -> dict[str, Any]:
        """The fabric's counts and design figures (the ``topology --summary`` payload)."""
        roles = [sw.role for sw in self.switches.values()]
        top = self._ix.top_tier
        ratios = [self.design_ratio(n) for n, sw in self.switches.items() if TIER[sw.role] < top]
        radix = max((sw.radix for sw in self.switches.values()), default=0)
        return {
            "gpus": self.gpus,
            "servers": len(self.servers),
            "groups": len({s.group for s in self.servers.values()}),
            "rails": self.rails,
            "leaves": roles.count(Role.LEAF),
            "spines": roles.count(Role.SPINE),
            "superspines": roles.count(Role.SUPERSPINE),
            "switches": len(self.switches),
            "links": len(self.links),
            "ports": sum(sw.radix for sw in self.switches.values()),
            "group_gpus": self.group_gpus,
            "max_gpus": self.params.max_gpus if self.params is not None else max_gpus(self.rails, radix),
            "radix": self.params.radix if self.params is not None else radix,
            "speed_gbps": self.gpu_speed_gbps,
            "tiers": top,
            "oversubscription": max(ratios, default=1.0),
        }

"""The fabric model: switches, servers and links, plus the lookups every package needs.

A :class:`Fabric` is plain data (what :func:`fabric.topology.build_aipod` builds or
:func:`fabric.inventory.load_inventory` reads) with indexes built once, on first use:
per-port views, peers, the servers under a switch and design capacity ratios. Treat a
fabric as immutable once built; the indexes are not refreshed after a change.

Tiers, from the bottom: server (0) < leaf (1) < spine (2) < superspine (3). A
:class:`Link` always has its lower-tier end in ``a``. Switch ports are ``swp1`` ..
``swp{radix}``; on leaves and spines the lower half faces down and the upper half up,
superspines are the top tier and all their ports face down. A server's NIC for GPU ``k``
is port ``nic{k}``.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Literal, NamedTuple

from fabric.errors import TopologyError

SWITCH_PORT_PREFIX = "swp"
NIC_PORT_PREFIX = "nic"


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


def max_gpus(rails: int, radix: int) -> int:
    """Largest 3-tier AIPod fabric a radix allows: (radix/2) groups of (radix/2) servers x rails GPUs.

    Each leaf needs at least one uplink to every spine of its rail, and a leaf has radix/2
    uplinks, so a rail has at most radix/2 spines, hence at most radix/2 groups.
    """
    half = radix // 2
    return half * half * rails


def _check_int(name: str, value: object, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TopologyError(f"{name} must be an integer (got {value!r})")
    if value < minimum:
        raise TopologyError(f"{name} must be >= {minimum} (got {value})")
    return value


@dataclass(frozen=True, slots=True)
class FabricParams:
    """The parameters of an AIPod fabric (SPEC §6); a constructed instance is always buildable."""

    gpus: int
    rails: int = 8
    radix: int = 128
    speed_gbps: int = 400

    def __post_init__(self) -> None:
        speed: object = self.speed_gbps
        if isinstance(speed, float) and speed.is_integer():
            # config files may say 400.0; keep params comparable and ports integral
            object.__setattr__(self, "speed_gbps", int(speed))
        _check_int("rails", self.rails, 1)
        _check_int("speed_gbps", self.speed_gbps, 1)
        _check_int("radix", self.radix, 4)
        if self.radix % 2:
            raise TopologyError(f"radix must be even: half the ports face down, half up (got {self.radix})")
        _check_int("gpus", self.gpus, 1)
        if self.gpus % self.rails:
            raise TopologyError(
                f"gpus={self.gpus} is not a multiple of rails={self.rails}: each server has one GPU per rail"
            )
        if self.gpus > self.max_gpus:
            raise TopologyError(
                f"gpus={self.gpus} exceeds max_gpus={self.max_gpus} for radix {self.radix} with {self.rails} rails"
            )

    @property
    def servers_per_group(self) -> int:
        """Servers under one leaf: one per down port, radix/2."""
        return self.radix // 2

    @property
    def group_gpus(self) -> int:
        """GPUs in a full aggregation group (512 at radix 128 with 8 rails)."""
        return self.servers_per_group * self.rails

    @property
    def servers(self) -> int:
        """Servers in the fabric, each with one GPU per rail."""
        return self.gpus // self.rails

    @property
    def groups(self) -> int:
        """Aggregation groups; the last one may be partial. Also the spines per rail."""
        return -(-self.servers // self.servers_per_group)

    @property
    def superspines_per_plane(self) -> int:
        """Superspines that take the uplinks of one spine per rail: ceil(rails * (radix/2) / radix)."""
        return -(-(self.rails * self.servers_per_group) // self.radix)

    @property
    def max_gpus(self) -> int:
        """Largest fabric these rails and radix allow (see :func:`max_gpus`)."""
        return max_gpus(self.rails, self.radix)


@dataclass(frozen=True, slots=True)
class Switch:
    """One switch; ``index`` is its 1-based ordinal within its role, in build order."""

    name: str
    role: Role
    index: int
    group: int | None
    rail: int | None
    plane: int | None
    radix: int
    speed_gbps: int
    mgmt_address: str | None = None


@dataclass(frozen=True, slots=True)
class Server:
    """One GPU server: ``index`` is 1-based within its group; NIC ``nic{k}`` serves GPU k."""

    name: str
    group: int
    index: int
    gpus: int


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
    """A switch port as the design sees it; ``peer`` is None for an unconnected port."""

    switch: str
    name: str
    number: int
    direction: Direction
    speed_gbps: int
    peer: Endpoint | None
    link_kind: LinkKind | None


def port_name(number: int) -> str:
    """The name of switch port ``number`` (1-based)."""
    return f"{SWITCH_PORT_PREFIX}{number}"


def port_number(name: str, prefix: str = SWITCH_PORT_PREFIX) -> int | None:
    """The 1-based number in a port name such as ``swp12`` or ``nic3``; None if it has another form."""
    if not name.startswith(prefix):
        return None
    digits = name[len(prefix) :]
    if not digits.isdigit() or digits.startswith("0"):
        return None
    return int(digits)


def port_direction(switch: Switch, number: int) -> Direction:
    """Down or up, by the design's port plan: top-tier ports all face down."""
    if switch.role is Role.SUPERSPINE or number <= switch.radix // 2:
        return "down"
    return "up"


class _Index:
    """Lookups computed once from a fabric's links."""

    __slots__ = ("below", "capacity", "peers", "port_cache", "servers_cache")

    def __init__(self, fabric: Fabric) -> None:
        self.peers: dict[Endpoint, tuple[Endpoint, Link]] = {}
        self.below: dict[str, list[str]] = {name: [] for name in fabric.switches}
        # per switch: [down gbps, up gbps]
        self.capacity: dict[str, list[int]] = {name: [0, 0] for name in fabric.switches}
        self.port_cache: dict[str, list[PortInfo]] = {}
        self.servers_cache: dict[str, frozenset[str]] = {}
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
    """A whole fabric: parameters, switches, servers and links, with lazily built lookups."""

    __slots__ = ("_index", "links", "params", "servers", "switches")

    def __init__(
        self,
        params: FabricParams,
        switches: dict[str, Switch],
        servers: dict[str, Server],
        links: list[Link],
    ) -> None:
        self.params = params
        self.switches = switches
        self.servers = servers
        self.links = links
        self._index: _Index | None = None

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Fabric):
            return NotImplemented
        return (
            self.params == other.params
            and self.switches == other.switches
            and self.servers == other.servers
            and self.links == other.links
        )

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (
            f"Fabric({self.params!r}, {len(self.switches)} switches, "
            f"{len(self.servers)} servers, {len(self.links)} links)"
        )

    @property
    def _ix(self) -> _Index:
        if self._index is None:
            self._index = _Index(self)
        return self._index

    def _switch(self, name: str) -> Switch:
        try:
            return self.switches[name]
        except KeyError:
            raise TopologyError(f"unknown switch {name!r}") from None

    def ports(self, switch: str) -> list[PortInfo]:
        """All ``radix`` ports of a switch in port-number order; unconnected ones have peer None."""
        cached = self._ix.port_cache.get(switch)
        if cached is None:
            sw = self._switch(switch)
            peers = self._ix.peers
            cached = []
            for number in range(1, sw.radix + 1):
                name = port_name(number)
                hit = peers.get(Endpoint(switch, name))
                peer, link = hit if hit is not None else (None, None)
                cached.append(
                    PortInfo(
                        switch=switch,
                        name=name,
                        number=number,
                        direction=port_direction(sw, number),
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

    def leaf_for(self, server: str, gpu: int) -> str:
        """The leaf that GPU ``gpu`` (1-based) of ``server`` is cabled to."""
        if server not in self.servers:
            raise TopologyError(f"unknown server {server!r}")
        peer = self.peer(Endpoint(server, f"{NIC_PORT_PREFIX}{gpu}"))
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

    def capacity(self, switch: str) -> tuple[int, int]:
        """Design (down, up) capacity of a switch in Gbit/s, from its links."""
        self._switch(switch)
        down, up = self._ix.capacity[switch]
        return down, up

    def design_ratio(self, switch: str) -> float:
        """Design down:up capacity ratio: 1.0 is non-blocking; superspines (top tier) are 1.0.

        A leaf or spine with downlinks and no uplink is infinitely oversubscribed (``inf``).
        """
        sw = self._switch(switch)
        down, up = self._ix.capacity[switch]
        if sw.role is Role.SUPERSPINE or down == up:
            return 1.0
        if up == 0:
            return math.inf
        return down / up

    def summary(self) -> dict[str, Any]:
        """The fabric's counts and design figures (the ``topology --summary`` payload)."""
        roles = [sw.role for sw in self.switches.values()]
        ratios = [self.design_ratio(n) for n, sw in self.switches.items() if sw.role is not Role.SUPERSPINE]
        return {
            "gpus": sum(s.gpus for s in self.servers.values()),
            "servers": len(self.servers),
            "groups": len({s.group for s in self.servers.values()}),
            "rails": self.params.rails,
            "leaves": roles.count(Role.LEAF),
            "spines": roles.count(Role.SPINE),
            "superspines": roles.count(Role.SUPERSPINE),
            "switches": len(self.switches),
            "links": len(self.links),
            "ports": sum(sw.radix for sw in self.switches.values()),
            "group_gpus": self.params.group_gpus,
            "max_gpus": self.params.max_gpus,
            "radix": self.params.radix,
            "speed_gbps": self.params.speed_gbps,
            "oversubscription": max(ratios, default=1.0),
        }

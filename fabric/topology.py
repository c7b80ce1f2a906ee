"""The AIPod builder (SPEC §6): a 3-tier, rail-optimised, non-blocking CLOS from a few numbers.

Servers → leaves → spines → superspines, everything numbered from 1:

* A server has one GPU per rail; GPU ``k`` cables to leaf ``lf-g{group}-r{k}``, down port
  ``swp{i}`` for the ``i``-th server of the group. A group has radix/2 servers; the last
  group may be partial.
* A leaf takes exactly as many uplinks (``swp{radix/2+1}`` upward) as it has servers.
  Rail ``r`` has one spine ``sp-r{r}-{j}`` per group; the uplinks of rail ``r``'s leaves,
  taken group by group, are dealt round-robin over those spines like cards, so every spine
  gets ⌊n/G⌋ or ⌈n/G⌉ of them and a full leaf reaches every spine of its rail.
* Plane ``j`` is spine ``j`` of every rail; it has P = ⌈rails·(radix/2)/radix⌉ superspines
  ``ssp-{(j-1)·P+k}``. The uplinks of the plane's spines, taken rail by rail, are dealt the
  same way over its superspines, so each superspine joins several rails and no port runs out.
* Every leaf and spine has as many uplinks as downlinks: the design ratio is 1.0.

Switch and server down ports are numbered in the order their links arrive. Ports are
``swp{n}`` and NICs ``nic{k}`` by default; ``naming`` gives them a NOS's names instead
(:mod:`fabric.naming`), and records each switch's NOS.
"""

from __future__ import annotations

from fabric.model import (
    Endpoint,
    Fabric,
    FabricParams,
    Link,
    LinkKind,
    Role,
    Server,
    Switch,
    max_gpus,
)
from fabric.naming import check_naming, nic_names, port_names, switch_naming

__all__ = [
    "Fabric",
    "FabricParams",
    "build_aipod",
    "leaf_name",
    "max_gpus",
    "server_name",
    "spine_name",
    "superspine_name",
]


def leaf_name(group: int, rail: int) -> str:
    """``lf-g{group}-r{rail}``."""
    return f"lf-g{group}-r{rail}"


def spine_name(rail: int, index: int) -> str:
    """``sp-r{rail}-{index}``; ``index`` is also the spine's plane."""
    return f"sp-r{rail}-{index}"


def superspine_name(number: int) -> str:
    """``ssp-{number}``, numbered plane by plane."""
    return f"ssp-{number}"


def server_name(group: int, index: int) -> str:
    """``srv-g{group}-{index:03d}``."""
    return f"srv-g{group}-{index:03d}"


def build_aipod(params: FabricParams, naming: str = "swp") -> Fabric:
    """Build the AIPod fabric for ``params`` (already validated by :class:`FabricParams`).

    ``naming`` is ``swp`` (the original names), one NOS of :data:`fabric.naming.NOS_NAMINGS`,
    or ``mixed``; the cabling is the same whatever the names.
    """
    plan = _Plan(params, check_naming(naming))
    links: list[Link] = []
    servers = _server_links(plan, links)
    spine_down = _leaf_spine_links(plan, links)
    _spine_superspine_links(plan, spine_down, links)
    return Fabric(params, _switches(plan), servers, links)


class _Plan:
    """Names and sizes shared by the build steps (lists indexed from 0)."""

    def __init__(self, params: FabricParams, naming: str) -> None:
        self.params = params
        self.naming = naming
        self.rails, self.speed = params.rails, params.speed_gbps
        self.half = params.servers_per_group
        self.groups = params.groups
        self.per_plane = params.superspines_per_plane
        self.nics = nic_names(naming, params.rails) if naming != "swp" else ()
        self.group_sizes = [min(self.half, params.servers - g * self.half) for g in range(self.groups)]
        group_range, rail_range = range(1, self.groups + 1), range(1, self.rails + 1)
        self.leaves = [[leaf_name(g, r) for r in rail_range] for g in group_range]
        self.spines = [[spine_name(r, j) for j in group_range] for r in rail_range]
        self.supers = [
            [superspine_name((j - 1) * self.per_plane + k) for k in range(1, self.per_plane + 1)] for j in group_range
        ]
        ordered = [n for rows in (self.leaves, self.spines, self.supers) for row in rows for n in row]
        self.nos = {n: switch_naming(naming, i) for i, n in enumerate(ordered)}
        self._ports = {nos: port_names(nos, params.radix) for nos in set(self.nos.values())}

    def ports(self, switch: str) -> tuple[str, ...]:
        """The port names of ``switch``, plan port 1 first."""
        return self._ports[self.nos[switch]]

    def switch(
        self, name: str, role: Role, index: int, group: int | None, rail: int | None, plane: int | None
    ) -> Switch:
        """The :class:`Switch` of the plan named ``name``."""
        p, nos = self.params, self.nos[name]
        if self.naming == "swp":
            return Switch(name, role, index, group, rail, plane, p.radix, self.speed)
        return Switch(name, role, index, group, rail, plane, p.radix, self.speed, nos=nos, ports=self.ports(name))


def _switches(plan: _Plan) -> dict[str, Switch]:
    switches: dict[str, Switch] = {}
    for g, row in enumerate(plan.leaves, 1):
        for r, name in enumerate(row, 1):
            switches[name] = plan.switch(name, Role.LEAF, (g - 1) * plan.rails + r, g, r, None)
    for r, row in enumerate(plan.spines, 1):
        for j, name in enumerate(row, 1):
            switches[name] = plan.switch(name, Role.SPINE, (r - 1) * plan.groups + j, None, r, j)
    for j, row in enumerate(plan.supers, 1):
        for k, name in enumerate(row, 1):
            index = (j - 1) * plan.per_plane + k
            switches[name] = plan.switch(name, Role.SUPERSPINE, index, None, None, j)
    return switches


def _server_links(plan: _Plan, links: list[Link]) -> dict[str, Server]:
    """Servers, and their NIC k to leaf k of the group, down port = server index."""
    servers: dict[str, Server] = {}
    nics = plan.nics or nic_names("swp", plan.rails)
    named = tuple((nic, k) for k, nic in enumerate(plan.nics, 1))
    kind, speed = LinkKind.SERVER_LEAF, plan.speed
    for g, size in enumerate(plan.group_sizes, 1):
        group_leaves = plan.leaves[g - 1]
        for i in range(1, size + 1):
            name = server_name(g, i)
            servers[name] = Server(name, g, i, plan.rails, named)
            for k, nic in enumerate(nics):
                leaf = group_leaves[k]
                links.append(Link(Endpoint(name, nic), Endpoint(leaf, plan.ports(leaf)[i - 1]), kind, k + 1, speed))
    return servers


def _leaf_spine_links(plan: _Plan, links: list[Link]) -> list[list[int]]:
    """Deal each rail's leaf uplinks over its spines; returns downlinks per [rail][spine]."""
    spine_down = [[0] * plan.groups for _ in range(plan.rails)]
    half, kind, speed = plan.half, LinkKind.LEAF_SPINE, plan.speed
    for r in range(plan.rails):
        used, rail_spines = spine_down[r], plan.spines[r]
        dealt = 0
        for g, size in enumerate(plan.group_sizes):
            leaf = plan.leaves[g][r]
            for u in range(size):
                j = dealt % plan.groups
                dealt += 1
                used[j] += 1
                spine = rail_spines[j]
                up, down = Endpoint(leaf, plan.ports(leaf)[half + u]), Endpoint(spine, plan.ports(spine)[used[j] - 1])
                links.append(Link(up, down, kind, r + 1, speed))
    return spine_down


def _spine_superspine_links(plan: _Plan, spine_down: list[list[int]], links: list[Link]) -> None:
    """Deal each plane's spine uplinks (one per downlink) over the plane's superspines."""
    half, kind, speed = plan.half, LinkKind.SPINE_SUPERSPINE, plan.speed
    for j, plane in enumerate(plan.supers):
        taken = [0] * plan.per_plane
        dealt = 0
        for r in range(plan.rails):
            spine = plan.spines[r][j]
            for v in range(spine_down[r][j]):
                k = dealt % plan.per_plane
                dealt += 1
                taken[k] += 1
                top = plane[k]
                up, down = Endpoint(spine, plan.ports(spine)[half + v]), Endpoint(top, plan.ports(top)[taken[k] - 1])
                links.append(Link(up, down, kind, r + 1, speed))

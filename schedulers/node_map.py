"""Slurm node names <-> the fabric's server names (``schedulers.slurm.node_map``).

Three forms, all of them two-way, because a job's nodes come in (discovery) and a drain goes out:

* absent: identity (the Slurm node is the server of that name);
* a **table**, ``{slurm node: server}``; a name not in it maps to nothing (it is not a fabric
  server: a login or CPU node), and two nodes may not share a server;
* a **pattern** pair, ``{slurm: "gpu{n}", fabric: "srv-g1-{n}"}``: ``{field}`` placeholders
  match one or more characters other than ``.``; a name that does not match maps to nothing. Both
  templates must name the same fields, each once.

A server whose node Slurm does not have is reported by the caller (it drains nothing).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from fabric.errors import FabricmonError

_FIELD = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


class NodeMapError(FabricmonError, ValueError):
    """A node map that cannot work both ways."""


def _compile(template: str, where: str) -> tuple[re.Pattern[str], list[str]]:
    fields = _FIELD.findall(template)
    if not fields:
        raise NodeMapError(f"{where}: {template!r} names no {{field}}: use a table for fixed names")
    if len(set(fields)) != len(fields):
        raise NodeMapError(f"{where}: {template!r} names a field twice")
    rest = _FIELD.sub("", template)
    if "{" in rest or "}" in rest:
        raise NodeMapError(f"{where}: {template!r} has a brace that is not a {{field}}")
    regex = ""
    pos = 0
    for m in _FIELD.finditer(template):
        regex += re.escape(template[pos : m.start()]) + f"(?P<{m.group(1)}>[^.]+?)"
        pos = m.end()
    regex += re.escape(template[pos:])
    return re.compile(f"^{regex}$"), fields


@dataclass(frozen=True)
class NodeMap:
    """The two-way mapping; build with :func:`node_map`."""

    table: Mapping[str, str] | None = None
    slurm_template: str | None = None
    fabric_template: str | None = None
    _to_server: dict[str, str] = field(default_factory=dict, repr=False)
    _to_node: dict[str, str] = field(default_factory=dict, repr=False)
    _slurm_re: re.Pattern[str] | None = field(default=None, repr=False)
    _fabric_re: re.Pattern[str] | None = field(default=None, repr=False)

    @property
    def identity(self) -> bool:
        return self.table is None and self.slurm_template is None

    def server(self, node: str) -> str | None:
        """The fabric server for a Slurm node (None: not a fabric server)."""
        if self.table is not None:
            return self._to_server.get(node)
        if self._slurm_re is None or self.fabric_template is None:
            return node
        m = self._slurm_re.match(node)
        return None if m is None else self.fabric_template.format(**m.groupdict())

    def node(self, server: str) -> str | None:
        """The Slurm node for a fabric server (None: Slurm has no name for it)."""
        if self.table is not None:
            return self._to_node.get(server)
        if self._fabric_re is None or self.slurm_template is None:
            return server
        m = self._fabric_re.match(server)
        return None if m is None else self.slurm_template.format(**m.groupdict())


def node_map(spec: Mapping[str, str] | None) -> NodeMap:
    """The map from the config value (None, a table, or ``{slurm: ..., fabric: ...}``)."""
    if spec is None:
        return NodeMap()
    if set(spec) == {"slurm", "fabric"} and "{" in spec["slurm"] + spec["fabric"]:
        slurm_re, a = _compile(spec["slurm"], "node_map.slurm")
        fabric_re, b = _compile(spec["fabric"], "node_map.fabric")
        if sorted(a) != sorted(b):
            raise NodeMapError(f"node_map: slurm names fields {sorted(a)}, fabric names {sorted(b)}: they must match")
        return NodeMap(None, spec["slurm"], spec["fabric"], _slurm_re=slurm_re, _fabric_re=fabric_re)
    to_node: dict[str, str] = {}
    for node, server in spec.items():
        if not node or not server:
            raise NodeMapError("node_map: empty node or server name")
        if server in to_node:
            raise NodeMapError(f"node_map: nodes {to_node[server]!r} and {node!r} both map to server {server!r}")
        to_node[server] = node
    return NodeMap(dict(spec), _to_server=dict(spec), _to_node=to_node)


__all__ = ["NodeMap", "NodeMapError", "node_map"]

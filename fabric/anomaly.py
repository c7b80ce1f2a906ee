"""What a cabling plan gets wrong, as data: one :class:`Anomaly` per problem, named and placed."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class Anomaly:
    """One problem of a fabric's design or of its inventory file.

    ``kind`` is a stable identifier (``nic_wrong_rail``, ``port_used_twice``...), ``where`` the
    entry it comes from (``links[12]``) when it comes from a file, ``line`` that entry's line,
    and ``nodes`` the switches and servers it concerns.
    """

    kind: str
    message: str
    nodes: tuple[str, ...] = ()
    where: str | None = None
    line: int | None = None
    at: tuple[str | int, ...] = field(default=(), compare=False)

    def as_dict(self) -> dict[str, Any]:
        """The JSON form (``inventory check --json``)."""
        out: dict[str, Any] = {"kind": self.kind, "message": self.message, "nodes": list(self.nodes)}
        if self.where is not None:
            out["where"] = self.where
        if self.line is not None:
            out["line"] = self.line
        return out

    def __str__(self) -> str:
        place = f"line {self.line}: " if self.line is not None else ""
        return f"{place}{self.message}"

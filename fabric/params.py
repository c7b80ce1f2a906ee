"""The parameters of an AIPod fabric (SPEC §6): GPUs, rails, radix and speed, checked when made.

A :class:`FabricParams` is what :func:`fabric.topology.build_aipod` builds a fabric from; the
sizes that follow from it (servers per group, groups, superspines per plane) are its properties.
"""

from __future__ import annotations

from dataclasses import dataclass

from fabric.errors import TopologyError


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

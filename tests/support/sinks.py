"""A collector sink that takes everything and keeps nothing, for tests that watch something else."""

from __future__ import annotations

from collections.abc import Sequence

from collector.records import LldpReading, PortReading, TargetState


class NullSink:
    """What :class:`collector.records.Sink` asks for, doing nothing (subclasses keep what they test)."""

    async def put_ports(self, readings: Sequence[PortReading]) -> None:
        pass

    async def put_lldp(self, readings: Sequence[LldpReading]) -> None:
        pass

    def set_state(self, switch: str, state: TargetState, detail: str | None = None) -> None:
        pass

    def count_invalid(self, switch: str, what: str, n: int = 1) -> None:
        pass

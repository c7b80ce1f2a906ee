"""A FabricView over the real simulated fabric that a test can override piece by piece."""

from __future__ import annotations

from collections.abc import Sequence

from simulator.fabric_state import FabricState
from simulator.view import ChangeListener, LldpNeighbor, PortCounters, SwitchInfo


class StateView:
    """Everything as :class:`FabricState` has it; a subclass overrides what it changes (``ports``)."""

    def __init__(self, state: FabricState) -> None:
        self.state = state

    def switch_names(self) -> Sequence[str]:
        return self.state.switch_names()

    def switch(self, name: str) -> SwitchInfo | None:
        return self.state.switch(name)

    def ports(self, switch: str, now_ns: int | None = None) -> list[PortCounters]:
        return self.state.ports(switch, now_ns)

    def lldp(self, switch: str) -> list[LldpNeighbor]:
        return self.state.lldp(switch)

    def now_ns(self) -> int:
        return self.state.now_ns()

    def add_listener(self, listener: ChangeListener) -> None:
        self.state.add_listener(listener)

    def remove_listener(self, listener: ChangeListener) -> None:
        self.state.remove_listener(listener)

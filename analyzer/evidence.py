"""Typed evidence: what the correlation and the actions read of a finding, parsed once per rule.

A check writes its finding's ``details`` for people and receivers (the API, webhooks); the
correlation (:mod:`analyzer.correlation`) and the action table (:mod:`analyzer.actions`) read it
only through :func:`evidence_of`, which parses the fields they judge by into the frozen
dataclass of the finding's rule (:data:`analyzer.rules.RULES`, column ``evidence``). A field a
check left out, or of the wrong type, parses to its "nothing known" value, so a malformed detail
never crosses a threshold: numbers the actions compare are ``-inf`` then.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Self


def number(value: object, missing: float = -math.inf) -> float:
    """``value`` as a float; anything else (text, bool, NaN) is ``-inf`` and never crosses a
    threshold; ``missing`` when it is None."""
    if value is None:
        return missing
    if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
        return -math.inf
    return float(value)


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _texts(value: object) -> tuple[str, ...]:
    return tuple(str(x) for x in value) if isinstance(value, list | tuple) else ()


@dataclass(frozen=True, slots=True)
class Evidence:
    """What every finding may carry."""

    #: The largest training-speed loss it estimates (0 when none).
    efficiency_loss: float = 0.0
    #: How likely it interrupts a job (``-inf`` when it does not say).
    interruption_probability: float = -math.inf
    #: The server it is about, when it names one.
    server: str | None = None

    @classmethod
    def parse(cls, d: Mapping[str, Any]) -> Self:
        """The evidence in ``d`` (a finding's ``details``)."""
        return cls(**_common(d), **cls._own(d))

    @classmethod
    def _own(cls, d: Mapping[str, Any]) -> dict[str, Any]:
        return {}


def _common(d: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "efficiency_loss": max(0.0, number(d.get("efficiency_loss"))),
        "interruption_probability": number(d.get("interruption_probability")),
        "server": _text(d.get("server")),
    }


def max_loss(details: Iterable[Mapping[str, Any]]) -> float:
    """The largest finite ``efficiency_loss`` among ``details`` (0 when none has one)."""
    return max((max(0.0, number(d.get("efficiency_loss"))) for d in details), default=0.0)


@dataclass(frozen=True, slots=True)
class CollectionEvidence(Evidence):
    """``collection``: only samples late in our own pipeline, nothing else wrong."""

    lag_only: bool = False

    @classmethod
    def _own(cls, d: Mapping[str, Any]) -> dict[str, Any]:
        return {"lag_only": d.get("lag_only") is True}


@dataclass(frozen=True, slots=True)
class OutageEvidence(Evidence):
    """``link_outage``: one link's (``down_now``, outages), or a switch's links (``links_down``)."""

    #: False only when the link is known up again (a switch's outage counts links instead).
    down_now: bool | None = None
    longest_completed_s: float = -math.inf
    fatal_outage_s: float = math.inf
    #: A switch-level outage: the ``(switch, port)`` naming ends of its links down now.
    links_down: tuple[tuple[str, str], ...] = ()

    @property
    def up_again(self) -> bool:
        return self.down_now is False

    @classmethod
    def _own(cls, d: Mapping[str, Any]) -> dict[str, Any]:
        down: list[tuple[str, str]] = []
        for link in d.get("links") or () if isinstance(d.get("links"), list) else ():
            label = link.get("link") if isinstance(link, Mapping) else None
            if isinstance(label, str) and link.get("down_now"):
                switch, sep, port = label.split(" ", 1)[0].partition(":")
                if sep:
                    down.append((switch, port))
        now = d.get("down_now")
        return {
            "down_now": now if isinstance(now, bool) else None,
            "longest_completed_s": number(d.get("longest_completed_s")),
            "fatal_outage_s": number(d.get("fatal_outage_s"), missing=math.inf),
            "links_down": tuple(down),
        }


@dataclass(frozen=True, slots=True)
class StaleEvidence(Evidence):
    """``stale_switch``: the collector's session state and what its peers see of its links."""

    state: str | None = None
    peer_links_up: int | None = None
    peer_links_down: int | None = None

    @property
    def gone(self) -> bool:
        """Its peers see its links down, none up: the switch is gone, not just silent."""
        return self.peer_links_down is not None and self.peer_links_down > 0 and not self.peer_links_up

    @property
    def forwarding(self) -> bool:
        """Its peers see its links up and none down: it forwards, we do not hear it."""
        return self.peer_links_up is not None and self.peer_links_up > 0 and self.peer_links_down == 0

    @classmethod
    def _own(cls, d: Mapping[str, Any]) -> dict[str, Any]:
        return {
            "state": _text(d.get("state")),
            "peer_links_up": _int(d.get("peer_links_up")),
            "peer_links_down": _int(d.get("peer_links_down")),
        }


@dataclass(frozen=True, slots=True)
class StormEvidence(Evidence):
    """``pfc_storm``: the origin port and its peer, and every port of the pause tree."""

    origin_port: str | None = None
    origin_peer: str | None = None
    affected_ports: tuple[str, ...] = ()

    @classmethod
    def _own(cls, d: Mapping[str, Any]) -> dict[str, Any]:
        origin = d.get("origin")
        origin = origin if isinstance(origin, Mapping) else {}
        return {
            "origin_port": str(origin["port"]) if origin.get("port") else None,
            "origin_peer": str(origin["peer"]) if origin.get("peer") else None,
            "affected_ports": _texts(d.get("affected_ports")),
        }


@dataclass(frozen=True, slots=True)
class MiswireEvidence(Evidence):
    """``miswire``: where the NIC should be cabled and where it is."""

    expected_leaf: str | None = None
    actual_leaf: str | None = None
    actual_port: str | None = None
    #: Where it is, when the check names it so (a cable on the wrong port of the right switch).
    leaf: str | None = None
    port: str | None = None

    @property
    def leaves(self) -> tuple[str, ...]:
        """The expected and actual leaves it names."""
        return tuple(x for x in (self.expected_leaf, self.actual_leaf) if x)

    @property
    def wrong_rail(self) -> bool:
        """Cabled to another leaf than the one its rail needs."""
        return bool(self.expected_leaf) and self.expected_leaf != self.actual_leaf

    @classmethod
    def _own(cls, d: Mapping[str, Any]) -> dict[str, Any]:
        keys = ("expected_leaf", "actual_leaf", "actual_port", "leaf", "port")
        return {k: str(d[k]) if d.get(k) else None for k in keys}


@dataclass(frozen=True, slots=True)
class CapacityEvidence(Evidence):
    """Drift and rail findings: the rail, its bottleneck switch, and the links it counts lost."""

    rail: int | None = None
    bottleneck: str | None = None
    #: ``switch:port`` of the links a rail finding counts lost or slowed.
    lost_ports: tuple[str, ...] = ()
    #: A drift's uplinks lost (port names of its switch).
    uplinks_lost: tuple[str, ...] = ()

    @classmethod
    def _own(cls, d: Mapping[str, Any]) -> dict[str, Any]:
        return {
            "rail": _int(d.get("rail")),
            "bottleneck": _text(d.get("bottleneck")),
            "lost_ports": _texts(d.get("lost_ports")),
            "uplinks_lost": _texts(d.get("uplinks_lost")),
        }


@dataclass(frozen=True, slots=True)
class DegradingEvidence(Evidence):
    """``link_degrading``: when the trend says the link fails, from what, and how sure."""

    time_to_failure_s: float | None = None
    basis: str | None = None
    confidence: float = -math.inf

    @classmethod
    def _own(cls, d: Mapping[str, Any]) -> dict[str, Any]:
        ttf = d.get("time_to_failure_s")
        return {
            "time_to_failure_s": float(ttf) if isinstance(ttf, int | float) and not isinstance(ttf, bool) else None,
            "basis": _text(d.get("basis")),
            "confidence": number(d.get("confidence")),
        }
